package orwl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/internal/hugemem"
)

// TestSnapshotBuffersAreNotReused: a checkpoint's pieces are written from buffers that the
// next checkpoint reuses. When a checkpoint fails (a piece could not be written) while the
// writer still writes another of its pieces (a slow disk), the next checkpoint must not copy
// into that buffer under the writer: the piece on disk would mix two iterations while its
// checksum, computed as it is written, matches. Here the write of state "a" of the first
// checkpoint fails, and the writer stops after the first chunk of state "b" until the task
// has entered a second checkpoint or rank 0 has skipped one because of the piece held; every
// chunk of "b" must hold the task's state of the first checkpoint's iteration, and a later
// checkpoint must complete all the same.
func TestSnapshotBuffersAreNotReused(t *testing.T) {
	var (
		mu              sync.Mutex
		first           int // the first checkpoint, whose "b" is held
		word            []byte
		problems        []string
		entered2        = make(chan struct{}) // the task entered a second checkpoint
		skipped         = make(chan struct{}) // rank 0 skipped a checkpoint: "b" still held
		written         = make(chan struct{}) // the first checkpoint's "b" is written
		completeAfter   = make(chan struct{}) // a checkpoint complete after it
		once2, onceSkip sync.Once
		onceWritten     sync.Once
		onceComplete    sync.Once
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	defer func() { chunkHook = nil }()
	chunkHook = func(p pieceJob, chunk []byte) error {
		mu.Lock()
		if first == 0 {
			first = p.k
		}
		k := first
		mu.Unlock()
		if p.k != k || p.key.Kind != checkpoint.State {
			return nil
		}
		if p.key.Name == "a" {
			return errors.New("injected: disk trouble")
		}
		if word == nil { // "b"'s first chunk: hold the writer after it
			word = append([]byte(nil), chunk[:8]...)
			select {
			case <-entered2:
			case <-skipped:
			case <-time.After(time.Minute):
				problem("neither a second checkpoint nor a skipped one within a minute")
			}
		} else {
			defer onceWritten.Do(func() { close(written) })
		}
		for off := 0; off+8 <= len(chunk); off += 8 {
			if string(chunk[off:off+8]) != string(word) {
				problem("checkpoint %d: state b written with word %x at a chunk's offset %d, %x at its start: overwritten while written",
					k, chunk[off:off+8], off, word)
				break
			}
		}
		return nil
	}
	logger := slog.New(slog.NewTextHandler(logLines(func(line string) {
		switch {
		case strings.Contains(line, `msg="orwl: checkpoint skipped`):
			onceSkip.Do(func() { close(skipped) })
		case strings.Contains(line, `msg="orwl: checkpoint complete"`):
			select {
			case <-written:
				onceComplete.Do(func() { close(completeAfter) })
			default:
			}
		}
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	errStop := errors.New("stop")
	cfg := Config{Tasks: 1, Locations: []string{"v"}, Logger: logger,
		Checkpoint: Checkpoint{Dir: filepath.Join(t.TempDir(), "{rank}"), Every: time.Millisecond, Program: "reuse"}}
	err := Run(context.Background(), cfg, func(ctx context.Context, t *Task) error {
		a, b := make([]byte, checkpoint.InlineMax+8), make([]byte, 2*writeChunk+8) // neither in the manifest
		t.Keep("a", a)
		t.Keep("b", b)
		t.Scale("v", 8)
		own := t.WriteInsert(t.Loc(0, "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, math.MaxInt32, func(iter int) error {
			if n, _ := t.CheckpointHold(); n >= 2 {
				once2.Do(func() { close(entered2) })
			}
			select {
			case <-completeAfter:
				return errStop
			default:
			}
			binary.LittleEndian.PutUint64(b, uint64(iter)) // b: the iteration, in every word
			for n := 8; n < len(b); n *= 2 {
				copy(b[n:], b[:n])
			}
			return own.Section(ctx, func([]byte) error { return nil })
		})
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Run: %v, want the task's stop after a checkpoint complete", err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// logLines is an io.Writer that calls fn with every line a slog.TextHandler writes.
type logLines func(line string)

func (f logLines) Write(b []byte) (int, error) {
	f(string(b))
	return len(b), nil
}

// TestSnapshotBuffersAreMappedAndFreed: the snapshot buffers of large kept states and
// locations are allocated at the schedule, mapped outside the Go heap where the system
// allows it (snapBytes, on huge pages), with the state's name before its copy; a location
// grown after the schedule gets a larger buffer at its next snapshot; and every one is
// freed when the job ends.
func TestSnapshotBuffersAreMappedAndFreed(t *testing.T) {
	big := hugemem.Threshold + 8
	linux := runtime.GOOS == "linux"
	var (
		task              *Task
		wire, grown       []byte
		grownMapped       bool
		problems          []string
		errStop           = errors.New("stop")
		checkpointedSince int // checkpoints entered when the location was grown
	)
	cfg := Config{Tasks: 1, Locations: []string{"v"},
		Checkpoint: Checkpoint{Dir: filepath.Join(t.TempDir(), "{rank}"), Every: time.Millisecond, Program: "buffers"}}
	err := Run(context.Background(), cfg, func(ctx context.Context, tk *Task) error {
		task = tk
		tk.Keep("s", make([]byte, big))
		tk.Scale("v", 8)
		own := tk.WriteInsert(tk.Loc(0, "v"), 0)
		if err := tk.Schedule(ctx); err != nil {
			return err
		}
		s := &tk.ckpt.kept[0]
		wire = s.wire
		if hugemem.Mapped(wire) != linux || len(wire) != 1+big || &s.snap[0] != &wire[1] || string(wire[:1]) != "s" {
			problems = append(problems, fmt.Sprintf("kept state's buffer: mapped %v, %d bytes, not the name then the copy", hugemem.Mapped(wire), len(wire)))
		}
		l := tk.job.owned[0]
		return tk.Iterate(ctx, math.MaxInt32, func(iter int) error {
			n, _ := tk.CheckpointHold()
			l.mu.Lock()
			if grown == nil && cap(l.ckpt.buf) >= big && n > checkpointedSince {
				grown, grownMapped = l.ckpt.buf, hugemem.Mapped(l.ckpt.buf)
			}
			l.mu.Unlock()
			if grown != nil {
				return errStop
			}
			return own.Section(ctx, func([]byte) error {
				if checkpointedSince == 0 && n > 0 {
					checkpointedSince = n
					_, err := own.Resize(big)
					return err
				}
				return nil
			})
		})
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Run: %v, want the task's stop after a snapshot of the grown location", err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if grownMapped != linux || len(grown) != big {
		t.Errorf("grown location's snapshot: %d bytes, mapped %v", len(grown), grownMapped)
	}
	if hugemem.Mapped(wire) || hugemem.Mapped(grown) || task.ckpt.kept[0].wire != nil || task.job.owned[0].ckpt.buf != nil {
		t.Error("snapshot buffers not freed when the job ended")
	}
}

// TestWriterHasAProcessorMore: while the checkpoint writer writes a piece, GOMAXPROCS is one
// above the process's, so that the writes and fsyncs that block in the kernel hold no
// processor the tasks need; once the job has ended it is the process's again.
func TestWriterHasAProcessorMore(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	var (
		mu      sync.Mutex
		during  []int
		written = make(chan struct{})
		once    sync.Once
	)
	defer func() { chunkHook = nil }()
	chunkHook = func(pieceJob, []byte) error {
		mu.Lock()
		during = append(during, runtime.GOMAXPROCS(0))
		mu.Unlock()
		once.Do(func() { close(written) })
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errStop := errors.New("stop")
	cfg := Config{Tasks: 1, Locations: []string{"v"},
		Checkpoint: Checkpoint{Dir: t.TempDir(), Every: time.Millisecond, Program: "procs"}}
	err := Run(ctx, cfg, func(ctx context.Context, t *Task) error {
		t.Keep("s", make([]byte, 4096)) // a file: not in the manifest
		t.Scale("v", 8)
		own := t.WriteInsert(t.Loc(0, "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, math.MaxInt32, func(int) error {
			select {
			case <-written:
				return errStop
			default:
			}
			return own.Section(ctx, func([]byte) error { return nil })
		})
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Run: %v, want the task's stop after a piece was written", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range during {
		if n != before+1 {
			t.Errorf("GOMAXPROCS %d while the writer wrote a piece, want %d (the process's %d plus one)", n, before+1, before)
		}
	}
	if after := runtime.GOMAXPROCS(0); after != before {
		t.Errorf("GOMAXPROCS %d after the job, want the process's %d", after, before)
	}
}

// TestWriterWaitsForTheTasksCopies: the writer starts on a checkpoint once the tasks of the
// process have copied their kept states for it, so that those copies run alone. Location
// "c", which no handle uses, is copied when the checkpoint is armed, while the task, slowed
// down, is still some iterations before it: its piece must not be written before the task
// has entered the checkpoint's iteration, unless the task has left Iterate.
func TestWriterWaitsForTheTasksCopies(t *testing.T) {
	var (
		entered atomic.Int64 // the iteration the task last entered
		stopped atomic.Bool  // the task leaves Iterate: it owes no copy any more
		mu      sync.Mutex
		early   []string
		state   = make(chan struct{}) // a state piece was written
		once    sync.Once
	)
	defer func() { chunkHook = nil }()
	chunkHook = func(p pieceJob, _ []byte) error {
		if e := entered.Load(); e < int64(p.k) && !stopped.Load() {
			mu.Lock()
			early = append(early, fmt.Sprintf("piece %v of checkpoint %d written while the task was at iteration %d", p.key, p.k, e))
			mu.Unlock()
		}
		if p.key.Kind == checkpoint.State {
			once.Do(func() { close(state) })
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errStop := errors.New("stop")
	cfg := Config{Tasks: 1, Locations: []string{"v", "c"},
		Checkpoint: Checkpoint{Dir: t.TempDir(), Every: time.Millisecond, Program: "waits"}}
	err := Run(ctx, cfg, func(ctx context.Context, t *Task) error {
		t.Keep("s", make([]byte, 4096)) // files: not in the manifest
		t.Scale("v", 8)
		t.Scale("c", 4096)
		own := t.WriteInsert(t.Loc(0, "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, math.MaxInt32, func(iter int) error {
			entered.Store(int64(iter))
			select {
			case <-state:
				stopped.Store(true)
				return errStop
			default:
			}
			time.Sleep(2 * time.Millisecond)
			return own.Section(ctx, func([]byte) error { return nil })
		})
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Run: %v, want the task's stop after a state piece was written", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range early {
		t.Error(e)
	}
}
