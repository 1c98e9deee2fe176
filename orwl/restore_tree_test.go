package orwl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/orwl"
)

// A restart's inventories and plans travel along the job's tree (restore.go): each process
// receives one inventory message from each child and its plan from its parent, and sends
// one of each the other way, whatever the number of processes.

// treeRing is a ring of tasks: each task writes its location v from its left neighbour's
// and from a state acc it keeps (too large for a manifest: a file). Its checkpoints go to a
// directory per process (pattern, expanded for each rank).
type treeRing struct {
	tasks   int
	pattern string // "": no checkpoints
	program string
	every   time.Duration
	stop    *atomic.Int64 // when not nil: task 1 fails once it holds a checkpoint complete (its number), and no task ends
	mu      sync.Mutex
	final   map[int][2]float64 // by task: v and acc after the last iteration
	resumed int
}

// dir returns rank's directory, where it keeps its checkpoints (in rank-0 for a job of one
// process).
func (j *treeRing) dir(rank int) string { return checkpoint.Expand(j.pattern, rank, "host") }

func (j *treeRing) config(dir string, log *slog.Logger) orwl.Config {
	cfg := orwl.Config{Tasks: j.tasks, Locations: []string{"v"}, Logger: log}
	if dir != "" {
		cfg.Checkpoint = orwl.Checkpoint{Dir: dir, Every: j.every, Program: j.program}
	}
	return cfg
}

// task runs iters iterations.
func (j *treeRing) task(iters int) orwl.TaskFunc {
	return func(ctx context.Context, t *orwl.Task) error {
		me := t.ID()
		t.Scale("v", 8)
		acc := make([]byte, 8+checkpoint.InlineMax)
		t.Keep("acc", acc)
		own := t.WriteInsert(t.Loc(me, "v"), 0)
		in := t.ReadInsert(t.Loc((me+t.NumTasks()-1)%t.NumTasks(), "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		a := orwl.Float64s(acc)
		return t.Iterate(ctx, iters, func(iter int) error {
			if j.stop != nil && me == 1 && j.stop.Load() > 0 {
				return errInjected
			}
			return own.Section(ctx, func(v []byte) error {
				return in.Section(ctx, func(l []byte) error {
					x := orwl.Float64s(v)
					x[0] = math.Mod(x[0]*0.5+orwl.Float64s(l)[0]+a[0]*1e-3+float64(iter%7), 1e6)
					a[0] += x[0]
					if iter == iters-1 {
						j.mu.Lock()
						j.final[me] = [2]float64{x[0], a[0]}
						j.resumed = t.Resumed()
						j.mu.Unlock()
					}
					return nil
				})
			})
		})
	}
}

// checkpointed runs the job on one process, in rank's directory, until a checkpoint is
// complete there, and returns its number.
func (j *treeRing) checkpointed(t *testing.T, rank int) int {
	t.Helper()
	stop := &treeRing{tasks: j.tasks, program: j.program, every: 2 * time.Millisecond, stop: new(atomic.Int64), final: map[int][2]float64{}}
	log := slog.New(completeHandler{stop.stop})
	if err := orwl.Run(context.Background(), stop.config(j.dir(rank), log), stop.task(math.MaxInt32)); !errors.Is(err, errInjected) {
		t.Fatalf("job stopped after a checkpoint: %v, want the injected failure", err)
	}
	return int(stop.stop.Load())
}

// completeHandler keeps the iteration of the last checkpoint a job logs complete.
type completeHandler struct{ k *atomic.Int64 }

func (h completeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h completeHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h completeHandler) WithGroup(string) slog.Handler            { return h }

func (h completeHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "orwl: checkpoint complete" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "iteration" {
				h.k.Store(a.Value.Int64())
			}
			return true
		})
	}
	return nil
}

// restartLog keeps, by rank, what each process logs of its restart's inventories and plans.
type restartLog struct {
	mu       sync.Mutex
	received []int64
	sent     []int64
	bytes    []int64 // received and sent
	logged   []bool
}

const restartLogMessage = "orwl: restart's inventories and plans"

func (l *restartLog) logger(rank int) *slog.Logger { return slog.New(restartHandler{l, rank}) }

type restartHandler struct {
	l    *restartLog
	rank int
}

func (h restartHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h restartHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h restartHandler) WithGroup(string) slog.Handler            { return h }

func (h restartHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != restartLogMessage {
		return nil
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.logged[h.rank] = true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "received":
			h.l.received[h.rank] = a.Value.Int64()
		case "sent":
			h.l.sent[h.rank] = a.Value.Int64()
		case "received_bytes", "sent_bytes":
			h.l.bytes[h.rank] += a.Value.Int64()
		}
		return true
	})
	return nil
}

// restartTree runs j on procs processes, iters iterations, and returns each rank's error
// and what each logged of its restart.
func restartTree(t *testing.T, j *treeRing, procs, iters int) ([]error, *restartLog) {
	t.Helper()
	l := &restartLog{received: make([]int64, procs), sent: make([]int64, procs), bytes: make([]int64, procs), logged: make([]bool, procs)}
	j.final = map[int][2]float64{}
	errs := runEachProc(t, context.Background(), procs, func(rank int) orwl.Config { return j.config(j.dir(rank), l.logger(rank)) }, j.task(iters))
	return errs, l
}

// TestRestartTravelsTheTree: a job of 16 processes restarts from the checkpoint of a run on
// one process, whose directory only rank 0 sees: rank 0 sends every piece, and the job ends
// with the values of an uninterrupted run. The inventories and the plans go along the
// job's tree: each process receives one message from each child and one from its parent,
// and sends as many, rank 0 two of each (its children), where it used to receive an
// inventory from every process and send every one its plan.
func TestRestartTravelsTheTree(t *testing.T) {
	const procs = 16
	j := &treeRing{tasks: procs, pattern: filepath.Join(memDir(t), "node-{rank}"), program: "counter", every: time.Hour}
	k := j.checkpointed(t, 0)
	iters := k + 5
	errs, l := restartTree(t, j, procs, iters)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	want := &treeRing{tasks: procs, final: map[int][2]float64{}}
	if err := orwl.Run(context.Background(), want.config("", nil), want.task(iters)); err != nil {
		t.Fatal(err)
	}
	if j.resumed != k {
		t.Fatalf("the job resumed from iteration %d, the checkpoint is of %d", j.resumed, k)
	}
	for task := range procs {
		if j.final[task] != want.final[task] {
			t.Errorf("task %d ended with %v, an uninterrupted run with %v", task, j.final[task], want.final[task])
		}
	}
	t.Logf("checkpoint %d; restart messages received by rank: %v, sent: %v, bytes: %v", k, l.received, l.sent, l.bytes)
	for r := range procs {
		want := int64(len(orwl.TreeChildren(r, procs)))
		if r > 0 {
			want++ // the parent
		}
		if !l.logged[r] || l.received[r] != want || l.sent[r] != want {
			t.Errorf("rank %d received %d restart messages and sent %d (logged: %v), want %d each: one from and to each neighbour in the job's tree",
				r, l.received[r], l.sent[r], l.logged[r], want)
		}
	}
}

// TestBrokenLeafInventoryFailsTheRestart: a process at a leaf of the job's tree whose
// directory holds another job's checkpoint cannot tell what it holds: every process's
// restart fails, naming that rank and why, and no task runs.
func TestBrokenLeafInventoryFailsTheRestart(t *testing.T) {
	const procs, leaf = 16, 13
	j := &treeRing{tasks: procs, pattern: filepath.Join(memDir(t), "node-{rank}"), program: "counter", every: time.Hour}
	j.checkpointed(t, 0)
	other := &treeRing{tasks: procs, pattern: j.pattern, program: "other"}
	other.checkpointed(t, leaf)
	errs, _ := restartTree(t, j, procs, 10)
	want := fmt.Sprintf(`rank %d: checkpoint `, leaf)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "is of another job: program") {
			t.Fatalf("rank %d: Run returned %v, want an error naming rank %d's directory of another job", r, err, leaf)
		}
	}
	t.Logf("rank 0: %v", errs[0])
	if len(j.final) != 0 {
		t.Errorf("tasks ran: %v", j.final)
	}
}
