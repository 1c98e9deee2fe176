package orwl_test

import (
	"context"
	"fmt"
	"os"
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
// one (the location's data, a mirror) is freed by the end of the section, and that every
// buffer is freed when Run returns.
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
					var replaced []byte
					if err := w.Section(ctx, func(old []byte) error {
						b, err := w.Resize(size)
						if err != nil {
							return err
						}
						if size > cap(old) {
							replaced = old
						}
						b[0], b[size-1] = byte(round+1), byte(round+2)
						return nil
					}); err != nil {
						return err
					}
					if hugemem.Mapped(replaced) {
						return fmt.Errorf("round %d: the buffer replaced by Resize(%d) is still mapped after the section", round, size)
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

// recycleLocs is how many locations of task 1 the recycle scenario reads in task 0.
const recycleLocs = 6

// recycledMirrors runs a job of two tasks: task 1 owns recycleLocs locations of
// hugemem.Threshold bytes and fills each (position 0) only once task 0 has read the one
// before (position 1), which task 0 says by writing its location "read"; task 1 writes the
// even ones again at the end (position 2), and task 0 reads those again (position 3). Task 0
// checks what it reads. With task 1 in another process, the mirror of each location is
// given up when task 0 releases its first read, because another process's write is behind
// it (an even one: task 0 has a request on it left) or because task 0 has no request on it
// left (an odd one), so task 0 reads all of them in one buffer the first time; a new request
// on location 1 then brings its data again. Every buffer is freed when Run returns. remote
// says whether it runs so.
func recycledMirrors(ctx context.Context, remote bool) error {
	var seen [][]byte // task 0's buffers, in order
	locs := []string{"read"}
	for i := range recycleLocs {
		locs = append(locs, fmt.Sprint("l", i))
	}
	err := orwl.Run(ctx, orwl.Config{Tasks: 2, Locations: locs},
		func(ctx context.Context, t *orwl.Task) error {
			var fill, again, read, reread, said []*orwl.Handle
			for i, name := range locs[1:] {
				l := t.Loc(1, name)
				if t.ID() == 1 {
					t.Scale(name, hugemem.Threshold)
					fill = append(fill, t.WriteInsertOnce(l, 0))
					if i%2 == 0 {
						again = append(again, t.WriteInsertOnce(l, 2))
					}
					said = append(said, t.ReadInsertOnce(t.Loc(0, "read"), 2*i+1))
				} else {
					read = append(read, t.ReadInsertOnce(l, 1))
					if i%2 == 0 {
						reread = append(reread, t.ReadInsertOnce(l, 3))
					}
					said = append(said, t.WriteInsertOnce(t.Loc(0, "read"), 2*i))
				}
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			section := func(h *orwl.Handle, f func(b []byte) error) error { return h.Section(ctx, f) }
			nothing := func([]byte) error { return nil }
			for i := range read {
				if err := section(read[i], func(b []byte) error {
					if len(b) != hugemem.Threshold || b[0] != byte(i+1) || b[len(b)-1] != byte(i+1) {
						return fmt.Errorf("location %d: %d bytes, first %d, last %d; want %d, %d, %d", i, len(b), b[0], b[len(b)-1], hugemem.Threshold, i+1, i+1)
					}
					seen = append(seen, b)
					return nil
				}); err != nil {
					return err
				}
				if err := section(said[i], nothing); err != nil {
					return err
				}
			}
			for i := range fill {
				if i > 0 {
					if err := section(said[i-1], nothing); err != nil { // task 0 has read location i-1
						return err
					}
				}
				if err := section(fill[i], func(b []byte) error {
					b[0], b[len(b)-1] = byte(i+1), byte(i+1)
					return nil
				}); err != nil {
					return err
				}
			}
			for i, h := range again {
				if err := section(h, func(b []byte) error {
					b[0], b[len(b)-1] = byte(100+i), byte(100+i)
					return nil
				}); err != nil {
					return err
				}
			}
			for i, h := range reread {
				if err := section(h, func(b []byte) error {
					if b[0] != byte(100+i) || b[len(b)-1] != byte(100+i) {
						return fmt.Errorf("location %d again: first %d, last %d; want %d", 2*i, b[0], b[len(b)-1], 100+i)
					}
					seen = append(seen, b)
					return nil
				}); err != nil {
					return err
				}
			}
			if t.ID() == 1 { // its last one-shot read, of what task 0 said last
				return section(said[len(said)-1], nothing)
			}
			// A new request on a location whose mirror was given up: the grant brings the data
			// again, unchanged.
			h, err := t.ReadRequest(t.Loc(1, locs[2]))
			if err != nil {
				return err
			}
			return section(h, func(b []byte) error {
				if b[0] != 2 || b[len(b)-1] != 2 {
					return fmt.Errorf("location 1 requested again: first %d, last %d; want 2", b[0], b[len(b)-1])
				}
				seen = append(seen, b)
				return nil
			})
		})
	if err != nil {
		return err
	}
	if !remote {
		return nil
	}
	if want := recycleLocs + (recycleLocs+1)/2 + 1; len(seen) != want {
		return fmt.Errorf("task 0 read %d times, want %d", len(seen), want)
	}
	for i, b := range seen[:recycleLocs] {
		if &b[0] != &seen[0][0] {
			return fmt.Errorf("task 0 read location %d in another buffer than location 0's: a mirror was not given up", i)
		}
	}
	for _, b := range seen {
		if hugemem.Mapped(b) {
			return fmt.Errorf("a buffer of task 0's mirrors is still mapped after Run")
		}
	}
	return nil
}

// TestMirrorsRecycled: a mirror whose data changes before its process reads it again gives
// its buffer to the next mirror that needs one; every read sees its data, in one process
// and in two. The two copy what they read (ORWL_SHM=off), as processes of two hosts do:
// on one host they read in place (TestReadInPlaceOnOneHost).
func TestMirrorsRecycled(t *testing.T) {
	t.Run("1 process", func(t *testing.T) {
		if err := recycledMirrors(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("2 processes", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("mirrors are mapped on Linux only")
		}
		p := startScenario(t, "recycle", 2, nil, func(int) []string { return []string{"ORWL_SHM=off"} })
		outs, codes := p.wait()
		expectExitZero(t, outs, codes)
	})
}

func init() {
	scenarios["recycle"] = func() int {
		remote := os.Getenv("ORWL_RANK") == "0"
		if err := recycledMirrors(context.Background(), remote); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ok")
		return 0
	}
}
