/* The C references of go run ./lab/bench wavefront: the edit distance (Levenshtein) of two
 * strings read from files, over the whole matrix of partial distances D, keeping one row.
 *
 *   wavefront seq1 A B        the tight loop, one row after another
 *   wavefront seq2 A B        the same, two rows per pass over the row (the kernel of the Go tasks)
 *   wavefront omp A B BLOCK   a blocked wavefront: tiles of BLOCK x BLOCK cells, those of one
 *                             anti-diagonal computed in parallel by OpenMP's threads
 *                             (OMP_NUM_THREADS), with the two-row kernel
 *
 * One trailing newline of each file is left out. It prints "distance=D seconds=S", S being
 * the time of the computation alone. Build: gcc -O3 -fno-tree-reassoc -fopenmp.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN(x, y) ((x) < (y) ? (x) : (y))

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint8_t *slurp(const char *path, size_t *n) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	size_t cap = 1 << 16, len = 0;
	uint8_t *s = malloc(cap);
	size_t got;
	while (s && (got = fread(s + len, 1, cap - len, f)) > 0) {
		len += got;
		if (len == cap)
			s = realloc(s, cap *= 2);
	}
	if (!s || ferror(f)) {
		fprintf(stderr, "%s: read failed\n", path);
		exit(1);
	}
	fclose(f);
	if (len > 0 && s[len - 1] == '\n')
		len--;
	*n = len;
	return s;
}

/* one turns row, D[i-1][c+1..c+w], into D[i][...] for the character a; diag is D[i-1][c]
 * and left D[i][c]. It returns D[i][c+w]. */
static inline uint32_t one(uint8_t a, const uint8_t *b, size_t w, uint32_t *row, uint32_t diag, uint32_t left) {
	for (size_t j = 0; j < w; j++) {
		uint32_t up = row[j];
		uint32_t t = MIN(diag + (b[j] != a), up + 1);
		left = MIN(t, left + 1);
		row[j] = left;
		diag = up;
	}
	return left;
}

/* two does two rows, a0 then a1: diag is D[i-1][c], *l0 D[i][c] and *l1 D[i+1][c] on
 * entry, D[i][c+w] and D[i+1][c+w] on return. */
static inline void two(uint8_t a0, uint8_t a1, const uint8_t *b, size_t w, uint32_t *row, uint32_t diag, uint32_t *l0, uint32_t *l1) {
	uint32_t left0 = *l0, left1 = *l1, diag1 = left0;
	for (size_t j = 0; j < w; j++) {
		uint32_t up = row[j];
		uint32_t t0 = MIN(diag + (b[j] != a0), up + 1);
		left0 = MIN(t0, left0 + 1);
		uint32_t t1 = MIN(diag1 + (b[j] != a1), left0 + 1);
		left1 = MIN(t1, left1 + 1);
		row[j] = left1;
		diag = up;
		diag1 = left0;
	}
	*l0 = left0;
	*l1 = left1;
}

/* tile computes the h rows of a over the w columns of b. row holds the row above on entry
 * and the last row on return; col holds D[i0..i0+h][c] (the column left of the tile, from
 * the corner down) on entry and D[i0..i0+h][c+w] (the column at its right end) on return. */
static void tile(const uint8_t *a, size_t h, const uint8_t *b, size_t w, uint32_t *row, uint32_t *col) {
	uint32_t diag = col[0];
	if (w > 0)
		col[0] = row[w - 1];
	size_t i = 0;
	for (; i + 1 < h; i += 2) {
		uint32_t l0 = col[i + 1], l1 = col[i + 2], next = l1;
		two(a[i], a[i + 1], b, w, row, diag, &l0, &l1);
		col[i + 1] = l0;
		col[i + 2] = l1;
		diag = next;
	}
	if (i < h)
		col[i + 1] = one(a[i], b, w, row, diag, col[i + 1]);
}

int main(int argc, char **argv) {
	if (argc < 4 || (strcmp(argv[1], "omp") == 0) != (argc == 5)) {
		fprintf(stderr, "usage: wavefront seq1|seq2 A_FILE B_FILE | wavefront omp A_FILE B_FILE BLOCK\n");
		return 2;
	}
	const char *mode = argv[1];
	size_t la, lb;
	uint8_t *a = slurp(argv[2], &la), *b = slurp(argv[3], &lb);
	size_t bs = argc == 5 ? strtoul(argv[4], NULL, 10) : la;
	if (bs < 1)
		bs = 1;
	size_t ni = (la + bs - 1) / bs, nj = (lb + bs - 1) / bs;
	uint32_t *row = malloc((lb + 1) * sizeof *row);
	uint32_t *cols = malloc((ni * (bs + 1) + 1) * sizeof *cols);
	if (!row || !cols) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	double t0 = now();
	for (size_t j = 0; j < lb; j++)
		row[j] = j + 1;
	uint32_t dist;
	if (strcmp(mode, "seq1") == 0) {
		uint32_t left = la;
		for (size_t i = 0; i < la; i++)
			left = one(a[i], b, lb, row, i, i + 1);
		dist = lb > 0 ? row[lb - 1] : left;
	} else if (strcmp(mode, "seq2") == 0) {
		for (size_t i = 0; i <= la; i++)
			cols[i] = i;
		tile(a, la, b, lb, row, cols);
		dist = cols[la];
	} else if (strcmp(mode, "omp") == 0) {
		if (ni == 0 || nj == 0)
			ni = nj = 0; /* no tile: the distance is the other length */
		for (size_t I = 0; I < ni; I++)
			for (size_t t = 0; t <= bs; t++)
				cols[I * (bs + 1) + t] = I * bs + t;
		#pragma omp parallel
		for (size_t d = 0; d + 1 < ni + nj; d++) {
			size_t lo = d + 1 > nj ? d + 1 - nj : 0, hi = MIN(d, ni - 1);
			#pragma omp for schedule(static)
			for (size_t I = lo; I <= hi; I++) {
				size_t J = d - I, i0 = I * bs, j0 = J * bs;
				tile(a + i0, MIN(bs, la - i0), b + j0, MIN(bs, lb - j0), row + j0, cols + I * (bs + 1));
			}
		}
		dist = la == 0 ? lb : lb == 0 ? la : row[lb - 1];
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	printf("distance=%u seconds=%.9f\n", dist, now() - t0);
	free(a);
	free(b);
	free(row);
	free(cols);
	return 0;
}
