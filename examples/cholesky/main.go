// Command cholesky factors an N x N symmetric positive definite float64 matrix, A = L·Lᵀ,
// with a tiled Cholesky factorisation whose NB x NB tiles are distributed 2-D
// block-cyclically (grid -grid PxQ) over the tasks of an ORWL job, one location per tile;
// it checks the factor and prints its speed. Package
// github.com/orwl-go/orwl/examples/cholesky/tiled describes the algorithm, its schedule
// and why it is deadlock-free.
//
// With no flags it starts one process per core on this machine (loopback), one task per
// process, with the fastest CPU kernel and a problem that takes a few seconds:
//
//	go run ./examples/cholesky
//	go run ./examples/cholesky -n 8192 -nb 1024 -grid 1x2 -np 2 -kernel openblas -threads 1 -reps 3
//
// Started by another launcher (orwlrun -np N, mpirun -np N, mpiexec -n N, srun) it is one
// process of that job and starts nothing itself; its kernel threads default to this
// host's cores divided among the job's tasks on this host. The process that runs task 0
// prints a progress line on standard error while it runs, a summary, and, last, the
// result line:
//
//	result: n=8192 nb=1024 procs=2 seconds=1.95 gflops=94.0 first_gflops=92.1 residual=0.0012 verified=true
//
// seconds and gflops are the fastest of the -reps factorisations (GFLOP = N³/3 / 10⁹),
// first_gflops the first one's; residual is the scaled residual ‖A − L·Lᵀ‖/(‖A‖·N·ε),
// estimated with a random vector (tiled.Result.Residual), and verified means it is below
// tiled.ResidualBound (30). -json prints one JSON object with these fields and a few more
// (grid, tasks, kernel, threads, checksum of L) instead of the summary and result lines.
// Flags that make no sense are reported in one line on standard error with exit status 2;
// a failed run exits with status 1; a failed verification with status 3.
//
// -kernel takes a kernel name with the Cholesky operations (gonum, openblas, cublas), "cpu"
// (the fastest available CPU kernel, the default), or a mix such as "cublas:1,openblas"
// (tasks assigned in id order: task 0 on the GPU, the others on OpenBLAS; -threads sets
// the threads of the CPU kernels only). The tiles are dealt as for CPU kernels alone,
// whatever the kernel of their owner. -trace FILE records every request, grant, wait, section and
// transfer of the job; the process of rank 0 writes them to FILE as Chrome trace event
// JSON (open it in Perfetto, or draw it with cmd/orwltrace) and prints a summary.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/orwl-go/orwl/examples/cholesky/tiled"
	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/internal/exampleutil"
	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
	"github.com/orwl-go/orwl/orwl"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitFailed   = exampleutil.ExitFailed
	exitUsage    = exampleutil.ExitUsage
	exitMismatch = 3 // the factor did not verify
)

// config is the parsed and checked command line.
type config struct {
	n, nb        int
	grid         grid.Grid
	tasks, procs int
	kernelSpec   string   // as printed
	kernels      []string // per task
	threads      int
	reps         int
	seed         uint64
	json         bool
	trace        string
	inJob        bool // started by a launcher: run, do not start processes
	args         []string
}

var usagef = exampleutil.Usagef

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("cholesky", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "matrix order N (default: 8192 with a BLAS kernel, 1536 with gonum)")
	nb := fs.Int("nb", 0, "tile size NB (default: tiled.DefaultNB: N/8 within 512 to 1024, at most N/4)")
	gridFlag := fs.String("grid", "", "task grid PxQ (default: the most square grid of -tasks, with P <= Q)")
	tasks := fs.Int("tasks", 0, "tasks (default: P*Q of -grid, else -np, else the launcher's process count, else one per core)")
	np := fs.Int("np", 0, "processes started on this machine (default: min(tasks, cores)); ignored under a launcher")
	kernel := fs.String("kernel", "cpu", "kernel: cpu, gonum, openblas, cublas, or a mix such as cublas:1,openblas")
	threads := fs.Int("threads", 0, "kernel threads per process (default: cores / tasks on this host, at least 1)")
	reps := fs.Int("reps", 1, "factorisations; seconds is the fastest, first_gflops the first's")
	seed := fs.Uint64("seed", 1, "seed of A and of the verification vector")
	traceFile := fs.String("trace", "", "write the job's trace (Chrome trace event JSON) to this file")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the summary and result lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: cholesky [flags]")
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	info, err := orwl.Environment()
	if err != nil {
		return nil, usagef("%v", err)
	}
	c := &config{threads: *threads, reps: *reps, seed: *seed, json: *asJSON, trace: *traceFile, args: args, inJob: info.Launched()}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["nb"] && *nb < 1:
		return nil, usagef("-nb is %d; the tile size must be at least 1", *nb)
	case set["n"] && *n < 1:
		return nil, usagef("-n is %d; the matrix order must be at least 1", *n)
	case set["tasks"] && (*tasks < 1 || *tasks > tiled.MaxTasks):
		return nil, usagef("-tasks is %d; need 1 to %d", *tasks, tiled.MaxTasks)
	case set["np"] && (*np < 1 || *np > tiled.MaxTasks):
		return nil, usagef("-np is %d; need 1 to %d", *np, tiled.MaxTasks)
	case *reps < 1:
		return nil, usagef("-reps is %d; need at least 1", *reps)
	case *threads < 0:
		return nil, usagef("-threads is %d; need at least 0 (0: default)", *threads)
	}
	if err := c.layout(set, *gridFlag, *tasks, *np, info); err != nil {
		return nil, err
	}
	if err := c.chooseKernels(*kernel); err != nil {
		return nil, err
	}
	c.n, c.nb = *n, *nb
	if !set["n"] {
		c.n = 8192
		if c.kernelSpec == "gonum" {
			c.n = 1536
		}
	}
	if !set["nb"] {
		c.nb = tiled.DefaultNB(c.n)
	}
	onHost := exampleutil.TasksOnHost(c.inJob, c.tasks, c.procs, info)
	if c.threads == 0 {
		c.threads = max(1, runtime.NumCPU()/onHost)
	}
	need := tiled.BytesPerTask(c.n, c.nb, c.grid) * float64(onHost)
	if avail := exampleutil.AvailableMemory(); avail > 0 && need > avail {
		return nil, usagef("-n %d over %d tasks needs about %.3g GiB of memory on this host, and %.3g GiB is available: use a smaller -n, or more hosts",
			c.n, c.tasks, need/(1<<30), avail/(1<<30))
	}
	return c, nil
}

// layout sets the grid, the tasks and the processes from the flags that were set.
func (c *config) layout(set map[string]bool, gridFlag string, tasks, np int, info orwl.Job) error {
	cores := runtime.NumCPU()
	if set["grid"] {
		var err error
		if c.grid, err = grid.Parse(gridFlag, summa.MaxTasks); err != nil {
			return usagef("-grid: %v", err)
		}
	}
	switch {
	case set["tasks"]:
		c.tasks = tasks
	case set["grid"]:
		c.tasks = c.grid.Tasks()
	case set["np"]:
		c.tasks = np
	case c.inJob:
		c.tasks = info.Size
	default:
		c.tasks = cores
	}
	switch {
	case !set["grid"]:
		c.grid = tiled.DefaultGrid(c.tasks)
	case c.grid.Tasks() != c.tasks:
		return usagef("-grid %s has %d tasks but -tasks is %d", c.grid, c.grid.Tasks(), c.tasks)
	}
	switch {
	case c.inJob:
		c.procs = info.Size
	case set["np"]:
		c.procs = np
	default:
		c.procs = min(c.tasks, cores)
	}
	if c.procs > c.tasks {
		return usagef("%d processes for %d tasks; need at most one process per task", c.procs, c.tasks)
	}
	return nil
}

// chooseKernels resolves -kernel to one kernel per task, each with the Cholesky operations.
func (c *config) chooseKernels(spec string) error {
	var err error
	if c.kernels, c.kernelSpec, err = exampleutil.ParseKernels(spec, c.tasks); err != nil {
		return err
	}
	for _, name := range c.kernels {
		g, err := kernels.GetCholesky(name)
		if err != nil {
			return usagef("-kernel %s: %v", name, err)
		}
		if cl, ok := g.(io.Closer); ok {
			cl.Close()
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "cholesky:", exampleutil.OneLine(err.Error()))
		return exitUsage
	}
	if !c.inJob && c.procs > 1 {
		return exampleutil.StartProcesses("cholesky", c.procs, c.args, stdout, stderr)
	}
	return compute(c, stdout, stderr)
}

// jsonResult is the -json output: the result line's fields and a few more.
type jsonResult struct {
	N           int     `json:"n"`
	NB          int     `json:"nb"`
	Procs       int     `json:"procs"`
	Seconds     float64 `json:"seconds"`
	GFlops      float64 `json:"gflops"`
	FirstGFlops float64 `json:"first_gflops"`
	Residual    float64 `json:"residual"`
	Verified    bool    `json:"verified"`
	Grid        string  `json:"grid"`
	Tasks       int     `json:"tasks"`
	Kernel      string  `json:"kernel"`
	Threads     int     `json:"threads"`
	Reps        int     `json:"reps"`
	First       float64 `json:"first_seconds"`
	Checksum    string  `json:"checksum"`
	Compute     float64 `json:"compute_seconds"`
	Wait        float64 `json:"wait_seconds"`
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	if err := kernels.SetCPUThreads(c.kernels, c.threads); err != nil {
		fmt.Fprintln(stderr, "cholesky:", err)
		return exitFailed
	}
	prog := &exampleutil.Progress{W: stderr}
	stopProgress := prog.Start()
	t0 := time.Now()
	res, err := tiled.Run(context.Background(), tiled.Params{
		N: c.n, NB: c.nb, Grid: c.grid, Kernels: c.kernels, Reps: c.reps, Seed: c.seed,
		Progress: prog.Update, Trace: c.trace,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	stopProgress()
	if err != nil {
		fmt.Fprintln(stderr, "cholesky:", err)
		return exitFailed
	}
	if res == nil {
		return 0 // another process runs task 0 and reports
	}
	var comp, wait time.Duration
	for _, s := range res.Tasks {
		comp += s.Compute
		wait += s.Wait
	}
	per := float64(len(res.Tasks) * c.reps)
	if c.json {
		out, _ := json.Marshal(jsonResult{
			N: c.n, NB: c.nb, Procs: res.Procs, Seconds: res.Seconds, GFlops: res.GFlops, FirstGFlops: res.FirstGFlops,
			Residual: res.Residual, Verified: res.Verified, Grid: c.grid.String(), Tasks: c.tasks, Kernel: c.kernelSpec,
			Threads: c.threads, Reps: c.reps, First: res.FirstSeconds, Checksum: fmt.Sprintf("%016x", res.Checksum),
			Compute: comp.Seconds() / per, Wait: wait.Seconds() / per,
		})
		fmt.Fprintln(stdout, string(out))
	} else {
		fmt.Fprintf(stdout, "summary: grid=%s tasks=%d kernel=%s threads=%d/process; wall %.3fs (setup, %d factorisation(s), check); per factorisation and task: compute %.3fs, waiting %.3fs; first %.3fs; checksum=%016x\n",
			c.grid, c.tasks, c.kernelSpec, c.threads, time.Since(t0).Seconds(), c.reps, comp.Seconds()/per, wait.Seconds()/per, res.FirstSeconds, res.Checksum)
		fmt.Fprintf(stdout, "result: n=%d nb=%d procs=%d seconds=%.3f gflops=%.1f first_gflops=%.1f residual=%.3g verified=%v\n",
			c.n, c.nb, res.Procs, res.Seconds, res.GFlops, res.FirstGFlops, res.Residual, res.Verified)
	}
	if !res.Verified {
		fmt.Fprintln(stderr, "cholesky: verification failed")
		return exitMismatch
	}
	return 0
}
