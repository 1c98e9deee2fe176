// Package blockring holds what the two programs of the ORWL papers' ring example share:
// examples/blockbound, whose step is Go code, and examples/external, whose step is an
// external program. For the same flags both must print the same bounds, bit for bit; so
// the command line (the examples' skeleton, package examples/internal/cli, and -size,
// -iters), the result line, the job with every task's handles and their FIFO positions,
// the arithmetic of a step, the sequential sweep the result is checked against and the
// gathering of every task's last bound live here, once; a program supplies its iterations.
//
// It is example code: it must not grow anything the examples do not share.
package blockring

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/orwl-go/orwl/examples/internal/cli"
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

// Job is one run of the ring: its tasks, values per block and iterations, its trace file
// (orwl.Config.Trace, none when "") and its checkpoints (none in the zero value).
type Job struct {
	Tasks, Size, Iters int
	Trace              string
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
	err := orwl.Run(ctx, orwl.Config{Tasks: j.Tasks, Locations: []string{"block", "bound", "final"}, Checkpoint: ck, Trace: j.Trace},
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

// Command is one of the two programs: its name (in messages), its ring, which returns every
// task's last bound in the process that runs task 0 and nil in the others, the reference
// the bounds are checked against (Sequential, but for tests of the check), and its own
// flags beside the shared ones (nil: none).
type Command struct {
	Name      string
	Ring      func(ctx context.Context, j Job) ([]float64, error)
	Reference func(tasks, size, iters int) []float64
	Flags     func(fs *flag.FlagSet)
}

// config is the parsed command line.
type config struct {
	cli.Job
	size, iters int
}

// Run is the body of both programs' main function: it parses args (the examples' flags
// -tasks, default 4, -np, -json, -trace, -checkpoint, -checkpoint-every; then -size, -iters
// and the program's own), runs the ring, and in the process that gets the bounds prints
// the result line:
//
//	result: size=1000 iters=100 bounds=[...] tasks=4 procs=1 seconds=0.012 verified=true
//
// It returns the exit status: 2 for bad flags, 1 when the ring fails, 3 when its bounds
// differ from the reference's.
func (c Command) Run(args []string, stdout, stderr io.Writer) int {
	parse := func(args []string, stderr io.Writer) (*config, error) {
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		cf := &config{}
		cf.Flags(fs, cli.Layout{Tasks: 4, TasksDoc: "4", Checkpoints: true})
		fs.IntVar(&cf.size, "size", 1000, "values per block")
		fs.IntVar(&cf.iters, "iters", 100, "iterations")
		if c.Flags != nil {
			c.Flags(fs)
		}
		if err := cli.Parse(fs, args, "usage: "+c.Name+" [flags]", stderr); err != nil {
			return nil, err
		}
		if cf.size < 1 || cf.iters < 0 {
			return nil, fmt.Errorf("-size is %d and -iters %d; need at least 1 and 0", cf.size, cf.iters)
		}
		return cf, cf.Resolve(0)
	}
	return cli.Run(c.Name, args, stdout, stderr, parse, func(cf *config, stdout, stderr io.Writer) int {
		j := Job{Tasks: cf.Tasks, Size: cf.size, Iters: cf.iters, Trace: cf.Trace, Checkpoint: cf.Checkpoint}
		j.Checkpoint.Program = c.Name
		start := time.Now()
		bounds, err := c.Ring(context.Background(), j)
		if err != nil {
			fmt.Fprintln(stderr, c.Name+":", err)
			return cli.ExitFailed
		}
		if bounds == nil {
			return 0 // another process runs task 0 and reports
		}
		var r cli.Result
		r.Add("size", j.Size)
		r.Add("iters", j.Iters)
		r.Add("bounds", bounds)
		r.Job(j.Tasks, cf.Procs)
		r.Seconds(time.Since(start).Seconds())
		r.Verified(slices.Equal(bounds, c.Reference(j.Tasks, j.Size, j.Iters)))
		return r.Report(stdout, stderr, c.Name, cf.JSON)
	})
}
