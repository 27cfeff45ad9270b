/* mpihello.c — an MPI program as its users write it, built with mpicc
 * (Open MPI 4.1 on Debian, over the PMIx library it was built with) and
 * run unchanged under pmixbus: MPI_Init, the world's rank and size, its
 * app context (MPI_APPNUM), an Allreduce of the ranks, MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, sum = 0, flag = 0, *appnum = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("hello from %d of %d, appnum %d, sum %d\n", rank, size, flag ? *appnum : -1, sum);
    MPI_Finalize();
    return 0;
}
