package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// starpuDgemm is the dgemm example of StarPU (Debian package starpu-examples), the
// task-based peer of the matmul command: one process whose StarPU CPU workers multiply the
// blocks of C = A·B, each block product a call to the BLAS that libblas.so.3 resolves to.
type starpuDgemm struct {
	bin      string
	blasDir  string // a folder with OpenBLAS's libblas.so.3, put first in LD_LIBRARY_PATH; "" keeps the system's
	iterMult int    // -iter is divided by this (10 in builds with STARPU_QUICK_CHECK)
}

// findStarpuDgemm finds the example (path, when not empty, names it) and probes how it
// counts iterations. With openblas, StarPU's BLAS calls go to OpenBLAS whatever the system's
// libblas.so.3 alternative is.
func findStarpuDgemm(path string, openblas bool) (*starpuDgemm, error) {
	s := &starpuDgemm{bin: path}
	if s.bin == "" {
		if p, err := exec.LookPath("starpu_dgemm"); err == nil {
			s.bin = p
		} else {
			for _, pattern := range []string{"/usr/lib/*/starpu/examples/dgemm", "/usr/lib/starpu/examples/dgemm", "/usr/local/lib/starpu/examples/dgemm"} {
				if m, _ := filepath.Glob(pattern); len(m) > 0 {
					s.bin = m[0]
					break
				}
			}
		}
	}
	if s.bin == "" {
		return nil, errors.New("StarPU's dgemm example not found (install Debian package starpu-examples, or give -starpu)")
	}
	if openblas {
		if m, _ := filepath.Glob("/usr/lib/*/openblas*/libblas.so.3"); len(m) > 0 {
			s.blasDir = filepath.Dir(m[0])
		}
	}
	// A build with STARPU_QUICK_CHECK runs a tenth of -iter: none for -iter 1, whose time
	// per iteration is then infinite.
	s.iterMult = 1
	if secs, err := s.run(64, 1, 1, 1, 1, false); err == nil && secs < 0 {
		s.iterMult = 10
	} else if err != nil {
		return nil, err
	}
	return s, nil
}

// run multiplies two n×n matrices cut in blocks×blocks blocks iters times with workers CPU
// workers, each calling the BLAS with threads threads, and returns the time of one
// multiplication in seconds (the mean over the iterations, as the example reports it, from
// its GFLOP/s, printed with more digits than its milliseconds), or -1 when no iteration ran.
// With check, the example compares C with one BLAS call.
func (s *starpuDgemm) run(n, blocks, workers, threads, iters int, check bool) (float64, error) {
	args := []string{"-xy", strconv.Itoa(n), "-z", strconv.Itoa(n), "-nblocks", strconv.Itoa(blocks), "-iter", strconv.Itoa(iters * s.iterMult)}
	if check {
		args = append(args, "-check")
	}
	cmd := exec.Command(s.bin, args...)
	home, err := os.MkdirTemp("", "orwl-bench-starpu")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(), "STARPU_SILENT=1", "STARPU_HOME="+home, // performance models go there
		"STARPU_NCPU="+strconv.Itoa(workers), "STARPU_NCUDA=0", "STARPU_NOPENCL=0",
		"OPENBLAS_NUM_THREADS="+strconv.Itoa(threads))
	if s.blasDir != "" {
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+strings.TrimSuffix(s.blasDir+":"+os.Getenv("LD_LIBRARY_PATH"), ":"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return 0, fmt.Errorf("%s %s: %w", s.bin, strings.Join(args, " "), err)
	}
	if check && !strings.Contains(stderr.String(), "Results are OK") {
		return 0, fmt.Errorf("%s %s: the check failed: %s", s.bin, strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	}
	// The last line: x y z ms GFlops.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 5 {
		return 0, fmt.Errorf("%s: no timing in %q", s.bin, out)
	}
	if f[3] == "inf" {
		return -1, nil
	}
	gflops, err := strconv.ParseFloat(f[4], 64)
	if err != nil || gflops <= 0 {
		return 0, fmt.Errorf("%s: no GFLOP/s in %q", s.bin, out)
	}
	return 2 * math.Pow(float64(n), 3) / gflops / 1e9, nil
}

// timeStarpu returns the seconds of one multiplication of row r: one process, r.Procs
// workers of r.Threads BLAS threads, blocks of r.NB (rounded to divide N), reps iterations
// after the untimed ones StarPU does not separate (the mean includes the first). It checks
// the result.
func timeStarpu(s *starpuDgemm, r mmResult, reps int) (float64, error) {
	secs, err := s.run(r.N, max(1, r.N/r.NB), r.Procs, r.Threads, max(2, reps), true)
	if err == nil && secs <= 0 {
		err = fmt.Errorf("%s ran no iteration", s.bin)
	}
	return secs, err
}
