/* mpiinit.c: the MPI side of "pmixbus bench peer", built with mpicc. Rank 0
 * prints the slowest rank's MPI_Init time, "mpi_init <nanoseconds>", and the
 * world's size. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static long long now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int rank, size;
    long long t = now(), slowest = 0;

    MPI_Init(&argc, &argv);
    t = now() - t;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Reduce(&t, &slowest, 1, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (0 == rank)
        printf("mpi_init %lld\nsize %d\n", slowest, size);
    MPI_Finalize();
    return 0;
}
