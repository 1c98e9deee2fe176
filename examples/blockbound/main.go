// Command blockbound is the introductory example of the ORWL papers, in Go: a ring of tasks,
// each owning a block of data and a bound (the part of the block its right neighbour needs).
//
// In every iteration a task, at FIFO position 0, writes its block while reading its left
// neighbour's bound; then, at position 1, reads its block and writes its bound. Schedule
// puts every reader of a bound before its writer, so a task always sees the bound of the
// previous iteration, and the result is the same as a sequential sweep. At the end every task
// publishes its bound once in a location "final" that task 0 reads (one-shot handles).
//
// The same program runs as one process or as several (under orwlrun or mpirun); the process
// that runs task 0 prints the result line. The exit status is 1 when the bounds differ from
// the sequential sweep's, 2 for bad flags.
//
//	go run ./examples/blockbound -tasks 8 -size 1000 -iters 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/orwl-go/orwl/orwl"
)

func main() {
	tasks := flag.Int("tasks", 4, "tasks in the ring")
	size := flag.Int("size", 1000, "values per block")
	iters := flag.Int("iters", 100, "iterations")
	flag.Parse()
	if *tasks < 1 || *size < 1 || *iters < 0 {
		fmt.Fprintln(os.Stderr, "blockbound: -tasks and -size must be at least 1, -iters at least 0")
		os.Exit(2)
	}
	got, err := ring(context.Background(), *tasks, *size, *iters)
	if err != nil {
		fmt.Fprintln(os.Stderr, "blockbound:", err)
		os.Exit(1)
	}
	if got == nil {
		return // another process runs task 0 and reports
	}
	ok := slices.Equal(got, reference(*tasks, *size, *iters))
	fmt.Printf("tasks=%d size=%d iters=%d bounds=%v identical-to-sequential=%v\n", *tasks, *size, *iters, got, ok)
	if !ok {
		fmt.Fprintln(os.Stderr, "blockbound: the bounds differ from the sequential sweep")
		os.Exit(1)
	}
}

// reference computes the bounds main checks against; tests replace it to see a failed check.
var reference = sequential

// step updates the block of task from its left neighbour's bound.
func step(task int, block []float64, leftBound float64) {
	for j, x := range block {
		block[j] = (x+leftBound)/2 + float64((j+task)%7)
	}
}

// ring runs the example with ORWL and returns every task's final bound, or nil in a process
// that does not run task 0.
func ring(ctx context.Context, tasks, size, iters int) ([]float64, error) {
	var bounds []float64
	err := orwl.Run(ctx, orwl.Config{Tasks: tasks, Locations: []string{"block", "bound", "final"}},
		func(ctx context.Context, t *orwl.Task) error {
			me, left := t.ID(), (t.ID()+t.NumTasks()-1)%t.NumTasks()
			t.Scale("block", 8*size)
			t.Scale("bound", 8)
			t.Scale("final", 8)
			publish := t.WriteInsertOnce(t.Loc(me, "final"), 0)
			var gather []*orwl.Handle
			if me == 0 {
				for k := range tasks {
					gather = append(gather, t.ReadInsertOnce(t.Loc(k, "final"), 1))
				}
			}
			// Position 0: write my block while reading the left neighbour's bound.
			blockW := t.WriteInsert(t.Loc(me, "block"), 0)
			leftR := t.ReadInsert(t.Loc(left, "bound"), 0)
			// Position 1: read my block and write my bound.
			blockR := t.ReadInsert(t.Loc(me, "block"), 1)
			boundW := t.WriteInsert(t.Loc(me, "bound"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			last := 0.0
			for range iters {
				if err := blockW.Section(ctx, func(block []byte) error {
					return leftR.Section(ctx, func(bound []byte) error {
						step(me, orwl.Float64s(block), orwl.Float64s(bound)[0])
						return nil
					})
				}); err != nil {
					return err
				}
				if err := blockR.Section(ctx, func(block []byte) error {
					return boundW.Section(ctx, func(bound []byte) error {
						b := orwl.Float64s(block)
						orwl.Float64s(bound)[0] = b[len(b)-1]
						last = b[len(b)-1]
						return nil
					})
				}); err != nil {
					return err
				}
			}
			if err := publish.Section(ctx, func(b []byte) error { orwl.Float64s(b)[0] = last; return nil }); err != nil {
				return err
			}
			for _, h := range gather {
				if err := h.Section(ctx, func(b []byte) error {
					bounds = append(bounds, orwl.Float64s(b)[0])
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
	return bounds, err
}

// sequential computes the same as ring in one loop: every task uses the bounds of the
// previous iteration.
func sequential(tasks, size, iters int) []float64 {
	blocks := make([][]float64, tasks)
	for i := range blocks {
		blocks[i] = make([]float64, size)
	}
	bounds := make([]float64, tasks)
	for range iters {
		for i := range tasks {
			step(i, blocks[i], bounds[(i+tasks-1)%tasks])
		}
		for i := range tasks {
			bounds[i] = blocks[i][size-1]
		}
	}
	return bounds
}
