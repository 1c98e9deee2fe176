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
// among the job's tasks on this host. The command line is the examples' (package
// examples/internal/cli): -tasks is a count of tasks (default: P*Q of -grid, else -np, else
// the launcher's process count, else one per core), -np the processes started on this
// machine (default: min(tasks, cores)), -json and -trace. The process that runs task 0
// prints a progress line on standard error while it runs, a summary, and, last, the result
// line:
//
//	result: n=6144 nb=1024 grid=2x1 kernel=openblas reps=3 tasks=2 procs=2 first-seconds=4.440 first-gflops=104.5 seconds=4.336 gflops=107.0 verified=true
//
// The first multiplication is timed from the moment A and B exist in every task (the end
// of the schedule; their generation is left out): the allocation of C and of the mirrors of
// remote panels, and the page faults of touching C and the mirrors the first time (the
// panel locations borrow the pages of the panels they publish), count in it; the summary
// gives its page faults (ORWL_HUGEPAGES=on asks for transparent huge pages for C, the
// panels and the mirrors: see package orwl). The best is the fastest of the -reps
// multiplications (seconds, gflops). (-json prints one JSON object
// with the same keys, and the summary's figures, instead of the summary and result lines.)
// Flags that make no sense are reported in one line on standard error with exit status 2;
// a failed run exits with status 1; a failed verification with status 3.
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
// "freivalds" and "none" (also "false": verified=skipped) choose.
//
// -trace FILE records every request, grant, wait, section and transfer of the job; the
// process of rank 0 writes them to FILE as Chrome trace event JSON (open it in Perfetto,
// or draw it with cmd/orwltrace) and prints a summary on standard error.
package main

import (
	"context"
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
	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
	"github.com/orwl-go/orwl/kernels/gonum"
	"github.com/orwl-go/orwl/kernels/openblas"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitFailed   = cli.ExitFailed
	exitUsage    = cli.ExitUsage
	exitMismatch = cli.ExitMismatch // the result did not verify
)

// config is the parsed and checked command line.
type config struct {
	cli.Job
	cli.Matrix
	verify  summa.Verify
	balance bool
	split   []float64
	note    string // a line for stderr about the kernel chosen, or ""
}

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
	c := &config{}
	c.Job.Flags(fs, cli.Layout{Tasks: runtime.NumCPU(), TasksDoc: "one per core", MaxTasks: summa.MaxTasks, Spread: true, Grid: true})
	c.Matrix.Flags(fs, cli.MatrixLayout{
		N: 6144, GonumN: 1536, NDoc: "matrix size N",
		NBDoc:     "block size NB (default: 512, 1024 from N = 4096, less when the grid would leave a task without a block)",
		GridDoc:   "the most square grid of -tasks",
		KernelDoc: "cpu, auto, gonum, openblas, cublas, or a mix such as cublas:1,openblas",
		Reps:      3,
		RepsDoc:   "multiplications; the result gives the first (cold) and the fastest (the summary gives the mean)",
		SeedDoc:   "A, B and the verification vector",
	})
	verify := &verifyFlag{"auto"}
	fs.Var(verify, "verify", "checks: auto, exact, freivalds, none")
	balance := fs.Bool("balance", false, "move the shares of C's columns between tasks after each multiplication from measured rates (default: on for mixed kernels)")
	split := fs.String("split", "", "shares of C's columns, one weight per task (e.g. 4,1): static, or the start of balancing; implies a 1xT grid")
	if err := cli.Parse(fs, args, "usage: matmul [flags]", stderr); err != nil {
		return nil, err
	}
	if err := c.Matrix.Resolve(&c.Job, summa.MaxTasks); err != nil {
		return nil, err
	}
	set := c.Given
	c.note = fallbackNote(c.Kernel, c.KernelSpec, kernels.AvailableOn(kernels.CPU))
	c.balance = *balance
	if !set["balance"] {
		c.balance = slices.ContainsFunc(c.Kernels, func(k string) bool { return k != c.Kernels[0] })
	}
	if set["split"] {
		for _, f := range strings.Split(*split, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(v >= 0) || v > 1e300 {
				return nil, fmt.Errorf("-split %q: %q is not a weight >= 0", *split, f)
			}
			c.split = append(c.split, v)
		}
		if len(c.split) != c.Tasks {
			return nil, fmt.Errorf("-split has %d weights for %d tasks", len(c.split), c.Tasks)
		}
	}
	balanced := c.balance || c.split != nil
	switch {
	case !set["grid"] && balanced:
		c.Grid = grid.Grid{P: 1, Q: c.Tasks}
	case !set["grid"]:
		c.Grid = grid.Square(c.Tasks)
	case balanced && c.Grid.P != 1:
		return nil, fmt.Errorf("-grid %s: balanced runs (-balance, -split, mixed kernels) need a grid of one row, 1x%d", c.Grid, c.Tasks)
	}
	if c.balance && !set["reps"] {
		c.Reps = 6 // the shares move between multiplications
	}
	if !set["nb"] {
		c.NB = summa.DefaultNB(c.N, c.Grid)
	}
	switch verify.s {
	case "auto", "true":
		c.verify = summa.Freivalds
		if c.N <= 1024 {
			c.verify |= summa.Exact
		}
	case "exact":
		c.verify = summa.Exact
	case "freivalds":
		c.verify = summa.Freivalds
	}
	return c, c.CheckMemory(&c.Job, summa.BytesPerTask(c.N, c.NB, c.Grid, balanced))
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run("matmul", args, stdout, stderr, parse, compute)
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
	if c.note != "" && c.Env.Rank == 0 {
		fmt.Fprintln(stderr, c.note)
	}
	if err := kernels.SetCPUThreads(c.Kernels, c.Threads); err != nil {
		fmt.Fprintln(stderr, "matmul:", err)
		return exitFailed
	}
	prog := &cli.Progress{W: stderr}
	stopProgress := prog.Start()
	t0 := time.Now()
	res, err := summa.Run(context.Background(), summa.Params{
		N: c.N, NB: c.NB, Grid: c.Grid, Kernels: c.Kernels, Reps: c.Reps, Seed: c.Seed,
		Verify: c.verify, Progress: prog.Update, Trace: c.Trace, Balance: c.balance, Split: c.split,
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
	perTask := float64(len(res.Tasks) * c.Reps)
	if !c.JSON {
		fmt.Fprintf(stdout, "summary: wall %.3fs (setup, %d multiplication(s), checks); mean %.3fs per multiplication; per multiplication and task: compute %.3fs, waiting %.3fs; %.1f MB read from other processes; threads=%d/process\n",
			time.Since(t0).Seconds(), c.Reps, res.MeanSeconds, compute.Seconds()/perTask, wait.Seconds()/perTask, float64(moved)/1e6, c.Threads)
		for _, name := range slices.Sorted(maps.Keys(kinds)) {
			if k := kinds[name]; len(kinds) > 1 {
				fmt.Fprintf(stdout, "summary: kernel %s: %.1f%% of the flops at %.1f GFLOP/s per task\n", name, 100*k[0]/(summa.Flops(c.N)*float64(c.Reps)), k[0]/k[1]/1e9)
			}
		}
		if res.Split != nil {
			shares, weights := make([]string, len(res.Split)), make([]string, len(res.Split))
			for i, f := range res.Split {
				shares[i] = fmt.Sprintf("%s %.1f%%", c.Kernels[i], 100*f)
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
	}
	var r cli.Result
	r.Add("n", c.N)
	r.Add("nb", c.NB)
	r.Add("grid", c.Grid.String())
	r.Add("kernel", c.KernelSpec)
	r.Add("reps", c.Reps)
	r.Job(c.Tasks, res.Procs)
	r.First(res.FirstSeconds, summa.Flops(c.N)/res.FirstSeconds/1e9)
	r.Seconds(res.Seconds)
	r.Addf("gflops", "%.1f", res.GFlops)
	r.Detail("mean-seconds", res.MeanSeconds)
	r.Detail("first-page-faults", res.FirstFaults) // of the job's processes during the first multiplication
	r.Detail("threads", c.Threads)
	r.Detail("checks", res.Checks)
	r.Detail("checksum", fmt.Sprintf("%016x", res.Checksum))
	r.Detail("compute-seconds", compute.Seconds()/perTask) // per multiplication and task
	r.Detail("wait-seconds", wait.Seconds()/perTask)
	r.Detail("bytes-moved", moved)
	if c.verify != 0 {
		r.Verified(res.Verified)
	}
	return r.Report(stdout, stderr, "matmul", c.JSON)
}
