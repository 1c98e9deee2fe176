// Package blockring holds what the two programs of the ORWL papers' ring example share:
// examples/blockbound, whose step is Go code, and examples/external, whose step is an
// external program. For the same flags both must print the same result line, bit for bit;
// so the flags, the result line, the job with every task's handles and their FIFO
// positions, the arithmetic of a step, the sequential sweep the result is checked against
// and the gathering of every task's last bound live here, once; a program supplies its
// iterations.
//
// It is example code: it must not grow anything the examples do not share.
package blockring

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/orwl-go/orwl/orwl"
)

// Step updates the block of task from its left neighbour's bound.
func Step(task int, block []float64, leftBound float64) {
	for j, x := range block {
		block[j] = (x+leftBound)/2 + float64((j+task)%7)
	}
}

// Sequential computes what the ring computes, in one loop: every task uses the bounds of
// the previous iteration. It returns every task's last bound.
func Sequential(tasks, size, iters int) []float64 {
	blocks := make([][]float64, tasks)
	for i := range blocks {
		blocks[i] = make([]float64, size)
	}
	bounds := make([]float64, tasks)
	for range iters {
		for i := range tasks {
			Step(i, blocks[i], bounds[(i+tasks-1)%tasks])
		}
		for i := range tasks {
			bounds[i] = blocks[i][size-1]
		}
	}
	return bounds
}

// Ring is one task's handles of the ring, declared by Run before the schedule.
type Ring struct {
	// Position 0: write my block while reading the left neighbour's bound.
	BlockW, LeftR *orwl.Handle
	// Position 1: read my block and write my bound.
	BlockR, BoundW *orwl.Handle
	// On the locations "final", to gather every task's last bound: every task writes its
	// own at position 0, and task 0 reads all of them at position 1.
	publish *orwl.Handle
	finals  []*orwl.Handle
}

// declare sizes t's locations for blocks of size values and declares t's handles of the
// ring, in its init phase. Schedule puts every reader of a bound before its writer, so a
// task always sees the bound of the previous iteration.
func declare(t *orwl.Task, size int) *Ring {
	me, left := t.ID(), (t.ID()+t.NumTasks()-1)%t.NumTasks()
	t.Scale("block", 8*size)
	t.Scale("bound", 8)
	t.Scale("final", 8)
	r := &Ring{
		BlockW:  t.WriteInsert(t.Loc(me, "block"), 0),
		LeftR:   t.ReadInsert(t.Loc(left, "bound"), 0),
		BlockR:  t.ReadInsert(t.Loc(me, "block"), 1),
		BoundW:  t.WriteInsert(t.Loc(me, "bound"), 1),
		publish: t.WriteInsertOnce(t.Loc(me, "final"), 0),
	}
	if me == 0 {
		for k := range t.NumTasks() {
			r.finals = append(r.finals, t.ReadInsertOnce(t.Loc(k, "final"), 1))
		}
	}
	return r
}

// Job is one run of the ring: its tasks, values per block and iterations, and its
// checkpoints (none in the zero value).
type Job struct {
	Tasks, Size, Iters int
	// Checkpoint is the job's orwl.Config.Checkpoint; Run sets its Params to the job's
	// size and iterations. The iterations must then go through Task.Iterate.
	Checkpoint orwl.Checkpoint
}

// Run runs the ring of j: every task declares its handles (see Ring), waits for the
// schedule, calls iterate, which runs the iterations and returns the task's last bound, and
// publishes that bound. Run returns every task's last bound in the process that runs task
// 0, nil in the others.
func Run(ctx context.Context, j Job, iterate func(ctx context.Context, t *orwl.Task, r *Ring) (float64, error)) ([]float64, error) {
	var bounds []float64
	ck := j.Checkpoint
	ck.Params = map[string]string{"size": fmt.Sprint(j.Size), "iters": fmt.Sprint(j.Iters)}
	err := orwl.Run(ctx, orwl.Config{Tasks: j.Tasks, Locations: []string{"block", "bound", "final"}, Checkpoint: ck},
		func(ctx context.Context, t *orwl.Task) error {
			r := declare(t, j.Size)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			last, err := iterate(ctx, t, r)
			if err != nil {
				return err
			}
			all, err := r.gather(ctx, last)
			if all != nil {
				bounds = all
			}
			return err
		})
	return bounds, err
}

// gather publishes last, the task's last bound. In task 0 it then returns every task's, in
// task order; in the others it returns nil.
func (r *Ring) gather(ctx context.Context, last float64) ([]float64, error) {
	if err := r.publish.Section(ctx, func(b []byte) error { orwl.Float64s(b)[0] = last; return nil }); err != nil {
		return nil, err
	}
	var bounds []float64
	for _, h := range r.finals {
		if err := h.Section(ctx, func(b []byte) error {
			bounds = append(bounds, orwl.Float64s(b)[0])
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return bounds, nil
}

// Main is the main function of both programs, called name in messages. It parses the
// command line (-tasks, -size, -iters, -checkpoint, -checkpoint-every, and any flag the
// program defined before calling it), runs ring, and in the process that gets the bounds
// (the one that runs task 0) prints the result line. It exits with status 2 for bad flags,
// and 1 when ring fails or its bounds differ from reference's (Sequential's, but for tests
// of the check).
func Main(name string, ring func(ctx context.Context, j Job) ([]float64, error), reference func(tasks, size, iters int) []float64) {
	var j Job
	flag.IntVar(&j.Tasks, "tasks", 4, "tasks in the ring")
	flag.IntVar(&j.Size, "size", 1000, "values per block")
	flag.IntVar(&j.Iters, "iters", 100, "iterations")
	flag.StringVar(&j.Checkpoint.Dir, "checkpoint", "", `directory of checkpoints ("{rank}" and "{host}" in it become the process's rank and host): the job restarts from the newest complete one there (default $ORWL_CHECKPOINT_DIR)`)
	flag.DurationVar(&j.Checkpoint.Every, "checkpoint-every", 0, "time between two checkpoints (0: $ORWL_CHECKPOINT_EVERY, else 1m)")
	flag.Parse()
	j.Checkpoint.Program = name
	if j.Tasks < 1 || j.Size < 1 || j.Iters < 0 {
		fmt.Fprintln(os.Stderr, name+": -tasks and -size must be at least 1, -iters at least 0")
		os.Exit(2)
	}
	got, err := ring(context.Background(), j)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	if got == nil {
		return // another process runs task 0 and reports
	}
	line, same := ResultLine(j.Tasks, j.Size, j.Iters, got, reference(j.Tasks, j.Size, j.Iters))
	fmt.Println(line)
	if !same {
		os.Exit(1)
	}
}

// ResultLine returns the line the programs print for a ring of tasks, size and iters that
// ended with bounds, and whether bounds are want.
func ResultLine(tasks, size, iters int, bounds, want []float64) (line string, same bool) {
	same = slices.Equal(bounds, want)
	return fmt.Sprintf("tasks=%d size=%d iters=%d bounds=%v identical-to-sequential=%v", tasks, size, iters, bounds, same), same
}
