/* The C OpenMP reference of go run ./lab/bench sph: the SPH workload of issue 45, a 3-D
 * weakly-compressible SPH of N particles in the unit box, written from the problem's
 * definition (the one examples/sph/fluid's package doc describes: its constants, the
 * initial particles, the formulas in their order of operations, the result line).
 *
 *   sph N STEPS [SEED]
 *
 * Every step sorts the particles into the canonical order (by cell, then by id) with a
 * counting sort, then computes the density and the force of every particle as gathers over
 * its neighbours in the canonical neighbour order (OpenMP, schedule(dynamic,64), threads of
 * OMP_NUM_THREADS), then integrates (symplectic Euler) and reflects at the walls. The
 * density phase keeps each particle's neighbour list, filtered from its candidates without
 * a branch, with F(r) = W'(r)/r of each neighbour, and the force phase reads it: about
 * twice as fast as testing every candidate in both phases, and the force phase takes no
 * square root. It reads a neighbour as one 64-byte record (position, velocity, density,
 * pressure term), and both phases select the kernel's pieces and the viscosity without a
 * branch: the algorithm of examples/sph/fluid. The result does not depend on the thread
 * count. It prints one line
 *
 *   interactions=I cells=C h=H
 *
 * and last the page's result line
 *
 *   result: particles=N steps=S threads=T seconds=W interactions_per_s=I kinetic=K checksum=C
 *
 * W times the steps alone. Build: gcc -O3 -march=native -fopenmp (the page's "default"
 * build, FMA contraction allowed), with -ffp-contract=off for its "exact" build.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.141592653589793

/* The derived constants (h, the cell count, the kernel's factors), computed once, in the
 * definition's order. */
static long N;
static int nc;
static double h, hinv, H2, m, dt, sigma, sig4, c1, c2, epsh2;

/* The particles in canonical order (slot i): positions, velocities, acceleration and cell;
 * where[id] is the slot of particle id. */
static double *x, *y, *z, *vx, *vy, *vz, *ax, *ay, *az;
/* body is a particle as the force phase reads it: all it needs of a neighbour in one
 * 64-byte record, a single cache line (bodies is aligned to 64 bytes). The density phase
 * writes a particle's record with its density rho and pressure term pt = P/rho^2. */
struct body {
	double x, y, z, vx, vy, vz, rho, pt;
};
static struct body *bodies;
static long *where;
static int *cell;
/* The next order's arrays, swapped with the current ones after each sort. */
static double *nx, *ny, *nz, *nvx, *nvy, *nvz;
static int *ncell;
/* start[c] .. start[c+1]-1 are the slots of cell c; next[c] fills them during the sort. */
static long *start, *next;

/* The neighbour lists of a step, built by the density phase and read by the force phase:
 * each thread appends the lists of the particles it takes to its own buffer; particle i's
 * list is count[i] slots from first[i] in the buffer of thread owner[i]. */
struct lists {
	int32_t *nb;     /* the lists, one after another */
	double *f;       /* F(r) = W'(r)/r of each neighbour, nb's twin */
	double *r2;      /* the squared distances of the candidates of the list being built */
	long used, cap;  /* of nb */
	long r2cap;      /* of r2 */
};
static struct lists *lists;
static int threads, *owner, *count;
static long *first;

/* alloc returns n zeroed items of size bytes, or exits saying that memory ran out. */
static void *alloc(size_t n, size_t size) {
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "sph: out of memory for %zu items of %zu bytes\n", n, size);
		exit(1);
	}
	return p;
}

static uint64_t rng;

/* draw returns the next uniform double in [0,1) of the splitmix64 stream. */
static double draw(void) {
	rng += 0x9E3779B97F4A7C15ULL;
	uint64_t v = rng;
	v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ULL;
	v = (v ^ (v >> 27)) * 0x94D049BB133111EBULL;
	v = v ^ (v >> 31);
	return (double)(v >> 11) * 0x1.0p-53;
}

/* setup computes the constants and places the particles (the constants and the splitmix64 stream). */
static void setup(uint64_t seed) {
	long k = 1;
	while ((k + 1) * (k + 1) * (k + 1) <= N)
		k++;
	h = 1.2 / k;
	hinv = 1.0 / h;
	double H = 2.0 * h;
	H2 = H * H;
	nc = (int)(1.0 / H);
	if (nc < 1)
		nc = 1;
	m = 1.0 / N;
	dt = 0.1 * h;
	sigma = 1.0 / (((PI * h) * h) * h);
	sig4 = 0.25 * sigma;
	c1 = (sigma * hinv) * hinv;
	c2 = (0.75 * sigma) * hinv;
	epsh2 = (0.01 * h) * h;

	double **arrays[] = {&x, &y, &z, &vx, &vy, &vz, &ax, &ay, &az, &nx, &ny, &nz, &nvx, &nvy, &nvz};
	for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++)
		*arrays[a] = alloc(N, sizeof(double));
	if (!(bodies = aligned_alloc(64, N * sizeof *bodies))) {
		fprintf(stderr, "sph: out of memory for %ld particles\n", N);
		exit(1);
	}
	where = alloc(N, sizeof(long));
	cell = alloc(N, sizeof(int));
	ncell = alloc(N, sizeof(int));
	long cells = (long)nc * nc * nc;
	start = alloc(cells + 1, sizeof(long));
	threads = omp_get_max_threads();
	lists = alloc(threads, sizeof *lists);
	owner = alloc(N, sizeof(int));
	count = alloc(N, sizeof(int));
	first = alloc(N, sizeof(long));
	next = alloc(cells, sizeof(long));

	rng = seed;
	long nd = N / 4;
	for (long i = 0; i < N; i++) {
		if (i < nd) {
			x[i] = 0.5 * draw();
			y[i] = 0.5 * draw();
			z[i] = 0.5 * draw();
		} else {
			do {
				x[i] = draw();
				y[i] = draw();
				z[i] = draw();
			} while (x[i] < 0.5 && y[i] < 0.5 && z[i] < 0.5);
		}
		where[i] = i;
	}
}

/* coord returns the cell coordinate of position p, truncated and clamped to [0, nc-1]. */
static inline int coord(double p) {
	int c = (int)(p * nc);
	return c < 0 ? 0 : c >= nc ? nc - 1 : c;
}

/* sort puts the particles into canonical order: by cell, within a cell by ascending id. */
static void sort(void) {
	long cells = (long)nc * nc * nc;
	memset(start, 0, (cells + 1) * sizeof(long));
	for (long i = 0; i < N; i++) {
		cell[i] = coord(x[i]) + nc * (coord(y[i]) + nc * coord(z[i]));
		start[cell[i] + 1]++;
	}
	for (long c = 0; c < cells; c++) {
		start[c + 1] += start[c];
		next[c] = start[c];
	}
	for (long p = 0; p < N; p++) { /* by ascending id: each cell fills in id order */
		long i = where[p], d = next[cell[i]]++;
		nx[d] = x[i], ny[d] = y[i], nz[d] = z[i];
		nvx[d] = vx[i], nvy[d] = vy[i], nvz[d] = vz[i];
		ncell[d] = cell[i];
		where[p] = d;
	}
	double *t;
	t = x, x = nx, nx = t;
	t = y, y = ny, ny = t;
	t = z, z = nz, nz = t;
	t = vx, vx = nvx, nvx = t;
	t = vy, vy = nvy, nvy = t;
	t = vz, vz = nvz, nvz = t;
	int *c = cell;
	cell = ncell, ncell = c;
}

/* ranges writes the slot ranges [lo, hi) of the cells around cell c that lie in the box,
 * in canonical order, and returns how many: for each dz, then dy (-1, 0, 1), the cells
 * cx-1 .. cx+1 follow one another in cell order, so they make one range. */
static int ranges(int c, long lo[9], long hi[9]) {
	int cx = c % nc, cy = (c / nc) % nc, cz = c / (nc * nc), n = 0;
	for (int dz = -1; dz <= 1; dz++)
		for (int dy = -1; dy <= 1; dy++)
			if (cy + dy >= 0 && cy + dy < nc && cz + dz >= 0 && cz + dz < nc) {
				int a = c + nc * (dy + nc * dz);
				lo[n] = start[cx > 0 ? a - 1 : a];
				hi[n] = start[cx < nc - 1 ? a + 2 : a + 1];
				n++;
			}
	return n;
}


/* pick returns a when mask is all ones, b when it is zero, without a branch (gcc turns a
 * ternary on a random condition into one). */
static inline double pick(uint64_t mask, double a, double b) {
	uint64_t ua, ub;
	memcpy(&ua, &a, sizeof ua);
	memcpy(&ub, &b, sizeof ub);
	ua = (ua & mask) | (ub & ~mask);
	memcpy(&a, &ua, sizeof a);
	return a;
}

/* reserve makes room in l for a list of up to cand candidates. */
static void reserve(struct lists *l, long cand) {
	if (l->used + cand > l->cap) {
		l->cap = 2 * (l->used + cand);
		if (!(l->nb = realloc(l->nb, l->cap * sizeof *l->nb)) || !(l->f = realloc(l->f, l->cap * sizeof *l->f))) {
			fprintf(stderr, "sph: out of memory for %ld neighbours\n", l->cap);
			exit(1);
		}
	}
	if (cand > l->r2cap) {
		free(l->r2);
		l->r2cap = 2 * cand;
		l->r2 = alloc(l->r2cap, sizeof *l->r2);
	}
}

/* density computes rho and pt of every particle, its record in bodies and its neighbour
 * list with F(r) of each neighbour, and returns the number of neighbour pairs. A
 * particle's candidates (the particles of the cells around its own) are written to its
 * list in canonical order, and only those closer than 2h, not itself, are kept: the list
 * grows without a branch. Both pieces of W and F are computed and those of q < 1 or of
 * q >= 1 kept with a mask, not a branch taken at random; with no branch on q, gcc cannot
 * copy acc + w into its arms and fuse acc + sigma*(...) in the default build, which
 * prints the definition's default reference. */
static long density(void) {
	long pairs = 0;
	for (int t = 0; t < threads; t++)
		lists[t].used = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : pairs)
	for (long i = 0; i < N; i++) {
		int t = omp_get_thread_num();
		struct lists *l = &lists[t];
		long lo[9], hi[9], cand = 0;
		int nr = ranges(cell[i], lo, hi);
		for (int k = 0; k < nr; k++)
			cand += hi[k] - lo[k];
		reserve(l, cand);
		int32_t *nb = l->nb + l->used;
		double *r2s = l->r2, *fs = l->f + l->used, xi = x[i], yi = y[i], zi = z[i];
		long n = 0;
		for (int k = 0; k < nr; k++)
			for (long j = lo[k]; j < hi[k]; j++) {
				double dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
				double r2 = ((dx * dx) + (dy * dy)) + (dz * dz);
				nb[n] = (int32_t)j;
				r2s[n] = r2;
				n += (r2 < H2) & (j != i);
			}
		double acc = sigma;
		for (long k = 0; k < n; k++) {
			double r = sqrt(r2s[k]), q = r * hinv, u = 2.0 - q;
			double w0 = sigma * (1.0 + ((q * q) * ((0.75 * q) - 1.5)));
			double f0 = c1 * ((2.25 * q) - 3.0);
			double w1 = ((sig4 * u) * u) * u;
			double f1 = (-((c2 * u) * u)) / r;
			uint64_t inner = -(uint64_t)(q < 1.0);
			fs[k] = pick(inner, f0, f1);
			acc = acc + pick(inner, w0, w1);
		}
		owner[i] = t, first[i] = l->used, count[i] = (int)n;
		l->used += n;
		pairs += n;
		double ri = m * acc;
		bodies[i] = (struct body){x[i], y[i], z[i], vx[i], vy[i], vz[i], ri, ri / (ri * ri)};
	}
	return pairs;
}

/* force computes the acceleration of every particle over its neighbour list, from the
 * records in bodies and F(r) of each neighbour. The viscosity is computed always and kept
 * with a mask when v.r < 0 (+0 otherwise), not with a branch taken at random. */
static void force(void) {
#pragma omp parallel for schedule(dynamic, 64)
	for (long i = 0; i < N; i++) {
		const struct body bi = bodies[i];
		double sx = 0.0, sy = 0.0, sz = 0.0;
		const int32_t *nb = lists[owner[i]].nb + first[i];
		const double *fs = lists[owner[i]].f + first[i];
		for (int k = 0; k < count[i]; k++) {
			const struct body *bj = &bodies[nb[k]];
			double dx = bi.x - bj->x, dy = bi.y - bj->y, dz = bi.z - bj->z;
			double r2 = ((dx * dx) + (dy * dy)) + (dz * dz);
			double vdotr = (((bi.vx - bj->vx) * dx) + ((bi.vy - bj->vy) * dy)) + ((bi.vz - bj->vz) * dz);
			double mu = (h * vdotr) / (r2 + epsh2);
			double visc = (((2.0 * mu) * mu) - mu) / (0.5 * (bi.rho + bj->rho));
			visc = pick(-(uint64_t)(vdotr < 0.0), visc, 0.0);
			double g = (m * ((bi.pt + bj->pt) + visc)) * fs[k];
			sx = sx + g * dx;
			sy = sy + g * dy;
			sz = sz + g * dz;
		}
		ax[i] = -sx;
		ay[i] = -sy;
		az[i] = -sz;
	}
}

/* wall reflects position *p and velocity *v at the walls 0 and 1. */
static inline void wall(double *p, double *v) {
	if (*p < 0.0) {
		*p = -*p;
		*v = -*v;
	} else if (*p > 1.0) {
		*p = 2.0 - *p;
		*v = -*v;
	}
}

/* integrate advances every particle by dt (symplectic Euler), then reflects it at the walls. */
static void integrate(void) {
#pragma omp parallel for schedule(static)
	for (long i = 0; i < N; i++) {
		vx[i] = vx[i] + (dt * ax[i]);
		x[i] = x[i] + (dt * vx[i]);
		wall(&x[i], &vx[i]);
		vy[i] = vy[i] + (dt * ay[i]);
		y[i] = y[i] + (dt * vy[i]);
		wall(&y[i], &vy[i]);
		vz[i] = vz[i] + (dt * az[i]);
		z[i] = z[i] + (dt * vz[i]);
		wall(&z[i], &vz[i]);
	}
}

/* fnv hashes the 8 bytes of v (little endian) into hash, FNV-1a 64. */
static uint64_t fnv(uint64_t hash, double v) {
	uint64_t b;
	memcpy(&b, &v, sizeof b);
	for (int k = 0; k < 8; k++) {
		hash ^= (b >> (8 * k)) & 0xff;
		hash *= 0x100000001b3ULL;
	}
	return hash;
}

/* totals returns the kinetic energy and the checksum of the result line, summed in ascending id.
 * The kinetic energy is the definition's formula without fused multiply-add in both builds: the
 * default build's contraction stops at the steps. */
__attribute__((optimize("fp-contract=off"))) static void totals(double *kinetic, uint64_t *sum) {
	double k = 0.0, hm = 0.5 * m;
	uint64_t hash = 0xcbf29ce484222325ULL;
	for (long p = 0; p < N; p++) {
		long i = where[p];
		k = k + (hm * (((vx[i] * vx[i]) + (vy[i] * vy[i])) + (vz[i] * vz[i])));
		double v[6] = {x[i], y[i], z[i], vx[i], vy[i], vz[i]};
		for (int c = 0; c < 6; c++)
			hash = fnv(hash, v[c]);
	}
	*kinetic = k, *sum = hash;
}

int main(int argc, char **argv) {
	if (argc < 3 || argc > 4 || atol(argv[1]) < 1 || atol(argv[1]) > INT32_MAX || atol(argv[2]) < 0) {
		fprintf(stderr, "usage: sph N STEPS [SEED]: N particles (1 to 2^31-1), STEPS time steps\n");
		return 2;
	}
	N = atol(argv[1]);
	long steps = atol(argv[2]);
	uint64_t seed = argc == 4 ? strtoull(argv[3], NULL, 10) : 1;
	setup(seed);

	long pairs = 0;
	double t0 = omp_get_wtime();
	for (long s = 0; s < steps; s++) {
		sort();
		pairs += density();
		force();
		integrate();
	}
	double seconds = omp_get_wtime() - t0;

	double kinetic;
	uint64_t sum;
	totals(&kinetic, &sum);
	long interactions = 2 * pairs;
	printf("interactions=%ld cells=%ld h=%.17g\n", interactions, (long)nc * nc * nc, h);
	printf("result: particles=%ld steps=%ld threads=%d seconds=%.6f interactions_per_s=%.6g kinetic=%.17g checksum=%016llx\n",
	       N, steps, omp_get_max_threads(), seconds, seconds > 0 ? interactions / seconds : 0.0, kinetic,
	       (unsigned long long)sum);
	return 0;
}
