package orwl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// TestSectionWhoseFunctionReleasedFails: a write section whose function released (or closed)
// the handle itself and then failed has no grant left to fail: it returns the function's
// error, it does not panic on the grant it no longer holds.
func TestSectionWhoseFunctionReleasedFails(t *testing.T) {
	boom := errors.New("boom")
	for _, end := range []string{"release", "close"} {
		t.Run(end, func(t *testing.T) {
			err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
				w := task.WriteInsert(task.Loc(0, "block"), 0)
				if err := task.Schedule(ctx); err != nil {
					return err
				}
				return w.Section(ctx, func([]byte) error {
					if end == "release" {
						_ = w.Release()
					} else {
						_ = w.Close()
					}
					return boom
				})
			})
			if !errors.Is(err, boom) {
				t.Fatalf("Run returned %v, want boom", err)
			}
		})
	}
}

// TestGroupOrder: a group acquires its handles in its order, hands fn their data in that
// order, and releases them all.
func TestGroupOrder(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		task.Scale("block", 16)
		task.Scale("bound", 8)
		g := orwl.Group{task.WriteInsert(task.Loc(0, "block"), 0), task.ReadInsert(task.Loc(0, "bound"), 0)}
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		for range 3 {
			if err := g.Section(ctx, func(data [][]byte) error {
				if len(data) != 2 || len(data[0]) != 16 || len(data[1]) != 8 {
					t.Errorf("data of %d handles, sizes %d and %d: want 16 (block) then 8 (bound)", len(data), len(data[0]), len(data[1]))
				}
				orwl.Float64s(data[0])[1]++
				return nil
			}); err != nil {
				return err
			}
			if g[0].Map() != nil || g[1].Map() != nil {
				t.Error("a handle is still held after the group's section")
			}
		}
		if err := g.Acquire(ctx); err != nil {
			return err
		}
		if got := orwl.Float64s(g[0].Map())[1]; got != 3 {
			t.Errorf("block[1] = %v after 3 sections, want 3", got)
		}
		return g.Release()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupAcquireFailureReleases: when a handle of a group fails to acquire, those before
// it were acquired, and are released; those after it were not touched. The error names the
// handle that failed.
func TestGroupAcquireFailureReleases(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		before := task.WriteInsertOnce(task.Loc(0, "block"), 0)
		failing := task.ReadInsert(task.Loc(0, "bound"), 0)
		after := task.ReadInsertOnce(task.Loc(0, "bound"), 0)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if err := failing.Close(); err != nil {
			return err
		}
		err := orwl.Group{before, failing, after}.Acquire(ctx)
		wantErr(t, err, orwl.ErrClosed, "acquire of read handle", `task 0 "bound" (position 0)`)
		if before.Map() != nil {
			t.Error("the handle acquired before the failing one is still held")
		}
		// before was acquired (a one-shot handle serves once), after was not.
		if err := before.Acquire(ctx); !errors.Is(err, orwl.ErrNotRequested) {
			t.Errorf("acquire of the one-shot handle before the failing one: %v, want ErrNotRequested", err)
		}
		return after.Section(ctx, func([]byte) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupReleaseJoinsErrors: Release releases every handle, the last first, and joins
// their errors; a nil handle is an error naming its place.
func TestGroupReleaseJoinsErrors(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		block := task.WriteInsert(task.Loc(0, "block"), 0)
		bound := task.ReadInsert(task.Loc(0, "bound"), 0)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		err := orwl.Group{block, bound}.Release()
		wantErr(t, err, orwl.ErrNotHeld, `release of read handle on task 0 "bound"`, `release of write handle on task 0 "block"`)
		if err != nil && strings.Index(err.Error(), `"bound"`) > strings.Index(err.Error(), `"block"`) {
			t.Errorf("release errors %q: want the last handle's first", err)
		}
		if err := bound.Acquire(ctx); err != nil { // one error alone is the handle's own
			return err
		}
		var he *orwl.HandleError
		if err := (orwl.Group{block, bound}).Release(); !errors.As(err, &he) || he.Op != "release" || he.Location != `task 0 "block"` {
			t.Errorf("release of a group whose first handle is not held: %v, want that handle's *HandleError", err)
		}
		if bound.Map() != nil {
			t.Error("the held handle was not released")
		}
		for _, g := range []orwl.Group{{block, nil}, {nil}} {
			wantErr(t, g.Acquire(ctx), nil, "handle", "of the group", "is nil")
			wantErr(t, g.Release(), nil, "is nil")
			wantErr(t, g.Section(ctx, func([][]byte) error { return nil }), nil, "is nil")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupFailedWriteSection: when a group's fn fails, its read handles are released and
// its write handles fail their locations, as in Handle.Section: whoever waits on them gets
// an error naming the handle and fn's error. A panic does the same and goes on.
func TestGroupFailedWriteSection(t *testing.T) {
	boom := errors.New("boom")
	for _, panics := range []bool{false, true} {
		t.Run(map[bool]string{false: "error", true: "panic"}[panics], func(t *testing.T) {
			var nextWrite error // task 1's write after task 0's read of the group
			err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
				task.Scale("block", 8)
				task.Scale("bound", 8)
				if task.ID() == 0 {
					g := orwl.Group{task.WriteInsert(task.Loc(0, "block"), 0), task.ReadInsert(task.Loc(1, "bound"), 0)}
					if err := task.Schedule(ctx); err != nil {
						return err
					}
					err := g.Section(ctx, func(data [][]byte) error {
						data[0][0] = 0xff // half written
						if panics {
							panic("kaboom")
						}
						return boom
					})
					if !errors.Is(err, boom) {
						t.Errorf("group section: %v, want boom", err)
					}
					if err := g[0].Acquire(ctx); !errors.Is(err, orwl.ErrClosed) {
						t.Errorf("acquire of the failed write handle: %v, want ErrClosed", err)
					}
					return nil // the location fails with the section's own error
				}
				boundW := task.WriteInsert(task.Loc(1, "bound"), 1)
				blockR := task.ReadInsert(task.Loc(0, "block"), 1)
				if err := task.Schedule(ctx); err != nil {
					return err
				}
				nextWrite = boundW.Section(ctx, func([]byte) error { return nil })
				return blockR.Section(ctx, func([]byte) error {
					t.Error("the half-written block was handed on")
					return nil
				})
			})
			if panics {
				wantErr(t, err, nil, "task 0 panicked: kaboom")
				return
			}
			if nextWrite != nil {
				t.Errorf("write after the group's read handle: %v, want it released", nextWrite)
			}
			wantErr(t, err, boom, `task 0's write handle on task 0 "block" (position 0): its write section failed: boom`)
		})
	}
}

// TestGroupCancelled: a group whose context ends while it waits fails with the context's
// error and holds nothing; the other tasks go on.
func TestGroupCancelled(t *testing.T) {
	cancelled := make(chan context.CancelFunc, 1)
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		if task.ID() == 0 { // holds its bound until task 1's group is cancelled
			boundW := task.WriteInsert(task.Loc(0, "bound"), 0)
			blockR := task.ReadInsert(task.Loc(1, "block"), 2)
			if err := task.Schedule(ctx); err != nil {
				return err
			}
			if err := boundW.Section(ctx, func([]byte) error { (<-cancelled)(); return nil }); err != nil {
				return err
			}
			// Granted only once task 1's group gave its write on task 1's block back.
			return blockR.Section(ctx, func([]byte) error { return nil })
		}
		g := orwl.Group{task.WriteInsert(task.Loc(1, "block"), 1), task.ReadInsert(task.Loc(0, "bound"), 1)}
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		gctx, cancel := context.WithCancel(ctx)
		cancelled <- cancel
		err := g.Section(gctx, func([][]byte) error {
			t.Error("the cancelled group's section ran")
			return nil
		})
		wantErr(t, err, context.Canceled, "task 1: acquire of")
		if g[0].Map() != nil || g[1].Map() != nil {
			t.Error("the cancelled group holds a handle")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupMisuseChecked: in a checked job, a write through the data of a group's read
// handle is fn's error naming that handle, as in Handle.Section; the data is unchanged.
func TestGroupMisuseChecked(t *testing.T) {
	for _, size := range []int{64, 4 << 20} { // in the Go heap, and mapped outside it
		cfg := orwl.Config{Tasks: 1, Locations: twoLocs, Checked: orwl.CheckedOn}
		err := orwl.Run(context.Background(), cfg, func(ctx context.Context, task *orwl.Task) error {
			task.Scale("block", size)
			task.Scale("bound", size)
			g := orwl.Group{task.WriteInsert(task.Loc(0, "block"), 0), task.ReadInsert(task.Loc(0, "bound"), 0)}
			if err := task.Schedule(ctx); err != nil {
				return err
			}
			err := g.Section(ctx, func(data [][]byte) error {
				data[0][size-1] = 1 // allowed
				data[1][size-1] = 7 // refused
				return nil
			})
			wantErr(t, err, orwl.ErrReadOnlyData, `task 0: section of read handle on task 0 "bound" (position 0)`)
			if err := g[1].Section(ctx, func(b []byte) error {
				if b[size-1] != 0 {
					t.Errorf("%d bytes: the read handle's data was changed to %d", size, b[size-1])
				}
				return nil
			}); err != nil {
				return err
			}
			if err := g[0].Acquire(ctx); !errors.Is(err, orwl.ErrClosed) {
				t.Errorf("%d bytes: the group's write handle after the misuse: %v, want ErrClosed", size, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
