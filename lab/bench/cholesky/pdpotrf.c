/*
 * pdpotrf: the ScaLAPACK reference of `go run ./lab/bench cholesky`.
 *
 * Usage: mpirun -np P*Q pdpotrf N NB P Q REPS
 *
 * Factors A = L*L^T with PDPOTRF, A of order N distributed block-cyclically (block NB,
 * process grid P x Q in row-major order) and symmetric positive definite: N on the
 * diagonal, uniform in [-1, 1) off it. Each of the REPS calls factors a fresh copy (copied
 * outside the timing), timed from a barrier to the end of the slowest rank's call. Rank 0
 * prints "first=F seconds=S residual=R verified=V": the first call's time, the fastest,
 * and the scaled residual sqrt(N) ||A x - L (L^T x)|| / (||x|| ||A||_F N eps) of the last
 * factor for a fixed x (V: R < 30), as the ORWL example reports it. The kernel threads
 * follow OPENBLAS_NUM_THREADS. The bench harness builds it with mpicc against Debian's
 * libscalapack-openmpi.
 */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void Cblacs_pinfo(int *me, int *procs);
extern void Cblacs_get(int ctxt, int what, int *val);
extern void Cblacs_gridinit(int *ctxt, char *order, int p, int q);
extern void Cblacs_gridinfo(int ctxt, int *p, int *q, int *myp, int *myq);
extern void Cblacs_gridexit(int ctxt);
extern int numroc_(int *n, int *nb, int *iproc, int *isrc, int *nprocs);
extern void descinit_(int *desc, int *m, int *n, int *mb, int *nb, int *irsrc, int *icsrc,
                      int *ctxt, int *lld, int *info);
extern void pdpotrf_(char *uplo, int *n, double *a, int *ia, int *ja, int *desca, int *info);
extern void pdsymv_(char *uplo, int *n, double *alpha, double *a, int *ia, int *ja, int *desca,
                    double *x, int *ix, int *jx, int *descx, int *incx, double *beta, double *y,
                    int *iy, int *jy, int *descy, int *incy);
extern void pdtrmv_(char *uplo, char *trans, char *diag, int *n, double *a, int *ia, int *ja,
                    int *desca, double *x, int *ix, int *jx, int *descx, int *incx);
extern void pdcopy_(int *n, double *x, int *ix, int *jx, int *descx, int *incx, double *y,
                    int *iy, int *jy, int *descy, int *incy);
extern void pdaxpy_(int *n, double *alpha, double *x, int *ix, int *jx, int *descx, int *incx,
                    double *y, int *iy, int *jy, int *descy, int *incy);
extern void pdnrm2_(int *n, double *norm, double *x, int *ix, int *jx, int *descx, int *incx);

/* element returns off-diagonal entry (i, j), i > j, uniform in [-1, 1). */
static double element(uint64_t i, uint64_t j) {
    uint64_t z = i * 0x100000001b3ULL + j + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1;
}

/* global returns the global index of local index l for a process at grid coordinate me of
 * procs, blocks of nb. */
static int global(int l, int nb, int me, int procs) { return ((l / nb) * procs + me) * nb + l % nb; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 6) {
        fprintf(stderr, "usage: pdpotrf N NB P Q REPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), nb = atoi(argv[2]), p = atoi(argv[3]), q = atoi(argv[4]);
    int reps = atoi(argv[5]);
    int me, procs, ctxt, myp, myq, zero = 0, one = 1, info;
    Cblacs_pinfo(&me, &procs);
    if (procs != p * q) {
        fprintf(stderr, "pdpotrf: %d processes for a %dx%d grid\n", procs, p, q);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", p, q);
    Cblacs_gridinfo(ctxt, &p, &q, &myp, &myq);
    int mloc = numroc_(&n, &nb, &myp, &zero, &p);
    int nloc = numroc_(&n, &nb, &myq, &zero, &q);
    int lld = mloc > 1 ? mloc : 1;
    int desc[9];
    descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
    size_t len = (size_t)lld * (size_t)nloc + 1;
    double *a0 = malloc(len * sizeof(double)), *a = malloc(len * sizeof(double));
    double norm2 = 0;
    for (int lj = 0; lj < nloc; lj++) {
        int j = global(lj, nb, myq, q);
        for (int li = 0; li < mloc; li++) {
            int i = global(li, nb, myp, p);
            double v = i == j ? n : element(i > j ? i : j, i > j ? j : i);
            a0[(size_t)lj * lld + li] = v;
            norm2 += v * v;
        }
    }
    double first = 0, best = 0;
    for (int r = 0; r < reps; r++) {
        memcpy(a, a0, len * sizeof(double));
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdpotrf_("L", &n, a, &one, &one, desc, &info);
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (info != 0) {
            fprintf(stderr, "pdpotrf: info %d\n", info);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (r == 0)
            first = best = tmax;
        if (tmax < best)
            best = tmax;
    }

    /* The residual, with vectors of N x 1 in blocks of NB rows on the grid's first column. */
    int descx[9];
    descinit_(descx, &n, &one, &nb, &one, &zero, &zero, &ctxt, &lld, &info);
    size_t vlen = (size_t)mloc + 1;
    double *x = calloc(vlen, sizeof(double)), *y = calloc(vlen, sizeof(double)),
           *ax = calloc(vlen, sizeof(double));
    if (myq == 0)
        for (int li = 0; li < mloc; li++)
            x[li] = element(global(li, nb, myp, p) + 1, 0);
    double alpha = 1, beta = 0, minus = -1, xnorm = 0, rnorm = 0, all2 = 0;
    pdsymv_("L", &n, &alpha, a0, &one, &one, desc, x, &one, &one, descx, &one, &beta, ax, &one, &one, descx, &one);
    pdcopy_(&n, x, &one, &one, descx, &one, y, &one, &one, descx, &one);
    pdtrmv_("L", "T", "N", &n, a, &one, &one, desc, y, &one, &one, descx, &one);
    pdtrmv_("L", "N", "N", &n, a, &one, &one, desc, y, &one, &one, descx, &one);
    pdaxpy_(&n, &minus, y, &one, &one, descx, &one, ax, &one, &one, descx, &one);
    pdnrm2_(&n, &rnorm, ax, &one, &one, descx, &one);
    pdnrm2_(&n, &xnorm, x, &one, &one, descx, &one);
    MPI_Allreduce(&norm2, &all2, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double res = sqrt((double)n) * rnorm / xnorm / (sqrt(all2) * n * DBL_EPSILON);
    if (me == 0) /* rank 0 is in the grid's first column, where the norms are */
        printf("first=%.6f seconds=%.6f residual=%.3g verified=%s\n", first, best, res, res < 30 ? "true" : "false");
    free(x); free(y); free(ax); free(a0); free(a);
    Cblacs_gridexit(ctxt);
    MPI_Finalize();
    return 0;
}
