// Command handoff measures the remote hand-off of a small location between two tasks,
// through the public API alone, as a user program does: task 0 owns one location of -size
// bytes (default 8), and two iterative handles on it, at FIFO positions 0 and 1, make the
// tasks take it in strict alternation, one writer and one reader per round:
//
//   - -mode read (the default): task 0 writes its location, task 1 reads it;
//   - -mode write: task 1 writes task 0's location, task 0 reads it.
//
// With the tasks in two processes, every round carries the location to the other process
// and back: one round trip. The writer of each round stores the round's number in the
// location's first 8 bytes and the reader checks it, so the result verifies only if the
// reader saw every round's value, in order.
//
//	go run ./examples/handoff -mode write                 # starts its two processes
//	go build -o /tmp/orwlrun ./cmd/orwlrun && go build -o /tmp/handoff ./examples/handoff
//	/tmp/orwlrun -np 2 /tmp/handoff -mode read -iters 200000
//
// The command line is the examples' (package examples/internal/cli): -tasks (always 2),
// -np (processes started on this machine, default min(2, cores): one task each; 1 runs
// both tasks in this process), -json, -trace FILE. Started by a launcher (orwlrun -np 2,
// mpirun, srun) it is one process of that job and starts nothing itself. The process that
// runs task 0 prints, last, the result line:
//
//	result: mode=read size=8 iters=200000 warmup=1000 tasks=2 procs=2 seconds=0.912 round-trip-ns=4560.2 verified=true
//
// where seconds is the time of the -iters timed rounds, after -warmup rounds that are not
// timed, and round-trip-ns is seconds / iters in nanoseconds (-json prints one JSON object
// with the same keys instead). Flags that make no sense are reported in one line on
// standard error with exit status 2; a failed run exits with status 1; a reader that saw a
// wrong value, with status 3.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/orwl"
)

// The job's two tasks: task 0 owns the location handed between them.
const tasks = 2

// stamp is what the writer of a round stores: the round's number; tests replace it to see
// the reader's check fail.
var stamp = func(round uint64) uint64 { return round }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed and checked command line.
type config struct {
	cli.Job
	mode                string // "read" or "write": what task 1 does remotely
	size, iters, warmup int
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("handoff", flag.ContinueOnError)
	c := &config{}
	c.Flags(fs, cli.Layout{Tasks: tasks, TasksDoc: "2", MaxTasks: tasks, Spread: true})
	fs.StringVar(&c.mode, "mode", "read", "what task 1, in the other process, does remotely: read (task 0 writes its location, task 1 reads it) or write (task 1 writes it, task 0 reads it)")
	fs.IntVar(&c.size, "size", 8, "bytes of the location handed between the tasks, at least 8")
	fs.IntVar(&c.iters, "iters", 100000, "rounds timed: one write and one read each")
	fs.IntVar(&c.warmup, "warmup", 1000, "rounds before the timed ones, not timed")
	if err := cli.Parse(fs, args, "usage: handoff [-mode read|write] [flags]", stderr); err != nil {
		return nil, err
	}
	switch {
	case c.mode != "read" && c.mode != "write":
		return nil, fmt.Errorf("-mode is %q; need read or write", c.mode)
	case c.size < 8:
		return nil, fmt.Errorf("-size is %d; need at least 8 (the round's number)", c.size)
	case c.iters < 1:
		return nil, fmt.Errorf("-iters is %d; need at least 1", c.iters)
	case c.warmup < 0:
		return nil, fmt.Errorf("-warmup is %d; need at least 0", c.warmup)
	case cli.Set(fs)["tasks"] && c.Tasks != tasks:
		return nil, fmt.Errorf("-tasks is %d; the hand-off is between exactly %d tasks", c.Tasks, tasks)
	}
	return c, c.Resolve(tasks)
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run("handoff", args, stdout, stderr, parse, compute)
}

// outcome is what task 0 learns from a run: the time of the timed rounds, and how many
// rounds, from the first, the reader saw in order.
type outcome struct {
	seconds float64
	seen    uint64
}

// handoff runs this process's part of the job of c; in the process of task 0 it returns
// the outcome, in the other nil.
func handoff(ctx context.Context, c *config) (*outcome, error) {
	var res *outcome
	writer, reader := 0, 1 // -mode read
	if c.mode == "write" {
		writer, reader = 1, 0
	}
	rounds := c.warmup + c.iters
	err := orwl.Run(ctx, orwl.Config{Tasks: tasks, Locations: []string{"x", "seen"}, Trace: c.Trace},
		func(ctx context.Context, t *orwl.Task) error {
			me := t.ID()
			if me == 0 {
				t.Scale("x", c.size)
			}
			if me == reader {
				t.Scale("seen", 8)
			}
			// The writer's handle comes first in the location's FIFO, then the reader's, every
			// round: strict alternation.
			var h *orwl.Handle
			if me == writer {
				h = t.WriteInsert(t.Loc(0, "x"), 0)
			} else {
				h = t.ReadInsert(t.Loc(0, "x"), 1)
			}
			// The reader publishes how many rounds it saw in order; task 0 reads that after.
			var publish, collect *orwl.Handle
			if me == reader {
				publish = t.WriteInsertOnce(t.Loc(reader, "seen"), 0)
			}
			if me == 0 {
				collect = t.ReadInsertOnce(t.Loc(reader, "seen"), 1)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			var start time.Time
			seen, inOrder := uint64(0), true
			for i := range rounds {
				if i == c.warmup {
					start = time.Now()
				}
				round := uint64(i) + 1 // 0 is the location's initial value
				if err := h.Section(ctx, func(b []byte) error {
					if me == writer {
						binary.LittleEndian.PutUint64(b, stamp(round))
					} else if inOrder = inOrder && binary.LittleEndian.Uint64(b) == round; inOrder {
						seen++
					}
					return nil
				}); err != nil {
					return err
				}
			}
			elapsed := time.Since(start).Seconds()
			if publish != nil {
				if err := publish.Section(ctx, func(b []byte) error {
					binary.LittleEndian.PutUint64(b, seen)
					return nil
				}); err != nil {
					return err
				}
			}
			if collect == nil {
				return nil
			}
			return collect.Section(ctx, func(b []byte) error {
				res = &outcome{seconds: elapsed, seen: binary.LittleEndian.Uint64(b)}
				return nil
			})
		})
	return res, err
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	res, err := handoff(context.Background(), c)
	if err != nil {
		fmt.Fprintln(stderr, "handoff:", err)
		return cli.ExitFailed
	}
	if res == nil {
		return 0 // another process runs task 0 and reports
	}
	var r cli.Result
	r.Add("mode", c.mode)
	r.Add("size", c.size)
	r.Add("iters", c.iters)
	r.Add("warmup", c.warmup)
	r.Job(c.Tasks, c.Procs)
	r.Seconds(res.seconds)
	r.Addf("round-trip-ns", "%.1f", res.seconds*1e9/float64(c.iters))
	r.Verified(res.seen == uint64(c.warmup+c.iters))
	return r.Report(stdout, stderr, "handoff", c.JSON)
}
