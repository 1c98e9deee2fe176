/*
 * stencil: the C MPI reference of `go run ./lab/bench stencil`, the same Jacobi stencil as
 * examples/stencil (package jacobi) written as an MPI program would be.
 *
 * Usage: mpirun -np PX*PY stencil DIM NX NY PX PY ITERS
 *
 * DIM 1: a 3-point stencil on a line of NX cells (NY and PY are 1); DIM 2: a 5-point stencil
 * on a plane of NY rows of NX cells. Rank r computes the block of grid column r % PX and grid
 * row r / PX, cut as jacobi cuts it, in two buffers with a frame of ghost cells. Every
 * iteration it posts the receives of its neighbours' edges and the sends of its own (columns
 * packed), computes the cells that need no ghost, waits, unpacks and computes its border:
 * the same formula, operand order, initial values and boundary values as jacobi, so the
 * result is bit-identical. Rank 0 prints one line:
 *
 *   per-iteration=SECONDS checksum=HEX
 *
 * SECONDS: the time of one iteration of the slowest rank, each timing all but the first
 * ITERS/10 iterations (jacobi.Warmup); HEX: the FNV-1a hash of the final cells' bytes, row
 * after row, as jacobi.Checksum computes it.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W, E, N, S };
static const double boundary[4] = {1.0, -1.0, 0.5, -0.5};

/* The block of one rank: inner cell (r, c) is at (r+hy)*stride + c+1. */
struct block {
    long x0, y0, rows, cols, hy, stride;
    int dim;
};

static long at(const struct block *b, long r, long c) { return (r + b->hy) * b->stride + c + 1; }

static struct block block_of(int dim, long nx, long ny, int px, int py, int id) {
    struct block b;
    long tx = id % px, ty = id / px;
    b.x0 = tx * nx / px;
    b.y0 = ty * ny / py;
    b.cols = (tx + 1) * nx / px - b.x0;
    b.rows = (ty + 1) * ny / py - b.y0;
    b.hy = dim == 2;
    b.stride = b.cols + 2;
    b.dim = dim;
    return b;
}

/* sweep computes v from u on rows [r0, r1) and columns [c0, c1) of inner cells. */
static void sweep(const struct block *b, const double *restrict u, double *restrict v, long r0, long r1,
                  long c0, long c1) {
    long s = b->stride;
    for (long r = r0; r < r1; r++) {
        long lo = at(b, r, c0), hi = at(b, r, c1);
        if (b->dim == 1)
            for (long i = lo; i < hi; i++)
                v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3;
        else
            for (long i = lo; i < hi; i++)
                v[i] = (u[i - s] + u[i - 1] + u[i] + u[i + 1] + u[i + s]) / 5;
    }
}

static void interior(const struct block *b, const double *u, double *v) {
    if (b->rows - b->hy > b->hy && b->cols > 2)
        sweep(b, u, v, b->hy, b->rows - b->hy, 1, b->cols - 1);
}

static void border(const struct block *b, const double *u, double *v) {
    if (b->hy) {
        sweep(b, u, v, 0, 1, 0, b->cols);
        if (b->rows > 1)
            sweep(b, u, v, b->rows - 1, b->rows, 0, b->cols);
    }
    long lo = b->hy, hi = b->rows - b->hy;
    if (hi > lo) {
        sweep(b, u, v, lo, hi, 0, 1);
        if (b->cols > 1)
            sweep(b, u, v, lo, hi, b->cols - 1, b->cols);
    }
}

/* column copies column c of u to buf (out) or buf to column c (in). */
static void column(const struct block *b, double *u, long c, double *buf, int in) {
    for (long r = 0; r < b->rows; r++) {
        if (in)
            u[at(b, r, c)] = buf[r];
        else
            buf[r] = u[at(b, r, c)];
    }
}

static uint64_t fnv1a(const double *x, long n) {
    uint64_t h = 14695981039346656037ULL;
    const unsigned char *p = (const unsigned char *)x;
    for (long i = 0; i < n * (long)sizeof(double); i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, procs;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (argc != 7) {
        if (me == 0)
            fprintf(stderr, "usage: stencil DIM NX NY PX PY ITERS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int dim = atoi(argv[1]), px = atoi(argv[4]), py = atoi(argv[5]), iters = atoi(argv[6]);
    long nx = atol(argv[2]), ny = atol(argv[3]);
    if ((dim != 1 && dim != 2) || px < 1 || py < 1 || nx < px || ny < py || iters < 0 ||
        (dim == 1 && (ny != 1 || py != 1)) || procs != px * py) {
        if (me == 0)
            fprintf(stderr, "stencil: bad arguments or %d processes for a %dx%d grid\n", procs, px, py);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct block b = block_of(dim, nx, ny, px, py, me);
    long len = (b.rows + 2 * b.hy) * b.stride;
    double *u = calloc(len, sizeof(double)), *v = calloc(len, sizeof(double));
    for (long r = 0; r < b.rows; r++)
        for (long c = 0; c < b.cols; c++)
            u[at(&b, r, c)] = (double)((b.x0 + c + 2 * (b.y0 + r)) % 5) / 4;

    int tx = me % px, ty = me / px, nb[4];
    nb[W] = tx > 0 ? me - 1 : MPI_PROC_NULL;
    nb[E] = tx < px - 1 ? me + 1 : MPI_PROC_NULL;
    nb[N] = dim == 2 && ty > 0 ? me - px : MPI_PROC_NULL;
    nb[S] = dim == 2 && ty < py - 1 ? me + px : MPI_PROC_NULL;
    /* Boundary values in the ghost cells of the sides without a neighbour, in both buffers. */
    for (long r = 0; r < b.rows; r++) {
        if (nb[W] == MPI_PROC_NULL)
            u[at(&b, r, -1)] = boundary[W];
        if (nb[E] == MPI_PROC_NULL)
            u[at(&b, r, b.cols)] = boundary[E];
    }
    for (long c = 0; dim == 2 && c < b.cols; c++) {
        if (nb[N] == MPI_PROC_NULL)
            u[at(&b, -1, c)] = boundary[N];
        if (nb[S] == MPI_PROC_NULL)
            u[at(&b, b.rows, c)] = boundary[S];
    }
    memcpy(v, u, len * sizeof(double));
    double *sendw = malloc(b.rows * sizeof(double)), *sende = malloc(b.rows * sizeof(double));
    double *recvw = malloc(b.rows * sizeof(double)), *recve = malloc(b.rows * sizeof(double));

    int warm = iters / 10;
    double t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++) {
        if (k == warm)
            t0 = MPI_Wtime();
        MPI_Request req[8];
        /* A message toward side d has tag d; the ghosts of side d come with the opposite tag. */
        MPI_Irecv(recvw, b.rows, MPI_DOUBLE, nb[W], E, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(recve, b.rows, MPI_DOUBLE, nb[E], W, MPI_COMM_WORLD, &req[1]);
        MPI_Irecv(&u[at(&b, -1, 0)], b.cols, MPI_DOUBLE, nb[N], S, MPI_COMM_WORLD, &req[2]);
        MPI_Irecv(&u[at(&b, b.rows, 0)], b.cols, MPI_DOUBLE, nb[S], N, MPI_COMM_WORLD, &req[3]);
        column(&b, u, 0, sendw, 0);
        column(&b, u, b.cols - 1, sende, 0);
        MPI_Isend(sendw, b.rows, MPI_DOUBLE, nb[W], W, MPI_COMM_WORLD, &req[4]);
        MPI_Isend(sende, b.rows, MPI_DOUBLE, nb[E], E, MPI_COMM_WORLD, &req[5]);
        MPI_Isend(&u[at(&b, 0, 0)], b.cols, MPI_DOUBLE, nb[N], N, MPI_COMM_WORLD, &req[6]);
        MPI_Isend(&u[at(&b, b.rows - 1, 0)], b.cols, MPI_DOUBLE, nb[S], S, MPI_COMM_WORLD, &req[7]);
        interior(&b, u, v);
        MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
        if (nb[W] != MPI_PROC_NULL)
            column(&b, u, -1, recvw, 1);
        if (nb[E] != MPI_PROC_NULL)
            column(&b, u, b.cols, recve, 1);
        border(&b, u, v);
        double *t = u;
        u = v;
        v = t;
    }
    double secs = MPI_Wtime() - t0, slowest;
    MPI_Reduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    /* Rank 0 gathers the blocks, row after row of the domain, and hashes them. */
    double *part = malloc((b.rows * b.cols + 1) * sizeof(double));
    for (long r = 0; r < b.rows; r++)
        memcpy(&part[r * b.cols], &u[at(&b, r, 0)], b.cols * sizeof(double));
    if (me != 0) {
        MPI_Send(part, (int)(b.rows * b.cols), MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    } else {
        double *all = malloc(nx * ny * sizeof(double));
        for (int k = 0; k < procs; k++) {
            struct block kb = block_of(dim, nx, ny, px, py, k);
            double *src = part;
            if (k != 0) {
                src = malloc(kb.rows * kb.cols * sizeof(double));
                MPI_Recv(src, (int)(kb.rows * kb.cols), MPI_DOUBLE, k, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            for (long r = 0; r < kb.rows; r++)
                memcpy(&all[(kb.y0 + r) * nx + kb.x0], &src[r * kb.cols], kb.cols * sizeof(double));
            if (src != part)
                free(src);
        }
        int timed = iters - warm;
        printf("per-iteration=%.9e checksum=%016llx\n", timed > 0 ? slowest / timed : 0.0,
               (unsigned long long)fnv1a(all, nx * ny));
        free(all);
    }
    free(part); free(u); free(v); free(sendw); free(sende); free(recvw); free(recve);
    MPI_Finalize();
    return 0;
}
