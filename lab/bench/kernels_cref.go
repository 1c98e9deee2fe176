package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// crefSource is the OpenBLAS reference: cblas_dgemm called from C, row-major
// N×N×N, with its own prototype so that no -dev package is needed. Usage:
// cref N THREADS REPS; it runs one untimed call, then REPS timed calls, and
// prints the total seconds of the timed calls. With REPS 0 it times the cold
// call instead: A and B generated, then C allocated (untouched) and the
// process's first cblas_dgemm, OpenBLAS's thread start and buffers and the
// page faults of touching C included; it prints the seconds and the page
// faults (minor and major) of that interval.
const crefSource = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc);
void openblas_set_num_threads(int n);

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

static long faults(void) {
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_minflt + r.ru_majflt;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: cref N THREADS REPS\n");
		return 2;
	}
	int n = atoi(argv[1]), threads = atoi(argv[2]), reps = atoi(argv[3]);
	if (threads > 0)
		openblas_set_num_threads(threads);
	size_t nn = (size_t)n * n;
	double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b);
	if (!a || !b)
		return 1;
	for (size_t i = 0; i < nn; i++) {
		a[i] = (double)(i % 17) / 17 - 0.5;
		b[i] = (double)(i % 13) / 13 - 0.5;
	}
	if (reps == 0) {
		long f0 = faults();
		double t0 = now();
		double *c = malloc(nn * sizeof *c);
		if (!c)
			return 1;
		cblas_dgemm(101, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n);
		double t = now() - t0;
		printf("%.9f %ld\n", t, faults() - f0);
		return c[nn / 2] != c[nn / 2]; /* C is used: the call is not optimised away */
	}
	double *c = malloc(nn * sizeof *c);
	if (!c)
		return 1;
	memset(c, 0, nn * sizeof *c);
	cblas_dgemm(101, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n);
	double t0 = now();
	for (int r = 0; r < reps; r++)
		cblas_dgemm(101, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n);
	printf("%.9f\n", now() - t0);
	return 0;
}
`

// cref runs the C reference program.
type cref struct{ path string }

// buildCref compiles the C reference with gcc into dir, or uses prebuilt
// when not empty. It returns why the reference is unavailable otherwise.
func buildCref(dir, prebuilt string) (*cref, error) {
	if prebuilt != "" {
		if _, err := os.Stat(prebuilt); err != nil {
			return nil, err
		}
		return &cref{prebuilt}, nil
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return nil, errors.New("gcc not found")
	}
	src := filepath.Join(dir, "cref.c")
	bin := filepath.Join(dir, "cref")
	if err := os.WriteFile(src, []byte(crefSource), 0o644); err != nil {
		return nil, err
	}
	out, err := exec.Command(gcc, "-O2", "-o", bin, src, "-l:libopenblas.so.0").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gcc -l:libopenblas.so.0 failed (is libopenblas0 installed?): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return &cref{bin}, nil
}

// run times reps calls at size n with the given OpenBLAS threads (0 =
// default) and returns the total time of the timed calls.
func (c *cref) run(n, threads, reps int) (time.Duration, error) {
	sec, _, err := c.exec(n, threads, reps)
	return time.Duration(sec * 1e9), err
}

// cold times the first call of a fresh process at size n with the given
// OpenBLAS threads (0 = default), from C's allocation on, and returns its
// seconds and the page faults of the process during it.
func (c *cref) cold(n, threads int) (float64, int64, error) {
	return c.exec(n, threads, 0)
}

// exec runs the program and parses its line: seconds, then page faults in
// the cold mode.
func (c *cref) exec(n, threads, reps int) (float64, int64, error) {
	out, err := exec.Command(c.path, strconv.Itoa(n), strconv.Itoa(threads), strconv.Itoa(reps)).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", c.path, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("%s: no output", c.path)
	}
	f, want := strings.Fields(sc.Text()), 1
	if reps == 0 {
		want = 2 // seconds and page faults
	}
	if len(f) != want {
		return 0, 0, fmt.Errorf("%s: unexpected output %q", c.path, sc.Text())
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, 0, err
	}
	var faults int64
	if len(f) == 2 {
		if faults, err = strconv.ParseInt(f[1], 10, 64); err != nil {
			return 0, 0, err
		}
	}
	return sec, faults, nil
}
