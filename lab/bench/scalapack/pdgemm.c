/*
 * pdgemm: the ScaLAPACK reference of `go run ./lab/bench matmul`.
 *
 * Usage: mpirun -np P*Q pdgemm N NB P Q REPS
 *
 * Multiplies two N x N matrices distributed block-cyclically (block NB, process grid
 * P x Q, row-major process order as ORWL's matmul uses) with PDGEMM, REPS times, and
 * prints on rank 0 one line: "seconds=S verified=V" with S the time of the fastest of the
 * REPS calls, each measured from a barrier to the end of the slowest rank's call (one
 * untimed call comes first), and V whether C = A*B passed Freivalds' check (C*x against
 * A*(B*x) for a fixed vector x, relative difference below 1e-10), done after the timing.
 * The kernel threads follow OPENBLAS_NUM_THREADS. The bench harness builds it with
 * mpicc against Debian's libscalapack-openmpi.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

extern void Cblacs_pinfo(int *me, int *procs);
extern void Cblacs_get(int ctxt, int what, int *val);
extern void Cblacs_gridinit(int *ctxt, char *order, int p, int q);
extern void Cblacs_gridinfo(int ctxt, int *p, int *q, int *myp, int *myq);
extern void Cblacs_gridexit(int ctxt);
extern int numroc_(int *n, int *nb, int *iproc, int *isrc, int *nprocs);
extern void descinit_(int *desc, int *m, int *n, int *mb, int *nb, int *irsrc, int *icsrc,
                      int *ctxt, int *lld, int *info);
extern void pdgemv_(char *trans, int *m, int *n, double *alpha, double *a, int *ia, int *ja,
                    int *desca, double *x, int *ix, int *jx, int *descx, int *incx, double *beta,
                    double *y, int *iy, int *jy, int *descy, int *incy);
extern void pdaxpy_(int *n, double *alpha, double *x, int *ix, int *jx, int *descx, int *incx,
                    double *y, int *iy, int *jy, int *descy, int *incy);
extern void pdnrm2_(int *n, double *norm, double *x, int *ix, int *jx, int *descx, int *incx);
extern void pdgemm_(char *ta, char *tb, int *m, int *n, int *k, double *alpha, double *a,
                    int *ia, int *ja, int *desca, double *b, int *ib, int *jb, int *descb,
                    double *beta, double *c, int *ic, int *jc, int *descc);

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 6) {
        fprintf(stderr, "usage: pdgemm N NB P Q REPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), nb = atoi(argv[2]), p = atoi(argv[3]), q = atoi(argv[4]);
    int reps = atoi(argv[5]);
    int me, procs, ctxt, myp, myq, zero = 0, one = 1, info;
    Cblacs_pinfo(&me, &procs);
    if (procs != p * q) {
        fprintf(stderr, "pdgemm: %d processes for a %dx%d grid\n", procs, p, q);
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
    size_t len = (size_t)mloc * (size_t)nloc + 1;
    double *a = malloc(len * sizeof(double)), *b = malloc(len * sizeof(double)),
           *c = malloc(len * sizeof(double));
    unsigned long long x = 88172645463325252ULL + (unsigned long long)me;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        a[i] = (double)(x >> 11) / 9007199254740992.0 - 0.5;
        b[i] = (double)((x * 2654435761ULL) >> 11) / 9007199254740992.0 - 0.5;
        c[i] = 0;
    }
    double alpha = 1, beta = 0;
    /* One untimed call: BLACS, MPI connections and the BLAS thread pool start up. */
    pdgemm_("N", "N", &n, &n, &n, &alpha, a, &one, &one, desc, b, &one, &one, desc, &beta,
            c, &one, &one, desc);
    double best = 0;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdgemm_("N", "N", &n, &n, &n, &alpha, a, &one, &one, desc, b, &one, &one, desc, &beta,
                c, &one, &one, desc);
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r == 0 || tmax < best)
            best = tmax;
    }

    /* Freivalds' check on the vectors vx, t = B*vx, y = A*t and z = C*vx, N x 1 matrices in
     * blocks of NB rows on the grid's first column. */
    int descx[9];
    descinit_(descx, &n, &one, &nb, &one, &zero, &zero, &ctxt, &lld, &info);
    size_t vlen = (size_t)mloc + 1;
    double *vx = calloc(vlen, sizeof(double)), *t = calloc(vlen, sizeof(double)),
           *y = calloc(vlen, sizeof(double)), *z = calloc(vlen, sizeof(double));
    if (myq == 0)
        for (int li = 0; li < mloc; li++) {
            int i = ((li / nb) * p + myp) * nb + li % nb; /* the global row of local row li */
            vx[li] = (double)(i % 7 + 1);
        }
    double minus = -1, diff = 0, norm = 0;
    pdgemv_("N", &n, &n, &alpha, b, &one, &one, desc, vx, &one, &one, descx, &one, &beta, t, &one, &one, descx, &one);
    pdgemv_("N", &n, &n, &alpha, a, &one, &one, desc, t, &one, &one, descx, &one, &beta, y, &one, &one, descx, &one);
    pdgemv_("N", &n, &n, &alpha, c, &one, &one, desc, vx, &one, &one, descx, &one, &beta, z, &one, &one, descx, &one);
    pdnrm2_(&n, &norm, z, &one, &one, descx, &one);
    pdaxpy_(&n, &minus, z, &one, &one, descx, &one, y, &one, &one, descx, &one);
    pdnrm2_(&n, &diff, y, &one, &one, descx, &one);
    if (me == 0) /* rank 0 is in the grid's first column, where the norms are */
        printf("seconds=%.6f verified=%s\n", best, norm > 0 && diff <= 1e-10 * norm ? "true" : "false");
    free(vx); free(t); free(y); free(z);
    free(a); free(b); free(c);
    Cblacs_gridexit(ctxt);
    MPI_Finalize();
    return 0;
}
