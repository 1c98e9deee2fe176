// Command sph runs a smoothed particle hydrodynamics simulation over ORWL tasks, the
// irregular workload of the task-runtime studies: N particles of a gas expand from a dense
// corner of the unit box, each interacting with the neighbours within its support, for a
// number of time steps. The result is bit-identical whatever the number of tasks and
// processes, and equal to the problem's exact C build (package
// github.com/orwl-go/orwl/examples/sph/fluid describes the problem, the decomposition into
// tasks and why).
//
//	go run ./examples/sph -n 100000 -steps 50
//	go run ./examples/sph -n 20000 -steps 20 -tasks 4 -np 2
//
// The command line is the examples' (package examples/internal/cli): -tasks is a count of
// tasks (default -np when given, else the launcher's process count, else one per core, at
// most as many as the cells allow), -np starts that many processes on this machine
// (default 1: every task a goroutine of this process), -json, -trace FILE. Under a launcher
// (orwlrun, mpirun) it is one process of that job and starts nothing itself. A run of more
// than a second prints its progress on standard error; the process that runs task 0
// prints the result line:
//
//	result: particles=20000 steps=50 tasks=2 procs=1 seconds=0.466 interactions=108291412 interactions_per_s=2.323e+08 kinetic=0.046975168269305347 checksum=29e00d20cda038a9 imbalance=1.0024 verified=true
//
// where seconds is the time of the steps (the initial particles, the final sums and the
// check are not timed), interactions counts the neighbour pairs of the density and the
// force phases over all steps, kinetic is the final kinetic energy (%.17g), checksum the
// FNV-1a hash of every particle's position and velocity in ascending id, and imbalance the
// mean over the steps of the largest task's work (its particles' neighbour counts) over
// the mean task's. The result is verified against the sequential reference of package
// fluid when that is cheap (particles times steps at most 10⁶, a second or two), or always
// with -verify, never with -verify=false (verified=skipped). The exit status is 3 when the
// result does not verify, 2 for bad flags, 1 for a failed run.
//
// With -checkpoint DIR the job takes a checkpoint every -checkpoint-every into DIR
// ("{rank}" in it becomes each process's rank), and a job started again with the same
// flags resumes from the newest complete one (saying so on standard error) and prints the
// same checksum as an uninterrupted run; the result line then has resumed-at=STEP, and
// seconds and interactions_per_s cover the steps computed after it. Under orwlrun -restarts
// N, a job that loses a process restarts by itself:
//
//	go run ./cmd/orwlrun -np 2 -restarts 3 /tmp/sph -tasks 2 -n 100000 -steps 200 -checkpoint /tmp/ck/{rank} -checkpoint-every 5s
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/examples/sph/fluid"
)

// verifyWork is the most particles times steps verified without -verify: the sequential
// reference then takes a second or two.
const verifyWork = 1_000_000

// sequential computes the reference of the check; tests replace it to see a failed check.
var sequential = fluid.Sequential

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed and checked command line.
type config struct {
	cli.Job
	p      fluid.Params
	verify bool
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("sph", flag.ContinueOnError)
	c := &config{}
	c.Flags(fs, cli.Layout{Tasks: runtime.NumCPU(), TasksDoc: "one per core", Checkpoints: true})
	n := fs.Int("n", 20000, "particles")
	steps := fs.Int("steps", 50, "time steps")
	seed := fs.Uint64("seed", 1, "seed of the initial positions")
	verify := fs.Bool("verify", false, "compare with the sequential reference (default: when particles times steps is at most 10⁶)")
	if err := cli.Parse(fs, args, "usage: sph [flags]", stderr); err != nil {
		return nil, err
	}
	set := cli.Set(fs)
	switch {
	case *n < 1 || *n > fluid.MaxN:
		return nil, fmt.Errorf("-n is %d; need 1 to %d", *n, fluid.MaxN)
	case *steps < 0:
		return nil, fmt.Errorf("-steps is %d; need at least 0", *steps)
	}
	if err := c.Resolve(0); err != nil {
		return nil, err
	}
	if !set["tasks"] && !set["np"] && !c.InJob { // one per core, as many as the cells allow
		c.Tasks = min(c.Tasks, fluid.MaxTasks(*n))
	}
	c.p = fluid.Params{N: *n, Steps: *steps, Seed: *seed, Tasks: c.Tasks, Trace: c.Trace}
	if err := c.p.Validate(); err != nil {
		return nil, fmt.Errorf("-tasks: %v", err)
	}
	c.verify = *verify || !set["verify"] && *n**steps <= verifyWork
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run("sph", args, stdout, stderr, parse, compute)
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	prog := &cli.Progress{W: stderr}
	stopProgress := prog.Start()
	c.p.Progress = prog.Update
	res, err := fluid.RunCheckpointed(context.Background(), c.p, c.Checkpoint)
	stopProgress()
	if err != nil {
		fmt.Fprintln(stderr, "sph:", err)
		return cli.ExitFailed
	}
	if res == nil {
		return 0 // another process runs task 0 and reports
	}
	var r cli.Result
	r.Add("particles", c.p.N)
	r.Add("steps", c.p.Steps)
	r.Job(c.Tasks, c.Procs)
	r.Seconds(res.Seconds)
	r.Add("interactions", res.Interactions)
	r.Addf("interactions_per_s", "%.4g", rate(res.Computed, res.Seconds))
	r.Addf("kinetic", "%.17g", res.State.Kinetic())
	r.Add("checksum", fmt.Sprintf("%016x", res.State.Checksum())) // a string in JSON: a uint64 is no JSON number
	r.Addf("imbalance", "%.4f", res.Imbalance)
	if c.Checkpoint.Dir != "" || os.Getenv("ORWL_CHECKPOINT_DIR") != "" {
		r.Add("resumed-at", res.Resumed)
	}
	if c.verify {
		want, interactions, _, err := sequential(c.p)
		if err != nil {
			fmt.Fprintln(stderr, "sph: the sequential reference:", err)
			return cli.ExitFailed
		}
		r.Verified(want.Checksum() == res.State.Checksum() && interactions == res.Interactions)
	}
	return r.Report(stdout, stderr, "sph", c.JSON)
}

// rate returns n per second, 0 when no time passed.
func rate(n int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}
