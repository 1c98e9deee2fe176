package orwl_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// runBench runs a job of n tasks with one location "x" of 8 bytes and fails b on error.
func runBench(b *testing.B, n int, fn orwl.TaskFunc) { runBenchTraced(b, n, "", fn) }

// runBenchTraced is runBench with the job traced into file ("" for no trace).
func runBenchTraced(b *testing.B, n int, file string, fn orwl.TaskFunc) {
	b.Helper()
	err := orwl.Run(context.Background(), orwl.Config{Tasks: n, Locations: []string{"x"}, Trace: file},
		func(ctx context.Context, t *orwl.Task) error {
			t.Scale("x", 8)
			return fn(ctx, t)
		})
	if err != nil {
		b.Fatal(err)
	}
}

func nop([]byte) error { return nil }

// BenchmarkSectionUncontended: one iterative write handle alone on its location; every
// iteration is acquire (already granted), re-request, map, release. "traced" records every
// event (the summary it prints at the end goes to stderr).
func BenchmarkSectionUncontended(b *testing.B) {
	b.Run("untraced", func(b *testing.B) { benchSectionUncontended(b, "") })
	b.Run("traced", func(b *testing.B) { benchSectionUncontended(b, filepath.Join(b.TempDir(), "trace.json")) })
}

func benchSectionUncontended(b *testing.B, traceFile string) {
	runBenchTraced(b, 1, traceFile, func(ctx context.Context, t *orwl.Task) error {
		h := t.WriteInsert(t.Loc(0, "x"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := h.Section(ctx, nop); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
}

// BenchmarkHandoff: an iterative writer and reader of one location in strict alternation.
// One iteration is two hand-offs (writer to reader, reader to writer), like one round trip
// of the ping-pongs below.
func BenchmarkHandoff(b *testing.B) {
	b.Run("orwl", func(b *testing.B) {
		runBench(b, 2, func(ctx context.Context, t *orwl.Task) error {
			insert := t.WriteInsert
			if t.ID() == 1 {
				insert = t.ReadInsert
			}
			h := insert(t.Loc(0, "x"), t.ID())
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if t.ID() == 0 {
				b.ReportAllocs()
				b.ResetTimer()
			}
			for range b.N {
				if err := h.Section(ctx, nop); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("channel", func(b *testing.B) {
		ping, pong := make(chan struct{}), make(chan struct{})
		go func() {
			for range ping {
				pong <- struct{}{}
			}
		}()
		b.ReportAllocs()
		for range b.N {
			ping <- struct{}{}
			<-pong
		}
		close(ping)
	})
	b.Run("mutex-cond", func(b *testing.B) {
		var mu sync.Mutex
		cond := sync.NewCond(&mu)
		turn := 0
		done := make(chan struct{})
		go func() {
			mu.Lock()
			for range b.N {
				for turn != 1 {
					cond.Wait()
				}
				turn = 0
				cond.Signal()
			}
			mu.Unlock()
			close(done)
		}()
		b.ReportAllocs()
		mu.Lock()
		for range b.N {
			for turn != 0 {
				cond.Wait()
			}
			turn = 1
			cond.Signal()
		}
		mu.Unlock()
		<-done
	})
}

// BenchmarkReadersWriter: one writer and 8 readers cycling on one location. ORWL gives every
// iteration's order (the writer, then the 8 readers together); sync.RWMutex gives no order,
// so its readers may see a value twice or miss one.
func BenchmarkReadersWriter(b *testing.B) {
	const readers = 8
	b.Run("orwl", func(b *testing.B) {
		runBench(b, 1+readers, func(ctx context.Context, t *orwl.Task) error {
			insert, pos := t.ReadInsert, 1
			if t.ID() == 0 {
				insert, pos = t.WriteInsert, 0
			}
			h := insert(t.Loc(0, "x"), pos)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if t.ID() == 0 {
				b.ReportAllocs()
				b.ResetTimer()
			}
			for range b.N {
				if err := h.Section(ctx, nop); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("rwmutex", func(b *testing.B) {
		var mu sync.RWMutex
		var wg sync.WaitGroup
		value := 0
		for range readers {
			wg.Go(func() {
				for range b.N {
					mu.RLock()
					_ = value
					mu.RUnlock()
				}
			})
		}
		b.ReportAllocs()
		for i := range b.N {
			mu.Lock()
			value = i
			mu.Unlock()
		}
		wg.Wait()
	})
}
