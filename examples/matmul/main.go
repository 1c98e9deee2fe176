// Command matmul multiplies two N x N float64 matrices distributed 2-D block-cyclically over
// the tasks of an ORWL job (ScaLAPACK's parameters: block size -nb, grid -grid PxQ), checks
// the result and prints its speed. Blocks move between tasks only through ORWL locations,
// with iterative handles publishing every panel two steps before it is used: package
// github.com/orwl-go/orwl/examples/matmul/summa describes the algorithm (SUMMA) and why it
// is deadlock-free.
//
// With no flags it starts one process per core on this machine (loopback), one task per
// process, with the fastest CPU kernel and a problem that takes a few seconds, and makes
// three multiplications: the first, cold, as a program that multiplies once would see it
// (memory touched for the first time, page faults), and the best, warm:
//
//	go run ./examples/matmul
//	go run ./examples/matmul -n 4096 -nb 512 -grid 2x1 -np 2 -kernel openblas -threads 1
//
// Started by another launcher (orwlrun -np N, mpirun -np N, mpiexec -n N, srun, the pods of
// a Kubernetes Indexed Job: see examples/kubernetes/matmul.yaml) it is one process of that
// job and starts nothing itself; its kernel threads default to this host's cores divided
// among the job's tasks on this host. The process that runs task 0 prints a progress line on
// standard error while it runs, a summary, and, last, the result line:
//
//	result: n=6144 nb=512 grid=2x1 tasks=2 procs=2 kernel=openblas reps=3 first-seconds=4.712 first-gflops=98.4 best-seconds=4.398 best-gflops=105.5 verified=true
//
// The first multiplication is timed from the moment A and B exist in every task (the end
// of the schedule; their generation is left out): the allocation of C and of the mirrors of
// remote panels, and the page faults of touching C, the panel locations and the mirrors the
// first time, count in it; the summary gives its page faults (ORWL_HUGEPAGES=on asks for
// transparent huge pages for C, the panels and the mirrors: see package orwl). The best is
// the fastest of the -reps multiplications. (-json prints one JSON object with the same
// fields instead of the summary and result lines.) Flags that make no sense are reported in
// one line on standard error with exit status 2; a failed run exits with status 1; a failed
// verification with status 3.
//
// -kernel takes a kernel name (gonum, openblas, cublas), "cpu" (the fastest available CPU
// kernel, the default; when that is pure-Go gonum because libopenblas.so.0 is missing, the
// process of task 0 says so in one line on standard error, with the command that installs
// it), "auto" (the fastest available kernel), or a mix for hybrid runs
// such as "cublas:1,openblas": one task on cublas, the others on openblas (tasks are
// assigned in id order; at most one entry may leave out its count, it takes the rest).
// Mixed runs are balanced (-balance, on by default for them): the grid is one row of
// tasks, every task computes a range of C's columns with one kernel call per
// multiplication, and after each multiplication the ranges move from the rates the tasks
// measured, with a short search when tasks slow each other down (package summa, balance.go;
// -reps defaults to 6 then; the result line's best is the fastest multiplication, the
// summary gives the final shares). -split 4,1 gives the shares to start from; with
// -balance=false they stay as given (a static split, for comparison; go run ./lab/bench
// hybrid tries many). A balanced run holds A, B and C whole in every task: about 3N²
// float64s per task.
//
// -verify: "auto" (the default, also "true") runs Freivalds' check for any N and, for
// N <= 1024, also an exact comparison with one kernel call on the whole problem; "exact",
// "freivalds" and "none" (also "false") choose.
//
// -trace FILE records every request, grant, wait, section and transfer of the job; the
// process of rank 0 writes them to FILE as Chrome trace event JSON (open it in Perfetto,
// or draw it with cmd/orwltrace) and prints a summary on standard error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/internal/exampleutil"
	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
	"github.com/orwl-go/orwl/kernels/gonum"
	"github.com/orwl-go/orwl/kernels/openblas"
	"github.com/orwl-go/orwl/orwl"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitFailed   = exampleutil.ExitFailed
	exitUsage    = exampleutil.ExitUsage
	exitMismatch = 3 // the result did not verify
)

// config is the parsed and checked command line.
type config struct {
	n, nb        int
	grid         grid.Grid
	tasks, procs int
	kernelSpec   string   // as printed in the result line
	kernels      []string // per task
	threads      int
	reps         int
	seed         uint64
	verify       summa.Verify
	json         bool
	balance      bool
	split        []float64
	trace        string // trace file, or ""
	inJob        bool   // started by a launcher: run, do not start processes
	rank         int    // this process's rank in the job (0 when it is alone)
	note         string // a line for stderr about the kernel chosen, or ""
	args         []string
}

// usagef reports a mistake on the command line.
var usagef = exampleutil.Usagef

// verifyFlag is -verify: a bool-like flag that also takes a check's name.
type verifyFlag struct{ s string }

func (v *verifyFlag) String() string { return v.s }
func (v *verifyFlag) Set(s string) error {
	switch s {
	case "auto", "true", "exact", "freivalds", "none", "false":
		v.s = s
		return nil
	}
	return errors.New("want auto, exact, freivalds or none")
}
func (v *verifyFlag) IsBoolFlag() bool { return true }

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("matmul", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "matrix size N (default: 6144 with a BLAS kernel, 1536 with gonum)")
	nb := fs.Int("nb", 0, "block size NB (default: 512, less when the grid would leave a task without a block)")
	gridFlag := fs.String("grid", "", "task grid PxQ (default: the most square grid of -tasks)")
	tasks := fs.Int("tasks", 0, "tasks (default: P*Q of -grid, else -np, else the launcher's process count, else one per core)")
	np := fs.Int("np", 0, "processes started on this machine (default: min(tasks, cores)); ignored under a launcher")
	kernel := fs.String("kernel", "cpu", "kernel: cpu, auto, gonum, openblas, cublas, or a mix such as cublas:1,openblas")
	threads := fs.Int("threads", 0, "kernel threads per process (default: cores / tasks on this host, at least 1)")
	reps := fs.Int("reps", 3, "multiplications; the result gives the first (cold) and the fastest (the summary gives the mean)")
	seed := fs.Uint64("seed", 1, "seed of A, B and the verification vector")
	verify := &verifyFlag{"auto"}
	fs.Var(verify, "verify", "checks: auto, exact, freivalds, none")
	balance := fs.Bool("balance", false, "move the shares of C's columns between tasks after each multiplication from measured rates (default: on for mixed kernels)")
	split := fs.String("split", "", "shares of C's columns, one weight per task (e.g. 4,1): static, or the start of balancing; implies a 1xT grid")
	traceFile := fs.String("trace", "", "write the job's trace (Chrome trace event JSON) to this file")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the summary and result lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: matmul [flags]")
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	c := &config{nb: *nb, threads: *threads, reps: *reps, seed: *seed, json: *asJSON, trace: *traceFile, args: args}
	info, err := orwl.Environment()
	if err != nil {
		return nil, usagef("%v", err)
	}
	c.inJob, c.rank = info.Launched(), info.Rank
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["nb"] && *nb < 1:
		return nil, usagef("-nb is %d; the block size must be at least 1", *nb)
	case set["n"] && *n < 1:
		return nil, usagef("-n is %d; the matrix size must be at least 1", *n)
	case set["tasks"] && (*tasks < 1 || *tasks > summa.MaxTasks):
		return nil, usagef("-tasks is %d; need 1 to %d", *tasks, summa.MaxTasks)
	case set["np"] && *np > summa.MaxTasks:
		return nil, usagef("-np is %d; at most %d", *np, summa.MaxTasks)
	case set["np"] && *np < 1:
		return nil, usagef("-np is %d; need at least 1", *np)
	case *reps < 1:
		return nil, usagef("-reps is %d; need at least 1", *reps)
	case *threads < 0:
		return nil, usagef("-threads is %d; need at least 0 (0: default)", *threads)
	}
	cores := runtime.NumCPU()
	if set["grid"] {
		if c.grid, err = grid.Parse(*gridFlag, summa.MaxTasks); err != nil {
			return nil, usagef("-grid: %v", err)
		}
	}
	switch {
	case set["tasks"]:
		c.tasks = *tasks
	case set["grid"]:
		c.tasks = c.grid.Tasks()
	case set["np"]:
		c.tasks = *np
	case c.inJob:
		c.tasks = info.Size
	default:
		c.tasks = cores
	}
	if c.kernels, c.kernelSpec, err = exampleutil.ParseKernels(*kernel, c.tasks); err != nil {
		return nil, err
	}
	c.note = fallbackNote(*kernel, c.kernelSpec, kernels.AvailableOn(kernels.CPU))
	c.balance = *balance
	if !set["balance"] {
		c.balance = slices.ContainsFunc(c.kernels, func(k string) bool { return k != c.kernels[0] })
	}
	if set["split"] {
		for _, f := range strings.Split(*split, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(v >= 0) || v > 1e300 {
				return nil, usagef("-split %q: %q is not a weight >= 0", *split, f)
			}
			c.split = append(c.split, v)
		}
		if len(c.split) != c.tasks {
			return nil, usagef("-split has %d weights for %d tasks", len(c.split), c.tasks)
		}
	}
	balanced := c.balance || c.split != nil
	switch {
	case !set["grid"] && balanced:
		c.grid = grid.Grid{P: 1, Q: c.tasks}
	case !set["grid"]:
		c.grid = grid.Square(c.tasks)
	case c.grid.Tasks() != c.tasks:
		return nil, usagef("-grid %s has %d tasks but -tasks is %d", c.grid, c.grid.Tasks(), c.tasks)
	case balanced && c.grid.P != 1:
		return nil, usagef("-grid %s: balanced runs (-balance, -split, mixed kernels) need a grid of one row, 1x%d", c.grid, c.tasks)
	}
	if c.balance && !set["reps"] {
		c.reps = 6 // the shares move between multiplications
	}
	switch {
	case c.inJob:
		c.procs = info.Size
	case set["np"]:
		c.procs = *np
	default:
		c.procs = min(c.tasks, cores)
	}
	if c.procs > c.tasks {
		return nil, usagef("%d processes for %d tasks; need at most one process per task", c.procs, c.tasks)
	}
	c.n = *n
	if !set["n"] {
		c.n = 6144
		if c.kernelSpec == "gonum" {
			c.n = 1536
		}
	}
	if !set["nb"] {
		c.nb = summa.DefaultNB(c.n, c.grid)
	}
	switch verify.s {
	case "auto", "true":
		c.verify = summa.Freivalds
		if c.n <= 1024 {
			c.verify |= summa.Exact
		}
	case "exact":
		c.verify = summa.Exact
	case "freivalds":
		c.verify = summa.Freivalds
	}
	if c.threads == 0 {
		c.threads = max(1, cores/exampleutil.TasksOnHost(c.inJob, c.tasks, c.procs, info))
	}
	need := summa.BytesPerTask(c.n, c.nb, c.grid, balanced) * float64(exampleutil.TasksOnHost(c.inJob, c.tasks, c.procs, info))
	if avail := exampleutil.AvailableMemory(); avail > 0 && need > avail {
		return nil, usagef("-n %d over %d tasks needs about %.3g GiB of memory on this host, and %.3g GiB is available: use a smaller -n, or more hosts",
			c.n, c.tasks, need/(1<<30), avail/(1<<30))
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "matmul:", exampleutil.OneLine(err.Error()))
		return exitUsage
	}
	if !c.inJob && c.procs > 1 {
		return exampleutil.StartProcesses("matmul", c.procs, c.args, stdout, stderr)
	}
	return compute(c, stdout, stderr)
}

// jsonResult is the -json output: the result line's fields and a few more.
type jsonResult struct {
	N        int     `json:"n"`
	NB       int     `json:"nb"`
	Grid     string  `json:"grid"`
	Tasks    int     `json:"tasks"`
	Procs    int     `json:"procs"`
	Kernel   string  `json:"kernel"`
	Seconds  float64 `json:"seconds"` // the fastest multiplication
	Mean     float64 `json:"mean_seconds"`
	GFlops   float64 `json:"gflops"` // of the fastest
	First    float64 `json:"first_seconds"`
	FirstGF  float64 `json:"first_gflops"`
	Faults   int64   `json:"first_page_faults"` // of the job's processes during the first multiplication
	Verified bool    `json:"verified"`
	Threads  int     `json:"threads"`
	Reps     int     `json:"reps"`
	Checks   string  `json:"checks"`
	Checksum string  `json:"checksum"`
	Compute  float64 `json:"compute_seconds"`
	Wait     float64 `json:"wait_seconds"`
	BytesIn  int64   `json:"bytes_moved"`
}

// fallbackNote returns the line that says why the kernel chosen for -kernel cpu or auto
// (requested) is the pure-Go one (chosen, the resolved spec) when that is only because
// OpenBLAS is not among the available CPU kernels; otherwise "".
func fallbackNote(requested, chosen string, availableCPU []string) string {
	if requested != "cpu" && requested != kernels.Auto || chosen != gonum.Name || slices.Contains(availableCPU, openblas.Name) {
		return ""
	}
	return "matmul: OpenBLAS (libopenblas.so.0) not found: using the pure-Go gonum kernel, several times slower; install it with: apt-get install libopenblas0"
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	if c.note != "" && c.rank == 0 {
		fmt.Fprintln(stderr, c.note)
	}
	if err := kernels.SetCPUThreads(c.kernels, c.threads); err != nil {
		fmt.Fprintln(stderr, "matmul:", err)
		return exitFailed
	}
	prog := &exampleutil.Progress{W: stderr}
	stopProgress := prog.Start()
	t0 := time.Now()
	res, err := summa.Run(context.Background(), summa.Params{
		N: c.n, NB: c.nb, Grid: c.grid, Kernels: c.kernels, Reps: c.reps, Seed: c.seed,
		Verify: c.verify, Progress: prog.Update, Trace: c.trace, Balance: c.balance, Split: c.split,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	stopProgress()
	if err != nil {
		fmt.Fprintln(stderr, "matmul:", err)
		return exitFailed
	}
	if res == nil {
		return 0 // another process runs task 0 and reports
	}
	var compute, wait time.Duration
	var moved int64
	kinds := map[string][2]float64{} // kernel: flops, seconds
	for _, s := range res.Tasks {
		compute += s.Compute
		wait += s.Wait
		moved += s.BytesIn
		k := kinds[s.Kernel]
		kinds[s.Kernel] = [2]float64{k[0] + s.Flops, k[1] + s.Compute.Seconds()}
	}
	tasks := float64(len(res.Tasks))
	if c.json {
		out, _ := json.Marshal(jsonResult{
			N: c.n, NB: c.nb, Grid: c.grid.String(), Tasks: c.tasks, Procs: res.Procs, Kernel: c.kernelSpec,
			Seconds: res.Seconds, Mean: res.MeanSeconds, GFlops: res.GFlops, Verified: res.Verified, Threads: c.threads, Reps: c.reps,
			First: res.FirstSeconds, FirstGF: summa.Flops(c.n) / res.FirstSeconds / 1e9, Faults: res.FirstFaults,
			Checks: res.Checks, Checksum: fmt.Sprintf("%016x", res.Checksum),
			Compute: compute.Seconds() / tasks / float64(c.reps), Wait: wait.Seconds() / tasks / float64(c.reps), BytesIn: moved,
		})
		fmt.Fprintln(stdout, string(out))
	} else {
		fmt.Fprintf(stdout, "summary: wall %.3fs (setup, %d multiplication(s), checks); mean %.3fs per multiplication; per multiplication and task: compute %.3fs, waiting %.3fs; %.1f MB moved between processes; threads=%d/process\n",
			time.Since(t0).Seconds(), c.reps, res.MeanSeconds, compute.Seconds()/tasks/float64(c.reps), wait.Seconds()/tasks/float64(c.reps), float64(moved)/1e6, c.threads)
		for _, name := range slices.Sorted(maps.Keys(kinds)) {
			if k := kinds[name]; len(kinds) > 1 {
				fmt.Fprintf(stdout, "summary: kernel %s: %.1f%% of the flops at %.1f GFLOP/s per task\n", name, 100*k[0]/(summa.Flops(c.n)*float64(c.reps)), k[0]/k[1]/1e9)
			}
		}
		if res.Split != nil {
			shares, weights := make([]string, len(res.Split)), make([]string, len(res.Split))
			for i, f := range res.Split {
				shares[i] = fmt.Sprintf("%s %.1f%%", c.kernels[i], 100*f)
				weights[i] = strconv.FormatFloat(f, 'g', 4, 64)
			}
			how, hint := "static", ""
			if c.balance {
				// The first multiplication starts from equal shares; a later run can start here.
				how, hint = "balanced from measured rates", "; to start a later run from them: -split "+strings.Join(weights, ",")
			}
			fmt.Fprintf(stdout, "summary: shares of C's columns in the last multiplication (%s): %s%s\n", how, strings.Join(shares, ", "), hint)
		}
		fmt.Fprintf(stdout, "summary: first multiplication %.3fs from A and B generated (C, panels and mirrors included), %d page faults in %d process(es)\n",
			res.FirstSeconds, res.FirstFaults, res.Procs)
		fmt.Fprintf(stdout, "summary: checks=%s freivalds-ratio=%.3g exact-max-error=%.3g checksum=%016x\n",
			res.Checks, res.FreivaldsRatio, res.ExactErr, res.Checksum)
		fmt.Fprintf(stdout, "result: n=%d nb=%d grid=%s tasks=%d procs=%d kernel=%s reps=%d first-seconds=%.3f first-gflops=%.1f best-seconds=%.3f best-gflops=%.1f verified=%v\n",
			c.n, c.nb, c.grid, c.tasks, res.Procs, c.kernelSpec, c.reps, res.FirstSeconds, summa.Flops(c.n)/res.FirstSeconds/1e9, res.Seconds, res.GFlops, res.Verified)
	}
	if c.verify != 0 && !res.Verified {
		fmt.Fprintln(stderr, "matmul: verification failed")
		return exitMismatch
	}
	return 0
}
