// Command stencil runs an iterative 1-D Jacobi stencil over ORWL tasks and checks that the
// result is bit-identical to a sequential sweep, whatever the number of tasks.
//
// The cells are split into contiguous blocks, one per task. Every task owns four
// locations: its cells, copies of its first and last cell for its neighbours, and its part
// of the result. In every iteration a task, at position 1, reads its cells and publishes its
// edge cells; at position 2, it reads its neighbours' edges and rewrites its cells. Position
// 0 holds a one-shot write that sets the initial values. Schedule orders every edge's writer
// before its readers in each iteration, so each update uses exactly the operands of the
// sequential sweep. At the end every task writes its part of the result once, and task 0
// reads all parts (one-shot handles on locations used only for that).
//
// The same program runs as one process or as several (under orwlrun or mpirun); the
// process that runs task 0 prints the result line.
//
//	go run ./examples/stencil -n 1000000 -tasks 4 -iters 200
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

func main() {
	n := flag.Int("n", 1<<20, "cells")
	tasks := flag.Int("tasks", runtime.NumCPU(), "tasks")
	iters := flag.Int("iters", 300, "iterations")
	verify := flag.Bool("verify", true, "compare with a sequential sweep")
	flag.Parse()
	if *tasks < 1 || *n < *tasks || *iters < 0 {
		fmt.Fprintln(os.Stderr, "stencil: need -tasks >= 1, -n >= -tasks and -iters >= 0")
		os.Exit(2)
	}
	start := time.Now()
	got, err := jacobi(context.Background(), *n, *tasks, *iters)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stencil:", err)
		os.Exit(1)
	}
	if got == nil {
		return // another process runs task 0 and reports
	}
	elapsed := time.Since(start)
	line := fmt.Sprintf("result: n=%d tasks=%d iters=%d seconds=%.3f cell-updates/s=%.3g checksum=%016x",
		*n, *tasks, *iters, elapsed.Seconds(), float64(*n)*float64(*iters)/elapsed.Seconds(), checksum(got))
	if *verify {
		line += fmt.Sprintf(" identical-to-sequential=%v", slices.Equal(got, sequential(*n, *iters)))
	}
	fmt.Println(line)
}

// Boundary values outside the cells (Dirichlet conditions).
const leftEdge, rightEdge = 1.0, -1.0

// initial is the value of cell i before the first iteration.
func initial(i int) float64 { return float64(i%5) / 4 }

// update computes one block of new cells from the old ones and the values left and right of
// the block, in place.
func update(cells []float64, left, right float64) {
	prev := left
	for i, c := range cells {
		next := right
		if i+1 < len(cells) {
			next = cells[i+1]
		}
		cells[i] = (prev + c + next) / 3
		prev = c
	}
}

// span returns the cells [lo, hi) of task id when n cells are split over tasks.
func span(n, tasks, id int) (lo, hi int) { return id * n / tasks, (id + 1) * n / tasks }

// jacobi runs the stencil with ORWL and returns the final cells, or nil in a process that
// does not run task 0.
func jacobi(ctx context.Context, n, tasks, iters int) ([]float64, error) {
	var result []float64
	err := orwl.Run(ctx, orwl.Config{Tasks: tasks, Locations: []string{"cells", "first", "last", "out"}},
		func(ctx context.Context, t *orwl.Task) error {
			me := t.ID()
			lo, hi := span(n, tasks, me)
			t.Scale("cells", 8*(hi-lo))
			t.Scale("first", 8)
			t.Scale("last", 8)
			t.Scale("out", 8*(hi-lo))
			publish := t.WriteInsertOnce(t.Loc(me, "out"), 0)
			var gather []*orwl.Handle // task 0 reads every part once it is written
			if me == 0 {
				for k := range tasks {
					gather = append(gather, t.ReadInsertOnce(t.Loc(k, "out"), 1))
				}
			}
			setup := t.WriteInsertOnce(t.Loc(me, "cells"), 0)
			// Position 1: read my cells, publish my edges.
			cellsR := t.ReadInsert(t.Loc(me, "cells"), 1)
			firstW := t.WriteInsert(t.Loc(me, "first"), 1)
			lastW := t.WriteInsert(t.Loc(me, "last"), 1)
			// Position 2: read the neighbours' edges, rewrite my cells.
			cellsW := t.WriteInsert(t.Loc(me, "cells"), 2)
			var leftR, rightR *orwl.Handle // nil at the ends of the line
			if me > 0 {
				leftR = t.ReadInsert(t.Loc(me-1, "last"), 2)
			}
			if me < tasks-1 {
				rightR = t.ReadInsert(t.Loc(me+1, "first"), 2)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if err := setup.Section(ctx, func(b []byte) error {
				cells := orwl.Float64s(b)
				for i := range cells {
					cells[i] = initial(lo + i)
				}
				return nil
			}); err != nil {
				return err
			}
			// edge reads a neighbour's edge inside its section, or returns the boundary value.
			edge := func(h *orwl.Handle, boundary float64, fn func(float64) error) error {
				if h == nil {
					return fn(boundary)
				}
				return h.Section(ctx, func(b []byte) error { return fn(orwl.Float64s(b)[0]) })
			}
			for range iters {
				if err := cellsR.Section(ctx, func(b []byte) error {
					cells := orwl.Float64s(b)
					return firstW.Section(ctx, func(f []byte) error {
						orwl.Float64s(f)[0] = cells[0]
						return lastW.Section(ctx, func(l []byte) error {
							orwl.Float64s(l)[0] = cells[len(cells)-1]
							return nil
						})
					})
				}); err != nil {
					return err
				}
				if err := cellsW.Section(ctx, func(b []byte) error {
					return edge(leftR, leftEdge, func(left float64) error {
						return edge(rightR, rightEdge, func(right float64) error {
							update(orwl.Float64s(b), left, right)
							return nil
						})
					})
				}); err != nil {
					return err
				}
			}
			// The next read of my cells is at the head of their FIFO: publish my part.
			if err := cellsR.Section(ctx, func(b []byte) error {
				return publish.Section(ctx, func(out []byte) error { copy(out, b); return nil })
			}); err != nil {
				return err
			}
			if me != 0 {
				return nil
			}
			all := make([]float64, 0, n)
			for _, h := range gather {
				if err := h.Section(ctx, func(b []byte) error {
					all = append(all, orwl.Float64s(b)...)
					return nil
				}); err != nil {
					return err
				}
			}
			result = all
			return nil
		})
	return result, err
}

// checksum is a hash of the cells' bits: equal checksums mean bit-identical results.
func checksum(cells []float64) uint64 {
	h := fnv.New64a()
	h.Write(orwl.Bytes(cells))
	return h.Sum64()
}

// sequential is the same stencil in one loop.
func sequential(n, iters int) []float64 {
	cells := make([]float64, n)
	for i := range cells {
		cells[i] = initial(i)
	}
	for range iters {
		update(cells, leftEdge, rightEdge)
	}
	return cells
}
