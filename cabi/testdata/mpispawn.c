/* mpispawn.c — MPI_Comm_spawn as its users write it, built with mpicc and
 * run unchanged under pmixbus and under mpirun. The parents (every rank
 * of MPI_COMM_WORLD, root 0) spawn argv[1] children of this program; each
 * child reads its parent communicator and the parents and children add
 * their ranks over the intercommunicator. With argv[2] "bad" the parents
 * spawn a program that does not exist: every parent gets the error back
 * (MPI_ERRORS_RETURN), none waits for ever. "bench N": the root times N
 * spawns of argv[1] children that disconnect and end at once. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 2, rc, sum = 0, rsize = 0;
    int bad = argc > 2 && 0 == strcmp(argv[2], "bad");
    int bench = argc > 3 && 0 == strcmp(argv[2], "bench") ? atoi(argv[3]) : 0;
    char *cargv[] = {"child", NULL};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_parent(&parent);
    if (MPI_COMM_NULL != parent) {
        MPI_Comm_remote_size(parent, &rsize);
        if (argc < 3 || 0 != strcmp(argv[2], "quiet")) {
            MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, parent);
            printf("child %d of %d: %d parents, their ranks sum %d\n", rank, size, rsize, sum);
        }
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (bench > 0) {
        char *qargv[] = {"1", "quiet", NULL};
        double t0 = MPI_Wtime();
        int i;
        qargv[0] = argv[1];
        for (i = 0; i < bench; i++) {
            rc = MPI_Comm_spawn(argv[0], qargv, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
            if (MPI_SUCCESS != rc) {
                printf("parent %d: spawn failed: %d\n", rank, rc);
                break;
            }
            MPI_Comm_disconnect(&inter);
        }
        if (0 == rank) {
            printf("spawn of %d: %.0f us\n", n, (MPI_Wtime() - t0) / bench * 1e6);
        }
        MPI_Finalize();
        return 0;
    }
    rc = MPI_Comm_spawn(bad ? "/nonexistent/mpispawn-child" : argv[0], cargv, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                        &inter, MPI_ERRCODES_IGNORE);
    if (MPI_SUCCESS != rc) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0, class = 0;
        MPI_Error_class(rc, &class);
        MPI_Error_string(rc, msg, &len);
        printf("parent %d of %d: spawn failed: class %d (%s)\n", rank, size, class, msg);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_remote_size(inter, &rsize);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, inter);
    printf("parent %d of %d: %d children, their ranks sum %d\n", rank, size, rsize, sum);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return 0;
}
