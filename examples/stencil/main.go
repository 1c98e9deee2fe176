// Command stencil runs an iterative Jacobi stencil over ORWL tasks and checks that the
// result is bit-identical to a sequential sweep, whatever the number of tasks and processes:
// a 3-point stencil on a line of cells split into one block per task, or a 5-point stencil on
// a plane split over a grid of tasks (halo exchange in both directions).
//
// Every task computes its block in private memory and shares only its edges, through ORWL
// locations written by their owner and read by the neighbour, three per side used in turn;
// it computes the cells that need no neighbour's value while the edges
// travel, then its border (package jacobi has the details).
//
// The command line is the examples' (package examples/internal/cli): -tasks is a count of
// tasks (default: P*Q of -grid, else -np, else the launcher's process count, else one per
// core), -grid PXxPY lays them on a plane (default: the grid whose blocks are the most
// square), -np starts that many processes on this machine (default 1: every task a
// goroutine of this process), -json, -trace FILE. Under a launcher (orwlrun, mpirun) it is
// one process of that job and starts nothing itself; the process that runs task 0 prints
// the result line, with the checksum of the result, the time of one iteration (the slowest
// task's, warm-up iterations left out) and whether the result equals the sequential
// sweep's (verified; -verify=false skips the check: verified=skipped):
//
//	result: dim=2 n=2000x2000 grid=2x2 iters=100 per-iteration=1.2ms checksum=4c1f0e2d9a8b7c6d tasks=4 procs=1 seconds=0.151 verified=true
//
// The exit status is 3 when the result does not verify, 2 for bad flags, 1 for a failed run.
//
// With -checkpoint DIR the job takes a checkpoint every -checkpoint-every (each task's
// block, at the start of a step of 4 iterations) into DIR, where "{rank}" becomes each
// process's rank (a directory per process, each piece copied to the next process's too),
// and a job started again with the same flags resumes from the newest complete checkpoint
// (saying so on standard error) and prints the same checksum as an uninterrupted run; the
// result line then has resumed-at=ITERATION. It resumes on any number of processes when
// -tasks is given (its default follows the process count, and another count of tasks is
// another job). Under orwlrun -restarts N, a job that loses a process restarts by itself:
//
//	go run ./cmd/orwlrun -np 3 -restarts 3 /tmp/stencil -tasks 3 -n 3000000 -iters 2000 -checkpoint /tmp/ck/{rank} -checkpoint-every 2s
//
//	go run ./examples/stencil -n 1000000 -tasks 4 -iters 200
//	go run ./examples/stencil -n 2000x2000 -grid 2x2 -iters 100
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/examples/stencil/jacobi"
)

// sequential computes the reference of the check; tests replace it to see a failed check.
var sequential = jacobi.Sequential

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed and checked command line.
type config struct {
	cli.Job
	p      jacobi.Params
	verify bool
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("stencil", flag.ContinueOnError)
	c := &config{}
	c.Flags(fs, cli.Layout{Tasks: runtime.NumCPU(), TasksDoc: "one per core", MaxTasks: jacobi.MaxTasks, Grid: true, Checkpoints: true})
	n := fs.String("n", "1048576", "cells: N for a line (3-point stencil), or NXxNY for a plane (5-point)")
	gridFlag := fs.String("grid", "", "tasks on a plane, PXxPY (default: the grid of -tasks whose blocks are the most square)")
	iters := fs.Int("iters", 300, "iterations")
	fs.BoolVar(&c.verify, "verify", true, "compare with a sequential sweep")
	if err := cli.Parse(fs, args, "usage: stencil [flags]", stderr); err != nil {
		return nil, err
	}
	var g grid.Grid // none
	if *gridFlag != "" {
		var err error
		if g, err = grid.Parse(*gridFlag, jacobi.MaxTasks); err != nil {
			return nil, fmt.Errorf("-grid: %v", err)
		}
	}
	if err := c.Resolve(g.Tasks()); err != nil {
		return nil, err
	}
	var err error
	if c.p, err = params(*n, g, c.Tasks, *iters); err != nil {
		return nil, err
	}
	c.p.Trace = c.Trace
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run("stencil", args, stdout, stderr, parse, compute)
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	start := time.Now()
	res, err := jacobi.RunCheckpointed(context.Background(), c.p, c.Checkpoint)
	if err != nil {
		fmt.Fprintln(stderr, "stencil:", err)
		return cli.ExitFailed
	}
	if res == nil {
		return 0 // another process runs task 0 and reports
	}
	p := c.p
	var r cli.Result
	r.Add("dim", p.Dim)
	r.Add("n", fmt.Sprintf("%dx%d", p.NX, p.NY))
	r.Add("grid", grid.Grid{P: p.PX, Q: p.PY}.String())
	r.Add("iters", p.Iters)
	r.Add("per-iteration", res.PerIteration().String())
	r.Add("checksum", fmt.Sprintf("%016x", jacobi.Checksum(res.Cells)))
	if c.Checkpoint.Dir != "" || os.Getenv("ORWL_CHECKPOINT_DIR") != "" {
		r.Add("resumed-at", res.Resumed)
	}
	r.Job(c.Tasks, c.Procs)
	r.Seconds(time.Since(start).Seconds())
	if c.verify {
		r.Verified(slices.Equal(res.Cells, sequential(p)))
	}
	return r.Report(stdout, stderr, "stencil", c.JSON)
}

// params reads -n and -iters into the job's parameters, and lays its tasks out on g or,
// when g is the zero Grid, tasks of them on the grid whose blocks are the most square (a
// line: all in one row).
func params(n string, g grid.Grid, tasks, iters int) (jacobi.Params, error) {
	p := jacobi.Params{Dim: 1, NY: 1, PY: 1, Iters: iters}
	var err error
	if p.NX, p.NY, err = pair(n); err != nil {
		return p, fmt.Errorf("-n %q: want N or NXxNY, positive", n)
	}
	plane := strings.Contains(n, "x")
	switch {
	case plane && g.Tasks() == 0:
		g = grid.Fit(tasks, p.NX, p.NY)
	case !plane && g.Tasks() == 0:
		g = grid.Grid{P: tasks, Q: 1}
	case !plane:
		return p, fmt.Errorf("-grid %s: a grid of tasks needs a plane (-n NXxNY)", g)
	}
	if plane {
		p.Dim = 2
	}
	p.PX, p.PY = g.P, g.Q
	return p, p.Validate()
}

// pair reads "A" (then b is 1) or "AxB", both positive.
func pair(s string) (a, b int, err error) {
	as, bs, two := strings.Cut(s, "x")
	b = 1
	if a, err = strconv.Atoi(as); err == nil && two {
		b, err = strconv.Atoi(bs)
	}
	if err == nil && (a < 1 || b < 1) {
		err = fmt.Errorf("%q: not positive", s)
	}
	return a, b, err
}
