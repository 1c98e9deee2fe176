package orwl_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/orwl"
)

// bigSizes are the sizes the bigbuffers scenario gives its location, one per round: large
// enough to be mapped outside the Go heap (hugemem.Threshold), growing (a new buffer, the
// old one freed) and shrinking (the same buffer).
var bigSizes = []int{hugemem.Threshold, 3 * hugemem.Threshold, hugemem.Threshold + 8, 5 * hugemem.Threshold}

// bigBuffers runs a job of two tasks: task 1 owns x, resizes and fills it, then both read
// it (task 0 through a mirror when it runs in another process), every round, with the
// sizes of bigSizes. It checks what every reader sees, that a buffer replaced by a larger
// one (the location's data, a mirror) is freed at once, and that every buffer is freed
// when Run returns.
func bigBuffers(ctx context.Context) error {
	mapped := runtime.GOOS == "linux"
	seen := make([][]byte, 2) // the last buffer each task mapped
	err := orwl.Run(ctx, orwl.Config{Tasks: 2, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error {
			if t.ID() == 1 {
				t.Scale("x", bigSizes[0])
			}
			var w *orwl.Handle
			if t.ID() == 1 {
				w = t.WriteInsert(t.Loc(1, "x"), 0)
			}
			r := t.ReadInsert(t.Loc(1, "x"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for round, size := range bigSizes {
				if w != nil {
					if err := w.Section(ctx, func(old []byte) error {
						b, err := w.Resize(size)
						if err != nil {
							return err
						}
						if grown := size > cap(old); grown && hugemem.Mapped(old) {
							return fmt.Errorf("round %d: the buffer replaced by Resize(%d) is still mapped", round, size)
						}
						b[0], b[size-1] = byte(round+1), byte(round+2)
						return nil
					}); err != nil {
						return err
					}
				}
				if err := r.Section(ctx, func(b []byte) error {
					if len(b) != size || b[0] != byte(round+1) || b[size-1] != byte(round+2) {
						return fmt.Errorf("task %d, round %d: %d bytes, first %d, last %d; want %d, %d, %d", t.ID(), round, len(b), b[0], b[len(b)-1], size, round+1, round+2)
					}
					if hugemem.Mapped(b) != mapped {
						return fmt.Errorf("task %d, round %d: a buffer of %d bytes is mapped: %v, want %v", t.ID(), round, size, !mapped, mapped)
					}
					if prev := seen[t.ID()]; prev != nil && size > cap(prev) && hugemem.Mapped(prev) {
						return fmt.Errorf("task %d, round %d: the buffer it read in the round before, replaced by a larger one, is still mapped", t.ID(), round)
					}
					seen[t.ID()] = b
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return err
	}
	for task, b := range seen {
		if hugemem.Mapped(b) {
			return fmt.Errorf("task %d: the buffer it read last is still mapped after Run", task)
		}
	}
	return nil
}

// TestLargeBuffersFreed: location data and mirrors of remote locations over the threshold
// are mapped outside the Go heap, freed when replaced by a larger one, and freed when Run
// returns; every reader sees the data of its round, in one process and in two.
func TestLargeBuffersFreed(t *testing.T) {
	t.Run("1 process", func(t *testing.T) {
		if err := bigBuffers(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("2 processes", func(t *testing.T) {
		p := startScenario(t, "bigbuffers", 2, nil, func(int) []string { return nil })
		outs, codes := p.wait()
		expectExitZero(t, outs, codes)
	})
}

func init() {
	scenarios["bigbuffers"] = func() int {
		if err := bigBuffers(context.Background()); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ok")
		return 0
	}
}
