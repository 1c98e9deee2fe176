package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels"
)

// matmul: the ORWL block-cyclic matrix multiplication (examples/matmul's engine, package
// summa) against its references, at the same N and process count, in one run:
//
//   - roofline: one process, one kernel call on the whole problem, all threads;
//   - shared: one process, one goroutine per "process" each multiplying its rows of C with
//     the same kernel (what one writes without ORWL);
//   - orwl: P x Q tasks, one per process, SUMMA through ORWL locations;
//   - starpu: StarPU's dgemm example (Debian's starpu-examples), one process with as many CPU
//     workers as the row has processes, each calling the BLAS (OpenBLAS when the kernel is
//     openblas) with as many threads, blocks of NB; it checks its result; its time is the
//     mean of its iterations, the first included (skipped, saying why, when not installed);
//   - scalapack: PDGEMM of Debian's libscalapack-openmpi on the same grid, N and NB, through
//     the C driver lab/bench/scalapack/pdgemm.c built with Open MPI's mpicc, which checks its
//     result (Freivalds) after the timing (skipped, saying why, when mpicc, mpirun or the
//     library is missing).
//
// Every row's seconds is the fastest of -reps multiplications (each implementation gets an
// untimed warm-up: a small kernel call in every process, or one PDGEMM), and the best of
// -rounds measurements (of 2×-rounds for the roofline, the denominator of every ratio). It
// prints a table with the ratio of each row to the roofline and of orwl to scalapack, and
// writes it to matmul.txt, with matmul_n.svg (GFLOP/s vs N), matmul_procs.svg (GFLOP/s vs
// processes) and matmul.json, into -out.

func init() {
	register(command{
		name:     "matmul",
		summary:  "ORWL matmul against the roofline, shared-memory Go, StarPU dgemm and ScaLAPACK PDGEMM",
		files:    tableFiles("matmul", "matmul_n.svg", "matmul_procs.svg"),
		children: []child{jsonChild(matmulChildEnv, matmulChild)},
		setup:    benchMatmul,
	})
}

// fastestCPUKernel is the name of the fastest available CPU kernel.
func fastestCPUKernel() (string, error) {
	cpu := kernels.AvailableOn(kernels.CPU)
	if len(cpu) == 0 {
		return "", errors.New("no CPU kernel is available")
	}
	return cpu[0], nil
}

//go:embed scalapack/pdgemm.c
var pdgemmSource []byte

// matmulChildEnv marks a process of an orwl row; it holds the row's parameters.
const matmulChildEnv = "ORWL_BENCH_MATMUL_CHILD"

// mmResult is one row of the matmul table.
type mmResult struct {
	Impl     string  `json:"impl"`
	N        int     `json:"n"`
	NB       int     `json:"nb"`
	Procs    int     `json:"procs"`
	Grid     string  `json:"grid"`
	Threads  int     `json:"threads"` // kernel threads per process (or goroutine)
	Kernel   string  `json:"kernel"`
	Seconds  float64 `json:"seconds"`
	GFlops   float64 `json:"gflops"`
	Roofline float64 `json:"vs_roofline"`
	Verified *bool   `json:"verified,omitempty"`
}

func benchMatmul(fs *flag.FlagSet) func(rep *report) error {
	sizes := fs.String("n", "1024,2048,4096", "comma-separated matrix sizes N")
	procList := fs.String("procs", "1,2", "comma-separated process counts (tasks = processes, grid from the count)")
	nb := fs.Int("nb", 0, "block size NB of orwl and scalapack (0: examples/matmul's default for the N and grid)")
	kernel := fs.String("kernel", "", "kernel plugin (default: the fastest available CPU kernel)")
	reps := fs.Int("reps", 2, "multiplications per measurement; seconds is the fastest of them (every row)")
	rounds := fs.Int("rounds", 3, "measurements of every row; the best is reported (the machine may be shared)")
	withShared := fs.Bool("shared", true, "measure the shared-memory Go version (goroutines, no ORWL)")
	withStarpu := fs.Bool("starpu", true, "measure StarPU's dgemm example when installed")
	starpuBin := fs.String("starpu-bin", "", "StarPU's dgemm example (default: starpu_dgemm on PATH, or Debian's starpu-examples)")
	withScalapack := fs.Bool("scalapack", true, "measure ScaLAPACK PDGEMM when mpicc, mpirun and libscalapack-openmpi are present")
	return func(rep *report) error {
		ns, err := intList(*sizes)
		if err != nil {
			return badFlags("-n: %w", err)
		}
		procs, err := intList(*procList)
		if err != nil {
			return badFlags("-procs: %w", err)
		}
		if *nb < 0 || *reps < 1 || *rounds < 1 {
			return badFlags("-nb must not be negative, -reps and -rounds must be at least 1")
		}
		cores := runtime.NumCPU()
		name := *kernel
		if name == "" {
			if name, err = fastestCPUKernel(); err != nil {
				return err
			}
		}
		g, err := kernels.Get(name)
		if err != nil {
			return err
		}
		if c, ok := g.(io.Closer); ok {
			defer c.Close()
		}
		fmt.Fprintf(os.Stderr, "matmul: kernel %s, %d cores, %d multiplications per measurement, OPENBLAS_CORETYPE=%s\n",
			name, cores, *reps, os.Getenv("OPENBLAS_CORETYPE"))

		var pdgemm string
		var mpi *openMPI
		if *withScalapack {
			var cleanup func()
			mpi, pdgemm, cleanup = buildPeer("matmul", "scalapack (it needs libscalapack-openmpi-dev)", "pdgemm", pdgemmSource, "-O2", "-lscalapack-openmpi")
			defer cleanup()
		}

		var starpu *starpuDgemm
		if *withStarpu {
			if starpu, err = findStarpuDgemm(*starpuBin, name == "openblas"); err != nil {
				fmt.Fprintf(os.Stderr, "matmul: skipping starpu: %v\n", err)
			}
		}

		var results []mmResult
		emit := func(r mmResult) {
			results = append(results, r)
			rep.row(r)
		}
		rep.header("kernel %s, %d cores, fastest of %d multiplications, best of %d rounds, OPENBLAS_CORETYPE=%s",
			name, cores, *reps, *rounds, os.Getenv("OPENBLAS_CORETYPE"))
		rep.line("%6s  %-10s %5s %5s %5s %7s %9s %9s %11s  %s\n", "N", "impl", "procs", "grid", "NB", "threads", "seconds", "GFLOP/s", "vs-roofline", "note")
		printRow := func(r mmResult, note string) {
			rep.line("%6d  %-10s %5d %5s %5d %7d %9.3f %9.1f %11.3f  %s\n", r.N, r.Impl, r.Procs, r.Grid, r.NB, r.Threads, r.Seconds, r.GFlops, r.Roofline, note)
		}
		for _, n := range ns {
			roof := mmResult{Impl: "roofline", N: n, NB: n, Procs: 1, Grid: "1x1", Threads: cores, Kernel: name}
			// The roofline is the denominator of every ratio: measure it twice as often, so
			// that a noisy neighbour does not flatter the ratios.
			if roof.Seconds, err = bestOf(2**rounds, func() (float64, error) { return timeRoofline(g, n, cores, *reps) }); err != nil {
				return err
			}
			roof.GFlops = summa.Flops(n) / roof.Seconds / 1e9
			roof.Roofline = 1
			emit(roof)
			printRow(roof, "one kernel call, all threads")
			for _, np := range procs {
				grid := grid.Square(np)
				threads := max(1, cores/np)
				base := mmResult{N: n, NB: *nb, Procs: np, Grid: grid.String(), Threads: threads, Kernel: name}
				if base.NB == 0 {
					base.NB = summa.DefaultNB(n, grid)
				}

				if *withShared {
					sh := base
					sh.Impl, sh.NB = "shared", n
					if sh.Seconds, err = bestOf(*rounds, func() (float64, error) { return timeShared(g, n, np, threads, *reps) }); err != nil {
						return err
					}
					finish(&sh, roof.GFlops)
					emit(sh)
					printRow(sh, fmt.Sprintf("%d goroutines, rows of C", np))
				}

				ow := base
				ow.Impl = "orwl"
				verified := true
				if ow.Seconds, err = bestOf(*rounds, func() (float64, error) {
					s, ok, err := timeORWL(ow, *reps)
					verified = verified && ok
					return s, err
				}); err != nil {
					return err
				}
				ow.Verified = &verified
				finish(&ow, roof.GFlops)
				emit(ow)
				printRow(ow, fmt.Sprintf("verified=%v", verified))

				if starpu != nil {
					sp := base
					sp.Impl, sp.Grid = "starpu", "-"
					if sp.Seconds, err = bestOf(*rounds, func() (float64, error) { return timeStarpu(starpu, sp, *reps) }); err != nil {
						return err
					}
					verified := true
					sp.Verified = &verified // every run checks its result (-check)
					finish(&sp, roof.GFlops)
					emit(sp)
					printRow(sp, fmt.Sprintf("%d workers, verified, orwl/starpu=%.3f", np, ow.GFlops/sp.GFlops))
				}

				if pdgemm != "" {
					sc := base
					sc.Impl = "scalapack"
					if sc.Seconds, err = bestOf(*rounds, func() (float64, error) { return timeScalapack(mpi, pdgemm, sc, *reps) }); err != nil {
						fmt.Fprintf(os.Stderr, "matmul: scalapack N=%d procs=%d: %v\n", n, np, err)
						continue
					}
					verified := true
					sc.Verified = &verified // the driver checks its result (Freivalds), or fails
					finish(&sc, roof.GFlops)
					emit(sc)
					printRow(sc, fmt.Sprintf("orwl/scalapack=%.3f", ow.GFlops/sc.GFlops))
				}
			}
		}
		if err := rep.write(results); err != nil {
			return err
		}
		return matmulCharts(rep.out, results)
	}
}

// finish fills r's GFLOP/s from its seconds, and its ratio to the roofline's GFLOP/s.
func finish(r *mmResult, roof float64) {
	r.GFlops = summa.Flops(r.N) / r.Seconds / 1e9
	r.Roofline = r.GFlops / roof
}

// bestOf runs measure rounds times and returns the shortest time.
func bestOf(rounds int, measure func() (float64, error)) (float64, error) {
	best := math.Inf(1)
	for range rounds {
		s, err := measure()
		if err != nil {
			return 0, err
		}
		best = min(best, s)
	}
	return best, nil
}

// fastest times reps calls of f and returns the shortest, in seconds.
func fastest(reps int, f func()) float64 {
	best := math.Inf(1)
	for range reps {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0).Seconds())
	}
	return best
}

// mmOperands returns A, B and C of size n, A and B generated as the ORWL job does.
func mmOperands(n int) (a, b, c []float64) {
	a, b, c = make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range n {
		for j := range n {
			a[i*n+j] = summa.MatrixA(1, n, i, j)
			b[i*n+j] = summa.MatrixB(1, n, i, j)
		}
	}
	return a, b, c
}

// timeRoofline times one kernel call on the whole problem with threads threads.
func timeRoofline(g kernels.Gemm, n, threads, reps int) (float64, error) {
	if err := setThreads(g, threads); err != nil {
		return 0, err
	}
	a, b, c := mmOperands(n)
	warmUp(g)
	return fastest(reps, func() { g.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, b, n, 0, c, n) }), nil
}

// timeShared times the plain shared-memory version: workers goroutines, each multiplying
// its block of rows of C with its own kernel value, threads threads per call.
func timeShared(g kernels.Gemm, n, workers, threads, reps int) (float64, error) {
	if err := setThreads(g, threads); err != nil {
		return 0, err
	}
	gs := make([]kernels.Gemm, workers)
	for i := range gs {
		k, err := kernels.Get(g.Name())
		if err != nil {
			return 0, err
		}
		if c, ok := k.(io.Closer); ok {
			defer c.Close()
		}
		gs[i] = k
	}
	a, b, c := mmOperands(n)
	for _, k := range gs {
		warmUp(k)
	}
	return fastest(reps, func() {
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := w*n/workers, (w+1)*n/workers
			wg.Go(func() {
				if hi > lo {
					gs[w].Dgemm(blas.NoTrans, blas.NoTrans, hi-lo, n, n, 1, a[lo*n:], n, b, n, 0, c[lo*n:], n)
				}
			})
		}
		wg.Wait()
	}), nil
}

// orwlJob is one ORWL matmul job of the harness, run as local processes of this program
// (one task each); it travels to them as JSON in matmulChildEnv.
type orwlJob struct {
	N       int       `json:"n"`
	NB      int       `json:"nb"`
	Grid    string    `json:"grid"`
	Kernels []string  `json:"kernels"` // per task
	Threads int       `json:"threads"` // kernel threads per process (CPU kernels)
	Reps    int       `json:"reps"`
	Split   []float64 `json:"split,omitempty"`
	Balance bool      `json:"balance,omitempty"`
	// Cold leaves the kernel's warm-up out: the first multiplication is then the first
	// kernel call of every process, as in a program that multiplies once.
	Cold bool `json:"cold,omitempty"`
}

// orwlResult is what the process of task 0 prints, as one JSON line.
type orwlResult struct {
	Seconds      float64   `json:"seconds"`       // the fastest multiplication (summa.Result.Seconds)
	FirstSeconds float64   `json:"first_seconds"` // summa.Result.FirstSeconds
	FirstFaults  int64     `json:"first_faults"`  // summa.Result.FirstFaults
	MeanSeconds  float64   `json:"mean_seconds"`
	Verified     bool      `json:"verified"` // Freivalds, outside the timing
	Split        []float64 `json:"split,omitempty"`
}

// runORWL runs job as procs local processes of this program and returns its result.
func runORWL(job orwlJob, procs int) (orwlResult, error) {
	var res orwlResult
	err := launchSelf(procs, []string{"matmul"}, matmulChildEnv, job, &res)
	return res, err
}

// timeORWL runs the ORWL row r, every task on r.Kernel, and returns the fastest of reps
// multiplications and whether the job verified.
func timeORWL(r mmResult, reps int) (float64, bool, error) {
	res, err := runORWL(orwlJob{N: r.N, NB: r.NB, Grid: r.Grid, Kernels: slices.Repeat([]string{r.Kernel}, r.Procs), Threads: r.Threads, Reps: reps}, r.Procs)
	return res.Seconds, res.Verified, err
}

// matmulChild is one process of an ORWL job (its variable holds an orwlJob in JSON): it sets the threads
// of every distinct CPU kernel of the job and, unless the job is cold, warms it up, runs its part and, in the
// process of task 0 (the only one summa.Run gives a result), prints the result as JSON.
func matmulChild(job orwlJob) error {
	grid, err := grid.Parse(job.Grid, summa.MaxTasks)
	if err != nil {
		return err
	}
	if err := kernels.SetCPUThreads(job.Kernels, job.Threads); err != nil {
		return err
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(job.Kernels))) {
		g, err := kernels.Get(name)
		if err != nil {
			return err
		}
		if !job.Cold {
			warmUp(g)
		}
		if c, ok := g.(io.Closer); ok {
			c.Close()
		}
	}
	res, err := summa.Run(context.Background(), summa.Params{N: job.N, NB: job.NB, Grid: grid, Kernels: job.Kernels,
		Reps: job.Reps, Seed: 1, Verify: summa.Freivalds, Split: job.Split, Balance: job.Balance})
	if err != nil || res == nil {
		return err
	}
	b, _ := json.Marshal(orwlResult{Seconds: res.Seconds, FirstSeconds: res.FirstSeconds, FirstFaults: res.FirstFaults,
		MeanSeconds: res.MeanSeconds, Verified: res.Verified, Split: res.Split})
	fmt.Println(string(b))
	return nil
}

// warmUp makes one small untimed call, so that the kernel's threads are started before a
// measurement (every row gets one; the ScaLAPACK driver makes one untimed PDGEMM).
func warmUp(g kernels.Gemm) {
	const n = 256
	a, c := make([]float64, n*n), make([]float64, n*n)
	g.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, a, n, 0, c, n)
}

// timeScalapack runs the driver with Open MPI's mpirun on r's grid (shared memory between
// the processes).
func timeScalapack(mpi *openMPI, bin string, r mmResult, reps int) (float64, error) {
	grid, err := grid.Parse(r.Grid, summa.MaxTasks)
	if err != nil {
		return 0, err
	}
	env := []string{"OPENBLAS_NUM_THREADS=" + strconv.Itoa(r.Threads), "OPENBLAS_CORETYPE=" + os.Getenv("OPENBLAS_CORETYPE")}
	out, err := mpi.launch(r.Procs, mpi.shm, env, bin,
		strconv.Itoa(r.N), strconv.Itoa(r.NB), strconv.Itoa(grid.P), strconv.Itoa(grid.Q), strconv.Itoa(reps))
	if err != nil {
		return 0, err
	}
	if v, err := field(out, "verified"); err != nil || v != "true" {
		return 0, fmt.Errorf("pdgemm did not verify C = A*B: %s", strings.TrimSpace(out))
	}
	v, err := field(out, "seconds")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(v, 64)
}
