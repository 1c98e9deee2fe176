/* The C references of go run ./lab/bench wavefront: the edit distance (Levenshtein) of two
 * strings read from files, over the whole matrix of partial distances D, keeping one row.
 *
 *   wavefront seq1 A B        the textbook loop, one row after another
 *   wavefront seq2 A B        the same, two rows per pass over the row
 *   wavefront seq3 A B        the kernel of the Go tasks (examples/levenshtein/wavefront,
 *                             kernel.go): three rows per pass, a table of costs per row and
 *                             H = D - i - j
 *   wavefront omp A B BLOCK   a blocked wavefront: tiles of BLOCK x BLOCK cells, those of one
 *                             anti-diagonal computed in parallel by OpenMP's threads
 *                             (OMP_NUM_THREADS), with the three-row kernel of seq3
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

/* tile2 computes the h rows of a over the w columns of b, two at a time. row holds the row
 * above on entry and the last row on return; col holds D[i0..i0+h][c] (the column left of
 * the tile, from the corner down) on entry and D[i0..i0+h][c+w] (the column at its right
 * end) on return. */
static void tile2(const uint8_t *a, size_t h, const uint8_t *b, size_t w, uint32_t *row, uint32_t *col) {
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

/* The kernel of the Go tasks. After the change of variable H[i][j] = D[i][j] - i - j (plus
 * a constant per pass over the row, which cancels out) the recurrence reads
 *
 *   H[i][j] = min(H[i-1][j], H[i][j-1], H[i-1][j-1] + cost[A[i-1]][B[j-1]])
 *
 * with cost MATCH on a match and MISMATCH otherwise: no +1, and the character test is one
 * load from a table of 256 costs per row, indexed by B's character. H is 64 bits wide, so
 * that neither D - j nor the offsets overflow; the row array stays uint32_t. gcc -O3 turns
 * every MIN into a compare and a conditional move: the loops have no branch but their own. */
#define MATCH (-2)
#define MISMATCH (-1)

/* one_h turns row, D[i-1][c+1..c+w], into D[i][...] for the row whose table is m. diag is
 * D[i-1][c] + 1 and left D[i][c]. It returns D[i][c+w] - w. */
static inline int64_t one_h(const int64_t *m, const uint8_t *b, size_t w, uint32_t *row, int64_t diag, int64_t left) {
	for (size_t j = 0; j < w; j++) {
		int64_t up = (int64_t)row[j] - (int64_t)j;
		left = MIN(left, MIN(diag + m[b[j]], up));
		diag = up;
		row[j] = (uint32_t)(left + (int64_t)j + 1);
	}
	return left;
}

/* three does three rows at once, for the tables m0, m1, m2 of a[i-1], a[i] and a[i+1],
 * turning row from D[i-1][...] into D[i+2][...]. diag is D[i-1][c] + 1; *h0, *h1 and *h2
 * are D[i][c], D[i+1][c] - 1 and D[i+2][c] - 2 on entry, D[i+k][c+w] - w - k for k = 0,
 * 1, 2 on return. Row k's H in column j is D - j - (k+1), that of the row above
 * D - j: the same offset from i + j for all of them. */
static inline void three(const int64_t *m0, const int64_t *m1, const int64_t *m2, const uint8_t *b, size_t w, uint32_t *row, int64_t diag, int64_t *h0, int64_t *h1, int64_t *h2) {
	int64_t x0 = *h0, x1 = *h1, x2 = *h2;
	for (size_t j = 0; j < w; j++) {
		int64_t up = (int64_t)row[j] - (int64_t)j;
		uint8_t c = b[j];
		int64_t t0 = diag + m0[c], t1 = x0 + m1[c], t2 = x1 + m2[c];
		diag = up;
		x0 = MIN(x0, MIN(t0, up));
		x1 = MIN(x1, MIN(t1, x0));
		x2 = MIN(x2, MIN(t2, x1));
		row[j] = (uint32_t)(x2 + (int64_t)j + 3);
	}
	*h0 = x0;
	*h1 = x1;
	*h2 = x2;
}

/* tile3 is tile2 with the kernel of the Go tasks: three rows per pass, the rows left over
 * one at a time. */
static void tile3(const uint8_t *a, size_t h, const uint8_t *b, size_t w, uint32_t *row, uint32_t *col) {
	int64_t m[3][256];
	for (int k = 0; k < 3; k++)
		for (int c = 0; c < 256; c++)
			m[k][c] = MISMATCH;
	int64_t corner = col[0], wd = (int64_t)w;
	if (w > 0)
		col[0] = row[w - 1];
	size_t i = 0;
	for (; i + 2 < h; i += 3) {
		m[0][a[i]] = m[1][a[i + 1]] = m[2][a[i + 2]] = MATCH;
		int64_t h0 = col[i + 1], h1 = (int64_t)col[i + 2] - 1, h2 = (int64_t)col[i + 3] - 2, next = col[i + 3];
		three(m[0], m[1], m[2], b, w, row, corner + 1, &h0, &h1, &h2);
		col[i + 1] = (uint32_t)(h0 + wd);
		col[i + 2] = (uint32_t)(h1 + wd + 1);
		col[i + 3] = (uint32_t)(h2 + wd + 2);
		corner = next;
		m[0][a[i]] = m[1][a[i + 1]] = m[2][a[i + 2]] = MISMATCH;
	}
	for (; i < h; i++) {
		m[0][a[i]] = MATCH;
		int64_t next = col[i + 1];
		col[i + 1] = (uint32_t)(one_h(m[0], b, w, row, corner + 1, next) + wd);
		corner = next;
		m[0][a[i]] = MISMATCH;
	}
}

int main(int argc, char **argv) {
	if (argc < 4 || (strcmp(argv[1], "omp") == 0) != (argc == 5)) {
		fprintf(stderr, "usage: wavefront seq1|seq2|seq3 A_FILE B_FILE | wavefront omp A_FILE B_FILE BLOCK\n");
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
		tile2(a, la, b, lb, row, cols);
		dist = cols[la];
	} else if (strcmp(mode, "seq3") == 0) {
		for (size_t i = 0; i <= la; i++)
			cols[i] = i;
		tile3(a, la, b, lb, row, cols);
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
				tile3(a + i0, MIN(bs, la - i0), b + j0, MIN(bs, lb - j0), row + j0, cols + I * (bs + 1));
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
