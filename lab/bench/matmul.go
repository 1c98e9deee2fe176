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

// matmulFlags are the flags of the matmul command.
type matmulFlags struct {
	sizes, procs, kernel, starpuBin string
	nb, reps, rounds                int
	shared, starpu, scalapack       bool
}

// benchMatmul declares the flags of the matmul command and returns its body.
func benchMatmul(fs *flag.FlagSet) func(rep *report) error {
	f := &matmulFlags{}
	fs.StringVar(&f.sizes, "n", "1024,2048,4096", "comma-separated matrix sizes N")
	fs.StringVar(&f.procs, "procs", "1,2", "comma-separated process counts (tasks = processes, grid from the count)")
	fs.IntVar(&f.nb, "nb", 0, "block size NB of orwl and scalapack (0: examples/matmul's default for the N and grid)")
	fs.StringVar(&f.kernel, "kernel", "", "kernel plugin (default: the fastest available CPU kernel)")
	fs.IntVar(&f.reps, "reps", 2, "multiplications per measurement; seconds is the fastest of them (every row)")
	fs.IntVar(&f.rounds, "rounds", 3, "measurements of every row; the best is reported (the machine may be shared)")
	fs.BoolVar(&f.shared, "shared", true, "measure the shared-memory Go version (goroutines, no ORWL)")
	fs.BoolVar(&f.starpu, "starpu", true, "measure StarPU's dgemm example when installed")
	fs.StringVar(&f.starpuBin, "starpu-bin", "", "StarPU's dgemm example (default: starpu_dgemm on PATH, or Debian's starpu-examples)")
	fs.BoolVar(&f.scalapack, "scalapack", true, "measure ScaLAPACK PDGEMM when mpicc, mpirun and libscalapack-openmpi are present")
	return func(rep *report) error { return runMatmul(f, rep) }
}

// matmulRun is one run of the matmul command: its flags, kernel, peers and rows so far.
type matmulRun struct {
	f       *matmulFlags
	rep     *report
	g       kernels.Gemm
	kernel  string // g's name
	cores   int
	mpi     *openMPI
	pdgemm  string       // the ScaLAPACK driver, "" when not measured
	starpu  *starpuDgemm // nil when not measured
	results []mmResult
}

// runMatmul measures every size and process count of f, then writes the table and charts.
func runMatmul(f *matmulFlags, rep *report) error {
	ns, err := intList(f.sizes)
	if err != nil {
		return badFlags("-n: %w", err)
	}
	procs, err := intList(f.procs)
	if err != nil {
		return badFlags("-procs: %w", err)
	}
	if f.nb < 0 || f.reps < 1 || f.rounds < 1 {
		return badFlags("-nb must not be negative, -reps and -rounds must be at least 1")
	}
	m := &matmulRun{f: f, rep: rep, kernel: f.kernel, cores: runtime.NumCPU()}
	if m.kernel == "" {
		if m.kernel, err = fastestCPUKernel(); err != nil {
			return err
		}
	}
	if m.g, err = kernels.Get(m.kernel); err != nil {
		return err
	}
	if c, ok := m.g.(io.Closer); ok {
		defer c.Close()
	}
	fmt.Fprintf(os.Stderr, "matmul: kernel %s, %d cores, %d multiplications per measurement, OPENBLAS_CORETYPE=%s\n",
		m.kernel, m.cores, f.reps, os.Getenv("OPENBLAS_CORETYPE"))
	if f.scalapack {
		var cleanup func()
		m.mpi, m.pdgemm, cleanup = buildPeer("matmul", "scalapack (it needs libscalapack-openmpi-dev)", "pdgemm", pdgemmSource, "-O2", "-lscalapack-openmpi")
		defer cleanup()
	}
	if f.starpu {
		if m.starpu, err = findStarpuDgemm(f.starpuBin, m.kernel == "openblas"); err != nil {
			fmt.Fprintf(os.Stderr, "matmul: skipping starpu: %v\n", err)
		}
	}
	rep.header("kernel %s, %d cores, fastest of %d multiplications, best of %d rounds, OPENBLAS_CORETYPE=%s",
		m.kernel, m.cores, f.reps, f.rounds, os.Getenv("OPENBLAS_CORETYPE"))
	rep.line("%6s  %-10s %5s %5s %5s %7s %9s %9s %11s  %s\n", "N", "impl", "procs", "grid", "NB", "threads", "seconds", "GFLOP/s", "vs-roofline", "note")
	for _, n := range ns {
		if err := m.size(n, procs); err != nil {
			return err
		}
	}
	if err := rep.write(m.results); err != nil {
		return err
	}
	return matmulCharts(rep.out, m.results)
}

// emit adds the row r, with its note in the table.
func (m *matmulRun) emit(r mmResult, note string) {
	m.results = append(m.results, r)
	m.rep.row(r)
	m.rep.line("%6d  %-10s %5d %5s %5d %7d %9.3f %9.1f %11.3f  %s\n", r.N, r.Impl, r.Procs, r.Grid, r.NB, r.Threads, r.Seconds, r.GFlops, r.Roofline, note)
}

// size measures the roofline of size n, then every row of every process count of procs.
func (m *matmulRun) size(n int, procs []int) error {
	roof := mmResult{Impl: "roofline", N: n, NB: n, Procs: 1, Grid: "1x1", Threads: m.cores, Kernel: m.kernel}
	// The roofline is the denominator of every ratio: measure it twice as often, so
	// that a noisy neighbour does not flatter the ratios.
	var err error
	if roof.Seconds, err = bestOf(2*m.f.rounds, func() (float64, error) { return timeRoofline(m.g, n, m.cores, m.f.reps) }); err != nil {
		return err
	}
	roof.GFlops = summa.Flops(n) / roof.Seconds / 1e9
	roof.Roofline = 1
	m.emit(roof, "one kernel call, all threads")
	for _, np := range procs {
		if err := m.procs(n, np, roof.GFlops); err != nil {
			return err
		}
	}
	return nil
}

// procs measures the rows of size n on np processes (shared, orwl, starpu, scalapack, as
// asked and installed) against the roofline's GFLOP/s roof.
func (m *matmulRun) procs(n, np int, roof float64) error {
	g := grid.Square(np)
	base := mmResult{N: n, NB: m.f.nb, Procs: np, Grid: g.String(), Threads: max(1, m.cores/np), Kernel: m.kernel}
	if base.NB == 0 {
		base.NB = summa.DefaultNB(n, g)
	}
	if m.f.shared {
		if err := m.shared(base, roof); err != nil {
			return err
		}
	}
	ow, err := m.orwl(base, roof)
	if err != nil {
		return err
	}
	if m.starpu != nil {
		if err := m.starpuRow(base, roof, ow.GFlops); err != nil {
			return err
		}
	}
	if m.pdgemm != "" {
		m.scalapack(base, roof, ow.GFlops)
	}
	return nil
}

// shared measures the shared-memory Go row of base.
func (m *matmulRun) shared(base mmResult, roof float64) error {
	sh := base
	sh.Impl, sh.NB = "shared", base.N
	var err error
	if sh.Seconds, err = bestOf(m.f.rounds, func() (float64, error) { return timeShared(m.g, base.N, base.Procs, base.Threads, m.f.reps) }); err != nil {
		return err
	}
	finish(&sh, roof)
	m.emit(sh, fmt.Sprintf("%d goroutines, rows of C", base.Procs))
	return nil
}

// orwl measures and returns the ORWL row of base, verified when every product was.
func (m *matmulRun) orwl(base mmResult, roof float64) (mmResult, error) {
	ow := base
	ow.Impl = "orwl"
	verified := true
	var err error
	if ow.Seconds, err = bestOf(m.f.rounds, func() (float64, error) {
		s, ok, err := timeORWL(ow, m.f.reps)
		verified = verified && ok
		return s, err
	}); err != nil {
		return ow, err
	}
	ow.Verified = &verified
	finish(&ow, roof)
	m.emit(ow, fmt.Sprintf("verified=%v", verified))
	return ow, nil
}

// starpuRow measures StarPU's dgemm on base's problem, against ORWL's GFLOP/s orwl.
func (m *matmulRun) starpuRow(base mmResult, roof, orwl float64) error {
	sp := base
	sp.Impl, sp.Grid = "starpu", "-"
	var err error
	if sp.Seconds, err = bestOf(m.f.rounds, func() (float64, error) { return timeStarpu(m.starpu, sp, m.f.reps) }); err != nil {
		return err
	}
	verified := true
	sp.Verified = &verified // every run checks its result (-check)
	finish(&sp, roof)
	m.emit(sp, fmt.Sprintf("%d workers, verified, orwl/starpu=%.3f", base.Procs, orwl/sp.GFlops))
	return nil
}

// scalapack measures PDGEMM on base's problem, against ORWL's GFLOP/s orwl; a failure is
// said and leaves the row out.
func (m *matmulRun) scalapack(base mmResult, roof, orwl float64) {
	sc := base
	sc.Impl = "scalapack"
	var err error
	if sc.Seconds, err = bestOf(m.f.rounds, func() (float64, error) { return timeScalapack(m.mpi, m.pdgemm, sc, m.f.reps) }); err != nil {
		fmt.Fprintf(os.Stderr, "matmul: scalapack N=%d procs=%d: %v\n", base.N, base.Procs, err)
		return
	}
	verified := true
	sc.Verified = &verified // the driver checks its result (Freivalds), or fails
	finish(&sc, roof)
	m.emit(sc, fmt.Sprintf("orwl/scalapack=%.3f", orwl/sc.GFlops))
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
