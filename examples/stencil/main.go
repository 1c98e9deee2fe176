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
// The same program runs as one process or as several (under orwlrun or mpirun); the
// process that runs task 0 prints the result line, with the checksum of the result, the time
// of one iteration (the slowest task's, warm-up iterations left out) and, with -verify,
// whether the result equals the sequential sweep's. The exit status is 1 when it does not,
// 2 for bad flags.
//
// With -checkpoint DIR the job takes a checkpoint every -checkpoint-every (each task's
// block, at the start of a step of 4 iterations) into DIR, where "{rank}" becomes each
// process's rank (a directory per process, each piece copied to the next process's too),
// and a job started again with the same flags, on any number of processes, resumes from
// the newest complete checkpoint (saying so on standard error) and prints the same
// checksum as an uninterrupted run; the result line then ends with resumed-at=ITERATION.
// Under orwlrun -restarts N, a job that loses a process restarts by itself:
//
//	go run ./cmd/orwlrun -np 3 -restarts 3 /tmp/stencil -n 3000000 -iters 2000 -checkpoint /tmp/ck/{rank} -checkpoint-every 2s
//
//	go run ./examples/stencil -n 1000000 -tasks 4 -iters 200
//	go run ./examples/stencil -n 2000x2000 -tasks 2x2 -iters 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
	"github.com/orwl-go/orwl/orwl"
)

// sequential computes the reference of the check; tests replace it to see a failed check.
var sequential = jacobi.Sequential

func main() {
	n := flag.String("n", "1048576", "cells: N for a line (3-point stencil), or NXxNY for a plane (5-point)")
	tasks := flag.String("tasks", strconv.Itoa(runtime.NumCPU()), "tasks: P (a plane is split over the most square grid of P), or PXxPY on a plane")
	iters := flag.Int("iters", 300, "iterations")
	verify := flag.Bool("verify", true, "compare with a sequential sweep")
	var ck orwl.Checkpoint
	flag.StringVar(&ck.Dir, "checkpoint", "", `directory of checkpoints ("{rank}" and "{host}" in it become the process's rank and host): the job restarts from the newest complete one there (default $ORWL_CHECKPOINT_DIR)`)
	flag.DurationVar(&ck.Every, "checkpoint-every", 0, "time between two checkpoints (0: $ORWL_CHECKPOINT_EVERY, else 1m)")
	flag.Parse()
	p, err := params(*n, *tasks, *iters)
	if err == nil && flag.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stencil:", err)
		os.Exit(2)
	}
	start := time.Now()
	res, err := jacobi.RunCheckpointed(context.Background(), p, ck)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stencil:", err)
		os.Exit(1)
	}
	if res == nil {
		return // another process runs task 0 and reports
	}
	elapsed := time.Since(start)
	line := fmt.Sprintf("result: dim=%d n=%dx%d tasks=%dx%d iters=%d seconds=%.3f per-iteration=%s checksum=%016x",
		p.Dim, p.NX, p.NY, p.PX, p.PY, p.Iters, elapsed.Seconds(), res.PerIteration(), jacobi.Checksum(res.Cells))
	ok := true
	if *verify {
		ok = slices.Equal(res.Cells, sequential(p))
		line += fmt.Sprintf(" identical-to-sequential=%v", ok)
	}
	if ck.Dir != "" || os.Getenv("ORWL_CHECKPOINT_DIR") != "" {
		line += fmt.Sprintf(" resumed-at=%d", res.Resumed)
	}
	fmt.Println(line)
	if !ok {
		fmt.Fprintln(os.Stderr, "stencil: the result differs from the sequential sweep")
		os.Exit(1)
	}
}

// params reads the -n, -tasks and -iters flags into the job's parameters.
func params(n, tasks string, iters int) (jacobi.Params, error) {
	p := jacobi.Params{Dim: 1, NY: 1, PY: 1, Iters: iters}
	var err error
	if p.NX, p.NY, err = pair(n); err != nil {
		return p, fmt.Errorf("-n %q: want N or NXxNY, positive", n)
	}
	plane := strings.Contains(n, "x")
	if plane {
		p.Dim = 2
	}
	if p.PX, p.PY, err = pair(tasks); err != nil {
		return p, fmt.Errorf("-tasks %q: want P or PXxPY, positive", tasks)
	}
	switch {
	case !plane && strings.Contains(tasks, "x"):
		return p, fmt.Errorf("-tasks %q: a grid of tasks needs a plane (-n NXxNY)", tasks)
	case plane && !strings.Contains(tasks, "x"):
		p.PX, p.PY = squarest(p.PX, p.NX, p.NY)
	}
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

// squarest splits tasks into a grid px × py, px*py = tasks, whose blocks of an nx × ny plane
// are the most square (the least halo for the cells).
func squarest(tasks, nx, ny int) (px, py int) {
	best := -1.0
	for d := 1; d <= tasks; d++ {
		if tasks%d != 0 {
			continue
		}
		w, h := float64(nx)/float64(d), float64(ny)/float64(tasks/d)
		if score := min(w, h) / max(w, h); score > best {
			best, px, py = score, d, tasks/d
		}
	}
	return px, py
}
