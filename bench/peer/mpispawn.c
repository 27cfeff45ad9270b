/* mpispawn.c: the spawn side of "pmixbus bench peer", built with mpicc. The
 * parent (one rank) times MPI_Comm_spawn of argv[1] children of this
 * program, from the call to the intercommunicator, and prints "mpi_spawn
 * <nanoseconds>"; parent and children then disconnect and end. One spawn a
 * run: Open MPI 4.1.4's mpirun hangs on a third spawn of one job. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    long long t;
    char *cargv[] = {"child", NULL};
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (MPI_COMM_NULL != parent) {
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    t = now();
    if (MPI_SUCCESS != MPI_Comm_spawn(argv[0], cargv, argc > 1 ? atoi(argv[1]) : 4, MPI_INFO_NULL, 0,
                                      MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE)) {
        return 1;
    }
    printf("mpi_spawn %lld\n", now() - t);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return 0;
}
