package orwl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/orwl"
)

// ckptRing is a job that checkpoints: a ring of tasks, each writing its location v from its
// left neighbour's and from a private accumulator it keeps across iterations. v is small
// enough for the manifest to hold (checkpoint.InlinePiece), the accumulator's state is not:
// it is written to files and copied to a partner.
type ckptRing struct {
	tasks, iters int
	dir          string // checkpoint pattern; "" for none
	private      bool   // each process sees only its own directory: dir expanded for its rank
	failAfter    bool   // task 1 fails at its first iteration after a checkpoint is complete
	mu           sync.Mutex
	final        map[int][2]float64 // by task: v and the accumulator at the end
	resumed      int
}

var errInjected = errors.New("injected failure")

// errUnnoticed ends a job whose misuse went through.
var errUnnoticed = errors.New("the misuse went unnoticed")

func (r *ckptRing) config(rank int) orwl.Config {
	cfg := orwl.Config{Tasks: r.tasks, Locations: []string{"v"}}
	if r.dir != "" {
		dir := r.dir
		if r.private { // a pattern without placeholders matches only itself
			dir = checkpoint.Expand(dir, rank, "host")
		}
		cfg.Checkpoint = orwl.Checkpoint{Dir: dir, Every: 2e6, Program: "ring", // 2ms
			Params: map[string]string{"iters": fmt.Sprint(r.iters)}}
	}
	return cfg
}

func (r *ckptRing) task(ctx context.Context, t *orwl.Task) error {
	me, left := t.ID(), (t.ID()+t.NumTasks()-1)%t.NumTasks()
	t.Scale("v", 8)
	acc := make([]byte, 8+checkpoint.InlineMax)
	t.Keep("acc", acc)
	own := t.WriteInsert(t.Loc(me, "v"), 0)
	in := t.ReadInsert(t.Loc(left, "v"), 0)
	if err := t.Schedule(ctx); err != nil {
		return err
	}
	a := orwl.Float64s(acc)
	return t.Iterate(ctx, r.iters, func(iter int) error {
		if r.failAfter && me == 1 && iter%16 == 0 && r.checkpointed() {
			return errInjected
		}
		return own.Section(ctx, func(v []byte) error {
			return in.Section(ctx, func(l []byte) error {
				x := orwl.Float64s(v)
				x[0] = math.Mod(x[0]*0.5+orwl.Float64s(l)[0]+a[0]*1e-3+float64(iter%7), 1e6)
				a[0] += x[0]
				if iter == r.iters-1 {
					r.mu.Lock()
					r.final[me] = [2]float64{x[0], a[0]}
					r.resumed = t.Resumed()
					r.mu.Unlock()
				}
				return nil
			})
		})
	})
}

// checkpointed reports whether a complete checkpoint is in the job's directories.
func (r *ckptRing) checkpointed() bool {
	dirs, _ := checkpoint.Glob(r.dir)
	if r.private { // each one a pattern without placeholders, of the process's subdirectory
		var subs []string
		for _, d := range dirs {
			s, _ := checkpoint.Glob(d)
			subs = append(subs, s...)
		}
		dirs = subs
	}
	cp, _, err := checkpoint.Find(dirs, checkpoint.Fingerprint{Program: "ring", Tasks: r.tasks,
		Locations: []string{"v"}, Params: map[string]string{"iters": fmt.Sprint(r.iters)}})
	return err == nil && cp != nil
}

// run runs the job over procs processes (in this process) and returns the final values.
func (r *ckptRing) run(t *testing.T, procs int) (map[int][2]float64, error) {
	t.Helper()
	r.final = map[int][2]float64{}
	var err error
	if procs == 1 {
		err = orwl.Run(context.Background(), r.config(0), r.task)
	} else {
		err = errors.Join(runEachProc(t, context.Background(), procs, r.config, r.task)...)
	}
	return r.final, err
}

// TestRestartFromCheckpointIsBitIdentical: rule 17. A job killed after a checkpoint and
// restarted, on the same or another number of processes, ends with the bytes of an
// uninterrupted run.
func TestRestartFromCheckpointIsBitIdentical(t *testing.T) {
	const tasks, iters = 4, 3000
	want, err := (&ckptRing{tasks: tasks, iters: iters}).run(t, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ before, after int }{{1, 1}, {2, 3}, {3, 1}, {4, 5}} { // 4: rank 1 gathers rank 3's answers (checkpoint_tree.go)
		t.Run(fmt.Sprintf("%d procs then %d", c.before, c.after), func(t *testing.T) {
			dir := filepath.Join(memDir(t), "ckpt-{rank}")
			failing := &ckptRing{tasks: tasks, iters: iters, dir: dir, failAfter: true}
			restarted := &ckptRing{tasks: tasks, iters: iters, dir: dir}
			restartRing(t, want, c.before, c.after, failing, restarted, func() {})
		})
	}
}

// restartRing runs failing on before processes until its injected failure after a
// checkpoint, calls between, runs restarted on after processes, and checks that it resumed
// from a checkpoint and ended with want, the values of an uninterrupted run.
func restartRing(t *testing.T, want map[int][2]float64, before, after int, failing, restarted *ckptRing, between func()) {
	t.Helper()
	if _, err := failing.run(t, before); !errors.Is(err, errInjected) && !errors.Is(err, orwl.ErrPeerLost) {
		if err == nil {
			t.Fatalf("no checkpoint was complete before the end of %d iterations", failing.iters)
		}
		if !strings.Contains(err.Error(), errInjected.Error()) {
			t.Fatalf("first run: %v, want the injected failure", err)
		}
	}
	between()
	got, err := restarted.run(t, after)
	if err != nil {
		t.Fatal(err)
	}
	if restarted.resumed == 0 {
		t.Fatal("the restarted job did not resume from a checkpoint")
	}
	for task := range restarted.tasks {
		if got[task] != want[task] {
			t.Fatalf("task %d ended with %v after resuming at iteration %d, an uninterrupted run with %v",
				task, got[task], restarted.resumed, want[task])
		}
	}
}

// TestRestartFromPrivateDirectories: rule 19 where each process sees only its own
// directory (a disk per node): a process's disk lost, or the job restarted on fewer
// processes, the pieces that only other processes' disks hold are sent to the processes
// that now run their tasks (in parts of 3 bytes here), and the job ends with the values of
// an uninterrupted run.
func TestRestartFromPrivateDirectories(t *testing.T) {
	defer orwl.SetRestartChunk(3)()
	const tasks, iters = 4, 3000
	want, err := (&ckptRing{tasks: tasks, iters: iters}).run(t, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		after, lost int
	}{{"3 procs then 3, rank 1's disk lost", 3, 1}, {"3 procs then 2, rank 2's disk lost", 2, 2}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(memDir(t), "node-{rank}")
			failing := &ckptRing{tasks: tasks, iters: iters, dir: dir, private: true, failAfter: true}
			restarted := &ckptRing{tasks: tasks, iters: iters, dir: dir, private: true}
			restartRing(t, want, 3, c.after, failing, restarted, func() {
				procDirs := filepath.Join(strings.ReplaceAll(dir, "{rank}", "*"), "rank-*") // each process's, in its own directory
				v, _ := filepath.Glob(filepath.Join(procDirs, "ckpt-*", "location.*"))
				acc, _ := filepath.Glob(filepath.Join(procDirs, "ckpt-*", "state.*.acc"))
				if len(v) != 0 || len(acc) == 0 {
					t.Errorf("files %q of v (in the manifests) and %d of the states, want none and some", v, len(acc))
				}
				if err := os.RemoveAll(checkpoint.Expand(dir, c.lost, "")); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestRestoredLocationGuarded: a location restored from the copy its owner's partner sent
// (the owner's disk lost) is the buffer of data it was before the restart: in a checked job,
// guarded like any other, and, of 2 MiB or more, read in place by a process of the same
// host, checked job or not. Either way a write through a read's data of it fails the job
// with ErrReadOnlyData, where a copy, or Go memory, would take it unnoticed.
func TestRestoredLocationGuarded(t *testing.T) {
	for _, c := range []struct {
		name    string
		size    int
		checked orwl.Checking
		reader  int // the task that reads task 0's location
	}{
		{"checked, read by its owner", 1000, orwl.CheckedOn, 0},
		{"unchecked, read by the other process", 4 << 20, orwl.CheckedOff, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const iters = 1 << 22 // the first run fails once a checkpoint is complete, the second at the misuse
			dir := filepath.Join(memDir(t), "node-{rank}")
			fingerprint := checkpoint.Fingerprint{Program: "restored", Tasks: 2, Locations: []string{"v"}}
			config := func(rank int) orwl.Config {
				return orwl.Config{Tasks: 2, Locations: []string{"v"}, Checked: c.checked,
					Checkpoint: orwl.Checkpoint{Dir: checkpoint.Expand(dir, rank, "host"), Every: 2e6, Program: "restored"}}
			}
			checkpointed := func() bool { // in rank 1's directory, which stays
				dirs, _ := checkpoint.Glob(checkpoint.Expand(dir, 1, "host"))
				cp, _, err := checkpoint.Find(dirs, fingerprint)
				return err == nil && cp != nil
			}
			var misused atomic.Bool
			job := func(ctx context.Context, task *orwl.Task) error {
				task.Scale("v", c.size)
				w := task.WriteInsert(task.Loc(task.ID(), "v"), 0)
				var r *orwl.Handle
				if task.ID() == c.reader {
					r = task.ReadInsert(task.Loc(0, "v"), 1)
				}
				if err := task.Schedule(ctx); err != nil {
					return err
				}
				return task.Iterate(ctx, iters, func(iter int) error {
					switch {
					case iter%16 != 0:
					case task.Resumed() == 0 && task.ID() == 1 && checkpointed():
						return errInjected
					case task.Resumed() > 0 && misused.Load():
						return errUnnoticed
					}
					if err := w.Section(ctx, func(b []byte) error { b[iter%c.size]++; return nil }); err != nil || r == nil {
						return err
					}
					return r.Section(ctx, func(b []byte) error {
						if task.Resumed() > 0 && misused.CompareAndSwap(false, true) {
							b[c.size-1] = 42
						}
						return nil
					})
				})
			}
			if err := errors.Join(runEachProc(t, context.Background(), 2, config, job)...); !errors.Is(err, errInjected) &&
				!strings.Contains(fmt.Sprint(err), errInjected.Error()) {
				t.Fatalf("first run: %v, want the injected failure", err)
			}
			if err := os.RemoveAll(checkpoint.Expand(dir, 0, "host")); err != nil {
				t.Fatal(err)
			}
			err := runEachProc(t, context.Background(), 2, config, job)[c.reader]
			if !misused.Load() {
				t.Fatalf("the restarted job did not resume (%v)", err)
			}
			if !errors.Is(err, orwl.ErrReadOnlyData) {
				t.Fatalf("restarted run, the reader's process: %v, want ErrReadOnlyData", err)
			}
		})
	}
}

// memDir returns a temporary directory in memory where there is one (/dev/shm), so that the
// fsyncs of checkpoints cost nothing and a short job completes some: the disk's durability
// is package checkpoint's to test, not this file's.
func memDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "orwl-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestIterateRefusesHandlesUsedInTurn: in a job that takes checkpoints, a task that
// acquires its iterative handles in turn (slot iter%2) breaks the rounds its checkpoints
// are cut at: the rounds of a slot's location are every other iteration, so a checkpoint's
// piece of it would come late or never. Iterate says so, naming the handle, instead of
// taking checkpoints that never complete.
func TestIterateRefusesHandlesUsedInTurn(t *testing.T) {
	cfg := orwl.Config{Tasks: 2, Locations: []string{"s0", "s1"},
		Checkpoint: orwl.Checkpoint{Dir: filepath.Join(memDir(t), "{rank}"), Every: time.Hour}}
	err := orwl.Run(context.Background(), cfg, func(ctx context.Context, t *orwl.Task) error {
		var slots [2]*orwl.Handle
		for s, name := range cfg.Locations {
			t.Scale(name, 8)
			slots[s] = t.WriteInsert(t.Loc(t.ID(), name), 0)
		}
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, 10, func(iter int) error {
			return slots[iter%2].Section(ctx, func([]byte) error { return nil })
		})
	})
	if err == nil || !strings.Contains(err.Error(), `"s1" (position 0) 0 times`) {
		t.Fatalf("Run: %v, want an error naming the handle on s1", err)
	}
}

// TestCheckpointCompleteIsReported: rank 0 logs each complete checkpoint with its iteration
// once its manifest is committed (a restart would find it), and a task that entered it
// reports the time it was held up.
func TestCheckpointCompleteIsReported(t *testing.T) {
	dir := filepath.Join(memDir(t), "{rank}")
	complete := make(chan int, 1)
	logger := slog.New(logHandler(func(r slog.Record) {
		if r.Message != "orwl: checkpoint complete" {
			return
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "iteration" {
				select {
				case complete <- int(a.Value.Int64()):
				default:
				}
			}
			return true
		})
	}))
	errStop := errors.New("stop")
	var entered int
	cfg := orwl.Config{Tasks: 2, Locations: []string{"v"}, Logger: logger,
		Checkpoint: orwl.Checkpoint{Dir: dir, Every: time.Millisecond, Program: "reported"}}
	var k int
	err := orwl.Run(context.Background(), cfg, func(ctx context.Context, t *orwl.Task) error {
		state := make([]byte, 1<<16)
		t.Keep("state", state)
		t.Scale("v", 8)
		own := t.WriteInsert(t.Loc(t.ID(), "v"), 0)
		in := t.ReadInsert(t.Loc(1-t.ID(), "v"), 1)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, math.MaxInt32, func(iter int) error {
			if t.ID() == 0 { // task 1 then ends in its section, at the job's end
				select {
				case k = <-complete:
					entered, _ = t.CheckpointHold()
					return errStop
				default:
				}
			}
			state[iter%len(state)]++
			if err := own.Section(ctx, func([]byte) error { return nil }); err != nil {
				return err
			}
			return in.Section(ctx, func([]byte) error { return nil })
		})
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Run: %v, want the task's stop", err)
	}
	dirs, _ := checkpoint.Glob(dir)
	cp, _, err := checkpoint.Find(dirs, checkpoint.Fingerprint{Program: "reported", Tasks: 2, Locations: []string{"v"}})
	if err != nil || cp == nil || cp.Number < k {
		t.Fatalf("checkpoint %d reported complete; Find: %v %v", k, cp, err)
	}
	if entered < 1 {
		t.Fatalf("task 0 entered %d checkpoints, and checkpoint %d is complete", entered, k)
	}
}

// logHandler is a slog.Handler that calls fn with every record.
type logHandler func(slog.Record)

func (h logHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}
func (h logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logHandler) WithGroup(string) slog.Handler      { return h }

// TestCheckpointOfLargePieces: a kept state and a location larger than the mesh's 64 MiB
// scratch memory are checkpointed like small ones, the partner copies included, byte for
// byte.
func TestCheckpointOfLargePieces(t *testing.T) {
	const size = 64<<20 + 4096
	dir := filepath.Join(memDir(t), "{rank}")
	complete := make(chan struct{}, 1)
	logger := slog.New(logHandler(func(r slog.Record) {
		if r.Message == "orwl: checkpoint complete" {
			select {
			case complete <- struct{}{}:
			default:
			}
		}
	}))
	job := checkpoint.Fingerprint{Program: "large", Tasks: 2, Locations: []string{"v"}}
	config := func(rank int) orwl.Config {
		cfg := orwl.Config{Tasks: 2, Locations: job.Locations,
			Checkpoint: orwl.Checkpoint{Dir: dir, Every: time.Millisecond, Program: job.Program}}
		if rank == 0 {
			cfg.Logger = logger
		}
		return cfg
	}
	errStop := errors.New("stop")
	errs := runEachProc(t, context.Background(), 2, config, func(ctx context.Context, t *orwl.Task) error {
		state := largeState(t.ID(), size)
		t.Keep("state", state)
		t.Scale("v", size)
		own := t.WriteInsert(t.Loc(t.ID(), "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, math.MaxInt32, func(iter int) error {
			select {
			case <-complete:
				return errStop
			default:
			}
			return own.Section(ctx, func(v []byte) error {
				v[iter%len(v)] = byte(iter)
				return nil
			})
		})
	})
	for rank, err := range errs {
		if err == nil || !strings.Contains(err.Error(), errStop.Error()) {
			t.Fatalf("rank %d: %v, want the task's stop", rank, err)
		}
	}
	// Rank 0 logs a checkpoint complete once it committed it; rank 1 may not have yet when
	// the job stops. Rank 0's directory alone holds it whole: its own pieces and rank 1's
	// copies, which came over the mesh.
	cp, notes, err := checkpoint.Find([]string{checkpoint.Expand(dir, 0, "")}, job)
	if err != nil || cp == nil {
		t.Fatalf("rank 0's directory alone: %v %v %q, want a complete checkpoint", cp, err, notes)
	}
	for task := range 2 {
		got := make([]byte, size)
		if err := cp.Load(checkpoint.StateKey(task, "state"), got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, largeState(task, size)) {
			t.Fatalf("task %d's state in the checkpoint differs from the state", task)
		}
		if p, ok := cp.Piece(checkpoint.LocationKey(task, "v")); !ok || p.Size != size {
			t.Fatalf("location of task %d in the checkpoint: %+v", task, p)
		}
	}
}

// largeState is the state of task in TestCheckpointOfLargePieces: size bytes (a multiple of
// 4096) of a pattern of its own.
func largeState(task, size int) []byte {
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i*7 + task)
	}
	return bytes.Repeat(block, size/len(block))
}
