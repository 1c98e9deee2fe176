package orwl_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// misuseSizes are the sizes the misuse tests give their location: one that the Go heap
// holds and one that is mapped outside it (internal/hugemem), which must behave alike.
var misuseSizes = []int{64, 4 << 20}

// onProcs runs fn as a job of cfg over procs processes (1: Run itself; else in this process,
// on loopback), each task on rank task%procs, and returns the error of the rank that runs
// task culprit.
func onProcs(t *testing.T, procs int, cfg orwl.Config, culprit int, fn orwl.TaskFunc) error {
	t.Helper()
	cfg.Place = func(task, procs int) int { return task % procs }
	if procs == 1 {
		return orwl.Run(context.Background(), cfg, fn)
	}
	return runProcs(t, context.Background(), procs, cfg, fn)[culprit%procs]
}

// eachShape runs check for every number of processes and size of misuseSizes, and requires
// that the error (with the size and the last offset left out) is the same for all of them.
func eachShape(t *testing.T, check func(t *testing.T, procs, size int) error) {
	var first string
	for _, procs := range []int{1, 2, 4} {
		for _, size := range misuseSizes {
			t.Run(fmt.Sprintf("%d procs %d bytes", procs, size), func(t *testing.T) {
				err := check(t, procs, size)
				if err == nil {
					t.Fatal("Run returned nil")
				}
				msg := strings.NewReplacer(fmt.Sprint(size-1), "LAST", fmt.Sprint(size), "SIZE").Replace(err.Error())
				if first == "" {
					first = msg
				} else if msg != first {
					t.Errorf("Run returned\n\t%s\nand with 1 process and %d bytes\n\t%s", msg, misuseSizes[0], first)
				}
			})
		}
	}
}

// TestWriteThroughReadHandleChecked: a write through the data of a read section is refused
// in a checked job, whether the location is in the reader's process (the owner's buffer) or
// not (its mirror), at every size, with the same error naming the task, the location, the
// position and the mistake; the owner's data is unchanged.
func TestWriteThroughReadHandleChecked(t *testing.T) {
	eachShape(t, func(t *testing.T, procs, size int) error {
		cfg := orwl.Config{Tasks: 4, Locations: []string{"x"}, Checked: orwl.CheckedOn}
		err := onProcs(t, procs, cfg, 1, func(ctx context.Context, task *orwl.Task) error {
			var w, again, r *orwl.Handle
			switch task.ID() {
			case 0:
				task.Scale("x", size)
				w = task.WriteInsertOnce(task.Loc(0, "x"), 0)
				again = task.WriteInsertOnce(task.Loc(0, "x"), 2) // after the read, not in its group
			case 1:
				r = task.ReadInsertOnce(task.Loc(0, "x"), 1)
			}
			if err := task.Schedule(ctx); err != nil {
				return err
			}
			switch task.ID() {
			case 0:
				if err := w.Section(ctx, func(b []byte) error { b[size-1] = 7; return nil }); err != nil {
					return err
				}
				return again.Section(ctx, func(b []byte) error {
					if b[size-1] != 7 {
						return fmt.Errorf("the owner reads %d, want 7", b[size-1])
					}
					return nil
				})
			case 1:
				return r.Section(ctx, func(b []byte) error { b[size-1] = 42; return nil })
			}
			return nil
		})
		if !errors.Is(err, orwl.ErrReadOnlyData) {
			t.Errorf("Run: %v, want ErrReadOnlyData", err)
		}
		want := fmt.Sprintf(`task 1: section of read handle on task 0 "x" (position 1): write through a read handle's data (byte %d of %d)`, size-1, size)
		if err != nil && !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Run: %v\nwant it to start with %s", err, want)
		}
		return err
	})
}

// TestStaleSliceAfterResizeChecked: in a checked job, the slice a write section had before
// Resize, written after it, fails the section with the same error at every size, in the
// owner's process and in another one (a mirror).
func TestStaleSliceAfterResizeChecked(t *testing.T) {
	eachShape(t, func(t *testing.T, procs, size int) error {
		cfg := orwl.Config{Tasks: 2, Locations: []string{"x"}, Checked: orwl.CheckedOn}
		err := onProcs(t, procs, cfg, 1, func(ctx context.Context, task *orwl.Task) error {
			var w *orwl.Handle
			if task.ID() == 0 {
				task.Scale("x", size)
			} else {
				w = task.WriteInsertOnce(task.Loc(0, "x"), 0)
			}
			if err := task.Schedule(ctx); err != nil || w == nil {
				return err
			}
			return w.Section(ctx, func(b []byte) error {
				if _, err := w.Resize(2 * size); err != nil {
					return err
				}
				b[size-1] = 42 // the slice of before Resize
				return nil
			})
		})
		if !errors.Is(err, orwl.ErrStaleData) {
			t.Errorf("Run: %v, want ErrStaleData", err)
		}
		want := fmt.Sprintf(`task 1: section of write handle on task 0 "x" (position 0): use of data after its release or a Resize (byte %d of %d)`, size-1, size)
		if err != nil && !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Run: %v\nwant it to start with %s", err, want)
		}
		return err
	})
}

// TestStaleSliceAfterResizeUnchecked: without checks, a write through the slice of before
// a growing Resize is lost at every size (it neither crashes nor reaches the data), in the
// owner's process and in another one.
func TestStaleSliceAfterResizeUnchecked(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, size := range misuseSizes {
			t.Run(fmt.Sprintf("%d procs %d bytes", procs, size), func(t *testing.T) {
				cfg := orwl.Config{Tasks: 2, Locations: []string{"x"}, Checked: orwl.CheckedOff}
				err := onProcs(t, procs, cfg, 1, func(ctx context.Context, task *orwl.Task) error {
					var w, r *orwl.Handle
					if task.ID() == 0 {
						task.Scale("x", size)
						r = task.ReadInsertOnce(task.Loc(0, "x"), 1)
					} else {
						w = task.WriteInsertOnce(task.Loc(0, "x"), 0)
					}
					if err := task.Schedule(ctx); err != nil {
						return err
					}
					if w != nil {
						return w.Section(ctx, func(b []byte) error {
							b[0] = 7
							if _, err := w.Resize(2 * size); err != nil {
								return err
							}
							b[0] = 42 // the slice of before Resize
							return nil
						})
					}
					return r.Section(ctx, func(b []byte) error {
						if len(b) != 2*size || b[0] != 7 {
							return fmt.Errorf("the reader sees %d bytes, first %d; want %d, 7", len(b), b[0], 2*size)
						}
						return nil
					})
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// readSink keeps a read that a test makes for its fault.
var readSink byte

// TestMapAfterRunChecked: in a checked job, a slice from Map used after Run returns faults at
// every size (here made a panic with debug.SetPanicOnFault, as on a task's goroutine).
func TestMapAfterRunChecked(t *testing.T) {
	for _, size := range misuseSizes {
		t.Run(fmt.Sprint(size, " bytes"), func(t *testing.T) {
			var kept []byte
			err := orwl.Run(context.Background(), orwl.Config{Tasks: 1, Locations: []string{"x"}, Checked: orwl.CheckedOn},
				func(ctx context.Context, task *orwl.Task) error {
					task.Scale("x", size)
					w := task.WriteInsertOnce(task.Loc(0, "x"), 0)
					if err := task.Schedule(ctx); err != nil {
						return err
					}
					return w.Section(ctx, func(b []byte) error { kept = b; return nil })
				})
			if err != nil {
				t.Fatal(err)
			}
			faulted := func(use func()) (p any) {
				defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
				defer func() { p = recover() }()
				use()
				return nil
			}
			if p := faulted(func() { kept[size-1] = 1 }); p == nil {
				t.Error("a write through the slice after Run did not fault")
			}
			if p := faulted(func() { readSink = kept[0] }); p == nil {
				t.Error("a read through the slice after Run did not fault")
			}
		})
	}
}

// TestMisuseOutsideSectionChecked: the same misuses outside a Section (Acquire, Map, Resize,
// Release) fail the task, naming the handle when the data is one it holds, at every size
// and number of processes.
func TestMisuseOutsideSectionChecked(t *testing.T) {
	cases := []struct {
		name, want string
		target     error
		mode       orwl.Mode
		misuse     func(h *orwl.Handle, size int)
	}{
		{"write through read data", `orwl: task 1: use of the data of read handle on task 0 "x" (position 0): write through a read handle's data (byte LAST of SIZE)`,
			orwl.ErrReadOnlyData, orwl.Read, func(h *orwl.Handle, size int) { h.Map()[size-1] = 42 }},
		{"stale after resize", `orwl: task 1: use of data after its release or a Resize (byte LAST of SIZE)`,
			orwl.ErrStaleData, orwl.Write, func(h *orwl.Handle, size int) {
				b := h.Map()
				h.Resize(2 * size)
				b[size-1] = 42
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachShape(t, func(t *testing.T, procs, size int) error {
				cfg := orwl.Config{Tasks: 2, Locations: []string{"x"}, Checked: orwl.CheckedOn}
				err := onProcs(t, procs, cfg, 1, func(ctx context.Context, task *orwl.Task) error {
					var h *orwl.Handle
					if task.ID() == 0 {
						task.Scale("x", size)
					} else if c.mode == orwl.Read {
						h = task.ReadInsertOnce(task.Loc(0, "x"), 0)
					} else {
						h = task.WriteInsertOnce(task.Loc(0, "x"), 0)
					}
					if err := task.Schedule(ctx); err != nil || h == nil {
						return err
					}
					if err := h.Acquire(ctx); err != nil {
						return err
					}
					c.misuse(h, size)
					return h.Release()
				})
				if !errors.Is(err, c.target) {
					t.Errorf("Run: %v, want %v", err, c.target)
				}
				if err == nil {
					return nil
				}
				first, _, _ := strings.Cut(err.Error(), "\n") // then the stack
				first = strings.NewReplacer(fmt.Sprint(size-1), "LAST", fmt.Sprint(size), "SIZE").Replace(first)
				if !strings.HasPrefix(first, c.want) {
					t.Errorf("Run: %s\nwant it to start with %s", first, c.want)
				}
				return errors.New(first)
			})
		})
	}
}
