/*
 * starpu_dpotrf: the StarPU reference of `go run ./lab/bench cholesky`, in double precision
 * (the Cholesky examples Debian ships with StarPU compute in single precision).
 *
 * Usage: starpu_dpotrf N NB REPS
 *
 * A tiled right-looking Cholesky factorisation A = L*L^T with StarPU's task API: one data
 * handle per NB x NB tile of the lower triangle (column-major tiles, N a multiple of NB),
 * tasks submitted in the algorithm's order with implicit dependences, their codelets
 * calling LAPACKE and CBLAS (OpenBLAS), the panel's tasks and the updates of the next
 * column at the highest priority. The workers follow STARPU_NCPU, the scheduler
 * STARPU_SCHED. A is N on the diagonal and uniform in [-1, 1) off it. Each of the REPS
 * factorisations starts from a fresh A (written outside the timing) and is timed from
 * the first submission to the end of the last task. It prints "first=F seconds=S
 * residual=R verified=V" as the other references do.
 */
#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <starpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static double element(uint64_t i, uint64_t j) {
    uint64_t z = i * 0x100000001b3ULL + j + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1;
}

static double entry(int n, int i, int j) { return i == j ? n : element(i > j ? i : j, i > j ? j : i); }

static int potrf_failed;

static void potrf_cpu(void *buffers[], void *arg) {
    (void)arg;
    double *a = (double *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int nb = STARPU_MATRIX_GET_NX(buffers[0]), ld = STARPU_MATRIX_GET_LD(buffers[0]);
    if (LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', nb, a, ld) != 0)
        potrf_failed = 1;
}

static void trsm_cpu(void *buffers[], void *arg) {
    (void)arg;
    double *l = (double *)STARPU_MATRIX_GET_PTR(buffers[0]), *b = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
    int nb = STARPU_MATRIX_GET_NX(buffers[1]);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, nb, nb, 1,
                l, STARPU_MATRIX_GET_LD(buffers[0]), b, STARPU_MATRIX_GET_LD(buffers[1]));
}

static void syrk_cpu(void *buffers[], void *arg) {
    (void)arg;
    double *a = (double *)STARPU_MATRIX_GET_PTR(buffers[0]), *c = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
    int nb = STARPU_MATRIX_GET_NX(buffers[1]);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, nb, nb, -1, a, STARPU_MATRIX_GET_LD(buffers[0]),
                1, c, STARPU_MATRIX_GET_LD(buffers[1]));
}

static void gemm_cpu(void *buffers[], void *arg) {
    (void)arg;
    double *a = (double *)STARPU_MATRIX_GET_PTR(buffers[0]), *b = (double *)STARPU_MATRIX_GET_PTR(buffers[1]),
           *c = (double *)STARPU_MATRIX_GET_PTR(buffers[2]);
    int nb = STARPU_MATRIX_GET_NX(buffers[2]);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, nb, nb, nb, -1, a, STARPU_MATRIX_GET_LD(buffers[0]),
                b, STARPU_MATRIX_GET_LD(buffers[1]), 1, c, STARPU_MATRIX_GET_LD(buffers[2]));
}

static struct starpu_codelet potrf_cl = {.cpu_funcs = {potrf_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "potrf"};
static struct starpu_codelet trsm_cl = {.cpu_funcs = {trsm_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "trsm"};
static struct starpu_codelet syrk_cl = {.cpu_funcs = {syrk_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "syrk"};
static struct starpu_codelet gemm_cl = {.cpu_funcs = {gemm_cpu}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_RW}, .name = "gemm"};

/* factor submits the factorisation of the t x t tiles h (lower triangle, h[i*t+j]) and
 * waits for it. */
static void factor(starpu_data_handle_t *h, int t) {
    int hi = STARPU_MAX_PRIO, lo = STARPU_DEFAULT_PRIO;
    for (int k = 0; k < t; k++) {
        starpu_task_insert(&potrf_cl, STARPU_PRIORITY, hi, STARPU_RW, h[k * t + k], 0);
        for (int i = k + 1; i < t; i++)
            starpu_task_insert(&trsm_cl, STARPU_PRIORITY, i == k + 1 ? hi : lo,
                               STARPU_R, h[k * t + k], STARPU_RW, h[i * t + k], 0);
        for (int j = k + 1; j < t; j++) {
            starpu_task_insert(&syrk_cl, STARPU_PRIORITY, j == k + 1 ? hi : lo,
                               STARPU_R, h[j * t + k], STARPU_RW, h[j * t + j], 0);
            for (int i = j + 1; i < t; i++)
                starpu_task_insert(&gemm_cl, STARPU_PRIORITY, j == k + 1 ? hi : lo,
                                   STARPU_R, h[i * t + k], STARPU_R, h[j * t + k], STARPU_RW, h[i * t + j], 0);
        }
    }
    starpu_task_wait_for_all();
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: starpu_dpotrf N NB REPS\n");
        return 2;
    }
    int n = atoi(argv[1]), nb = atoi(argv[2]), reps = atoi(argv[3]);
    if (nb < 1 || n < nb || n % nb != 0) {
        fprintf(stderr, "starpu_dpotrf: N must be a multiple of NB\n");
        return 2;
    }
    if (starpu_init(NULL) != 0) {
        fprintf(stderr, "starpu_dpotrf: starpu_init failed\n");
        return 1;
    }
    int t = n / nb;
    double **tiles = calloc((size_t)t * t, sizeof(double *));
    starpu_data_handle_t *h = calloc((size_t)t * t, sizeof(starpu_data_handle_t));
    for (int i = 0; i < t; i++)
        for (int j = 0; j <= i; j++)
            starpu_malloc((void **)&tiles[i * t + j], sizeof(double) * nb * nb);
    double first = 0, best = 0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < t; i++)
            for (int j = 0; j <= i; j++) {
                for (int c = 0; c < nb; c++)
                    for (int rr = 0; rr < nb; rr++)
                        tiles[i * t + j][c * nb + rr] = entry(n, i * nb + rr, j * nb + c);
                starpu_matrix_data_register(&h[i * t + j], STARPU_MAIN_RAM, (uintptr_t)tiles[i * t + j], nb, nb, nb, sizeof(double));
            }
        double t0 = starpu_timing_now();
        factor(h, t);
        double s = (starpu_timing_now() - t0) / 1e6;
        for (int i = 0; i < t; i++)
            for (int j = 0; j <= i; j++)
                starpu_data_unregister(h[i * t + j]);
        if (r == 0 || s < best)
            best = s;
        if (r == 0)
            first = s;
    }
    starpu_shutdown();
    if (potrf_failed) {
        fprintf(stderr, "starpu_dpotrf: not positive definite\n");
        return 1;
    }
    /* The residual, on the whole matrix gathered column-major. */
    size_t nn = (size_t)n * n;
    double *a = malloc(sizeof(double) * nn), *l = calloc(nn, sizeof(double));
    double norm2 = 0, x2 = 0, r2 = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            a[(size_t)j * n + i] = entry(n, i, j);
            norm2 += a[(size_t)j * n + i] * a[(size_t)j * n + i];
            if (i >= j)
                l[(size_t)j * n + i] = tiles[(i / nb) * t + j / nb][(j % nb) * nb + i % nb];
        }
    double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n), *ax = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        x[i] = y[i] = element(i + 1, 0);
        x2 += x[i] * x[i];
    }
    cblas_dsymv(CblasColMajor, CblasLower, n, 1, a, n, x, 1, 0, ax, 1);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, n, l, n, y, 1);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, n, l, n, y, 1);
    for (int i = 0; i < n; i++)
        r2 += (ax[i] - y[i]) * (ax[i] - y[i]);
    double res = sqrt((double)n) * sqrt(r2) / sqrt(x2) / (sqrt(norm2) * n * DBL_EPSILON);
    printf("first=%.6f seconds=%.6f residual=%.3g verified=%s\n", first, best, res, res < 30 ? "true" : "false");
    return res < 30 ? 0 : 3;
}
