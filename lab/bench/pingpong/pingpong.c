/* The MPI reference of the remote hand-off figure: two ranks bounce an 8-byte message.
 * Prints "round-trip=NS" (nanoseconds per round trip, the best of the given rounds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	double buf = 0, best = -1;
	for (int r = 0; r <= rounds; r++) { /* round 0 warms up */
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (long i = 0; i < iters; i++) {
			if (rank == 0) {
				MPI_Send(&buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
				MPI_Recv(&buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(&buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(&buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
			}
		}
		double ns = (MPI_Wtime() - t0) / iters * 1e9;
		if (r > 0 && (best < 0 || ns < best))
			best = ns;
	}
	if (rank == 0)
		printf("round-trip=%.1f\n", best);
	MPI_Finalize();
	return 0;
}
