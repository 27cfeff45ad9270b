/* mpihello.c — an MPI program as its users write it, built with mpicc
 * (Open MPI 4.1 on Debian, over the PMIx library it was built with) and
 * run unchanged under pmixbus: MPI_Init, the world's rank and size, an
 * Allreduce of the ranks, MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("hello from %d of %d, sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
