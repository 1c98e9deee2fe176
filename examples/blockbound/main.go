// Command blockbound is the introductory example of the ORWL papers, in Go: a ring of tasks,
// each owning a block of data and a bound (the part of the block its right neighbour needs).
//
// In every iteration a task, at FIFO position 0, writes its block while reading its left
// neighbour's bound; then, at position 1, reads its block and writes its bound. Schedule
// puts every reader of a bound before its writer, so a task always sees the bound of the
// previous iteration, and the result is the same as a sequential sweep. At the end every task
// publishes its bound once in a location "final" that task 0 reads (one-shot handles). The
// job and its handles are set up by blockring.Run (shared with examples/external); this
// file is the iterations.
//
// The same program runs as one process, as several it starts itself (-np), or as several
// under a launcher (orwlrun, mpirun); the process that runs task 0 prints the result line,
// verified=true when the bounds are a sequential sweep's, and exits with status 3 when they
// are not. examples/external is the same ring with an external program as the step; both
// take the same flags and print the same bounds (package examples/blockring holds what they
// share).
//
//	go run ./examples/blockbound -tasks 8 -size 1000 -iters 100
package main

import (
	"context"
	"io"
	"os"

	"github.com/orwl-go/orwl/examples/blockring"
	"github.com/orwl-go/orwl/orwl"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return blockring.Command{Name: "blockbound", Ring: ring, Reference: reference}.Run(args, stdout, stderr)
}

// reference computes the bounds main checks against; tests replace it to see a failed check.
var reference = blockring.Sequential

// ring runs the example with ORWL and returns every task's final bound, or nil in a process
// that does not run task 0. Its state is in its locations (block, bound), so Task.Iterate
// is all it takes for the job to checkpoint (-checkpoint) and resume.
func ring(ctx context.Context, j blockring.Job) ([]float64, error) {
	return blockring.Run(ctx, j, func(ctx context.Context, t *orwl.Task, r *blockring.Ring) (float64, error) {
		pos0 := orwl.Group{r.BlockW, r.LeftR}  // write my block while reading the left neighbour's bound
		pos1 := orwl.Group{r.BlockR, r.BoundW} // read my block and write my bound
		last := 0.0
		err := t.Iterate(ctx, j.Iters, func(int) error { // resumes from a checkpoint, if any
			if err := pos0.Section(ctx, func(data [][]byte) error {
				blockring.Step(t.ID(), orwl.Float64s(data[0]), orwl.Float64s(data[1])[0])
				return nil
			}); err != nil {
				return err
			}
			return pos1.Section(ctx, func(data [][]byte) error {
				b := orwl.Float64s(data[0])
				last = b[len(b)-1]
				orwl.Float64s(data[1])[0] = last
				return nil
			})
		})
		return last, err
	})
}
