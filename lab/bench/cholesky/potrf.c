/* The bench's reference for the tiled Cholesky: LAPACK's dpotrf (or spotrf, single
 * precision) of OpenBLAS called once on the whole matrix, from C through LAPACKE, with
 * OpenBLAS's threads (OPENBLAS_NUM_THREADS).
 *
 *   potrf N REPS [s]
 *
 * A is symmetric positive definite: N on the diagonal, uniform in [-1, 1) off it. Every
 * call factors a fresh copy (copied outside the timing). It prints the first call's time,
 * the fastest of REPS, and the scaled residual of the last factor,
 * ||A x - L (L^T x)|| sqrt(N) / (||x|| ||A||_F N eps), as the ORWL example does:
 *
 *   first=0.99 seconds=0.95 residual=0.001 verified=true
 */
#include <lapacke.h>
#include <cblas.h>
#include <math.h>
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* uniform returns a value in [-1, 1) from a splitmix64 stream. */
static double uniform(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1;
}

/* matrix fills the column-major n x n a (both triangles) and returns ||A||_F^2. */
static double matrix(double *a, int n) {
  uint64_t s = 1;
  double norm2 = 0;
  for (int j = 0; j < n; j++) {
    for (int i = j; i < n; i++) {
      double v = i == j ? n : uniform(&s);
      a[(size_t)j * n + i] = a[(size_t)i * n + j] = v;
      norm2 += (i == j ? 1 : 2) * v * v;
    }
  }
  return norm2;
}

/* residual returns the scaled residual of the lower factor l of a (column-major). */
static double residual(const double *a, const double *l, int n, double norm2, double eps) {
  double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n), *ax = malloc(sizeof(double) * n);
  uint64_t s = 7;
  double x2 = 0, r2 = 0;
  for (int i = 0; i < n; i++) {
    x[i] = y[i] = uniform(&s);
    x2 += x[i] * x[i];
  }
  cblas_dsymv(CblasColMajor, CblasLower, n, 1, a, n, x, 1, 0, ax, 1);
  cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, n, l, n, y, 1);
  cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, n, l, n, y, 1);
  for (int i = 0; i < n; i++)
    r2 += (ax[i] - y[i]) * (ax[i] - y[i]);
  free(x), free(y), free(ax);
  return sqrt((double)n) * sqrt(r2) / sqrt(x2) / (sqrt(norm2) * n * eps);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: potrf N REPS [s]\n");
    return 2;
  }
  int n = atoi(argv[1]), reps = atoi(argv[2]);
  int single = argc > 3 && strcmp(argv[3], "s") == 0;
  size_t nn = (size_t)n * n;
  double *a = malloc(sizeof(double) * nn), *l = malloc(sizeof(double) * nn);
  float *af = single ? malloc(sizeof(float) * nn) : NULL;
  if (!a || !l || (single && !af)) {
    fprintf(stderr, "potrf: out of memory\n");
    return 1;
  }
  double norm2 = matrix(a, n), first = 0, best = 1e300;
  for (int r = 0; r < reps; r++) {
    int info;
    double t0;
    if (single) {
      for (size_t k = 0; k < nn; k++)
        af[k] = (float)a[k];
      t0 = now();
      info = LAPACKE_spotrf(LAPACK_COL_MAJOR, 'L', n, af, n);
    } else {
      memcpy(l, a, sizeof(double) * nn);
      t0 = now();
      info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, l, n);
    }
    double t = now() - t0;
    if (info != 0) {
      fprintf(stderr, "potrf: info %d\n", info);
      return 1;
    }
    if (r == 0)
      first = t;
    if (t < best)
      best = t;
  }
  if (single)
    for (size_t k = 0; k < nn; k++)
      l[k] = af[k];
  double res = residual(a, l, n, norm2, single ? FLT_EPSILON : DBL_EPSILON);
  printf("first=%.6f seconds=%.6f residual=%.3g verified=%s\n", first, best, res, res < 30 ? "true" : "false");
  return res < 30 ? 0 : 3;
}
