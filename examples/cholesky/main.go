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
// host's cores divided among the job's tasks on this host. The command line is the
// examples' (package examples/internal/cli) and matmul's: -tasks is a count of tasks
// (default: P*Q of -grid, else -np, else the launcher's process count, else one per core),
// -np the processes started on this machine (default: min(tasks, cores)), -json and -trace.
// The process that runs task 0 prints a progress line on standard error while it runs, a
// summary, and, last, the result line:
//
//	result: n=8192 nb=1024 grid=1x2 kernel=openblas reps=3 tasks=2 procs=2 first-seconds=2.011 first-gflops=91.1 seconds=1.950 gflops=94.0 residual=0.0012 verified=true
//
// seconds and gflops are the fastest of the -reps factorisations (GFLOP = N³/3 / 10⁹),
// first-seconds and first-gflops the first one's; residual is the scaled residual
// ‖A − L·Lᵀ‖/(‖A‖·N·ε), estimated with a random vector (tiled.Result.Residual), and
// verified means it is below tiled.ResidualBound (30). -json prints one JSON object with
// these keys and a few more (threads, checksum of L, compute, wait and release times)
// instead of the summary and result lines. Flags that make no sense are reported in one
// line on standard error with exit status 2; a failed run exits with status 1; a failed
// verification with status 3.
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
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/orwl-go/orwl/examples/cholesky/tiled"
	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitFailed   = cli.ExitFailed
	exitUsage    = cli.ExitUsage
	exitMismatch = cli.ExitMismatch // the factor did not verify
)

// config is the parsed and checked command line.
type config struct {
	cli.Job
	cli.Matrix
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("cholesky", flag.ContinueOnError)
	c := &config{}
	c.Job.Flags(fs, cli.Layout{Tasks: runtime.NumCPU(), TasksDoc: "one per core", MaxTasks: tiled.MaxTasks, Spread: true, Grid: true})
	c.Matrix.Flags(fs, cli.MatrixLayout{
		N: 8192, GonumN: 1536, NDoc: "matrix order N",
		NBDoc:     "tile size NB (default: tiled.DefaultNB: N/8 within 512 to 1024, at most N/4)",
		GridDoc:   "the most square grid of -tasks, with P <= Q",
		KernelDoc: "cpu, gonum, openblas, cublas, or a mix such as cublas:1,openblas",
		Reps:      1,
		RepsDoc:   "factorisations; seconds is the fastest, first-seconds the first's",
		SeedDoc:   "A and the verification vector",
	})
	if err := cli.Parse(fs, args, "usage: cholesky [flags]", stderr); err != nil {
		return nil, err
	}
	if err := c.Matrix.Resolve(&c.Job, tiled.MaxTasks); err != nil {
		return nil, err
	}
	if err := checkCholesky(c.Kernels); err != nil {
		return nil, err
	}
	if !c.Given["grid"] {
		c.Grid = tiled.DefaultGrid(c.Tasks)
	}
	if !c.Given["nb"] {
		c.NB = tiled.DefaultNB(c.N)
	}
	return c, c.CheckMemory(&c.Job, tiled.BytesPerTask(c.N, c.NB, c.Grid))
}

// checkCholesky checks that every kernel of names has the Cholesky operations.
func checkCholesky(names []string) error {
	for _, name := range names {
		g, err := kernels.GetCholesky(name)
		if err != nil {
			return fmt.Errorf("-kernel %s: %v", name, err)
		}
		if cl, ok := g.(io.Closer); ok {
			cl.Close()
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run("cholesky", args, stdout, stderr, parse, compute)
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	if err := kernels.SetCPUThreads(c.Kernels, c.Threads); err != nil {
		fmt.Fprintln(stderr, "cholesky:", err)
		return exitFailed
	}
	prog := &cli.Progress{W: stderr}
	stopProgress := prog.Start()
	t0 := time.Now()
	res, err := tiled.Run(context.Background(), tiled.Params{
		N: c.N, NB: c.NB, Grid: c.Grid, Kernels: c.Kernels, Reps: c.Reps, Seed: c.Seed,
		Progress: prog.Update, Trace: c.Trace,
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
	var comp, wait, release time.Duration
	for _, s := range res.Tasks {
		comp += s.Compute
		wait += s.Wait
		release += s.Release
	}
	per := float64(len(res.Tasks) * c.Reps)
	if !c.JSON {
		fmt.Fprintf(stdout, "summary: threads=%d/process; wall %.3fs (setup, %d factorisation(s), check); per factorisation and task: compute %.3fs, waiting %.3fs, releasing %.3fs; checksum=%016x\n",
			c.Threads, time.Since(t0).Seconds(), c.Reps, comp.Seconds()/per, wait.Seconds()/per, release.Seconds()/per, res.Checksum)
	}
	var r cli.Result
	r.Add("n", c.N)
	r.Add("nb", c.NB)
	r.Add("grid", c.Grid.String())
	r.Add("kernel", c.KernelSpec)
	r.Add("reps", c.Reps)
	r.Job(c.Tasks, res.Procs)
	r.First(res.FirstSeconds, res.FirstGFlops)
	r.Seconds(res.Seconds)
	r.Addf("gflops", "%.1f", res.GFlops)
	r.Addf("residual", "%.3g", res.Residual)
	r.Detail("threads", c.Threads)
	r.Detail("checksum", fmt.Sprintf("%016x", res.Checksum))
	r.Detail("compute-seconds", comp.Seconds()/per) // per factorisation and task
	r.Detail("wait-seconds", wait.Seconds()/per)
	r.Detail("release-seconds", release.Seconds()/per)
	r.Verified(res.Verified)
	return r.Report(stdout, stderr, "cholesky", c.JSON)
}
