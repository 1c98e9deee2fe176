package orwl_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// holdUntil is task 0 of the two tests below: it holds its write grant on its block until
// release is closed, then returns (its queued next round is cancelled).
func holdUntil(ctx context.Context, w *orwl.Handle, held, release chan struct{}) error {
	return w.Section(ctx, func([]byte) error { close(held); <-release; return nil })
}

// TestAcquireWaitBoundedByTest: Acquire's doc says how to wait a bounded time without
// losing the handle: poll Test, and Acquire once it reports true.
func TestAcquireWaitBoundedByTest(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		w := task.WriteInsert(task.Loc(0, "block"), task.ID())
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 0 {
			return holdUntil(ctx, w, held, release)
		}
		<-held
		if w.Test() {
			t.Error("Test reports a grant that task 0 holds")
		}
		close(release)
		for deadline := time.Now().Add(10 * time.Second); !w.Test(); runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatal("Test never reported the grant that task 0 released")
			}
		}
		return w.Section(ctx, func([]byte) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAcquireTimeoutThenNewRequest: a timed-out Acquire closes the handle; a new request
// (WriteRequest) is the way to go on, as Acquire's doc says.
func TestAcquireTimeoutThenNewRequest(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		w := task.WriteInsert(task.Loc(0, "block"), task.ID())
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 0 {
			return holdUntil(ctx, w, held, release)
		}
		<-held
		tctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		if err := w.Acquire(tctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("acquire with a deadline while task 0 holds: %v", err)
		}
		if err := w.Acquire(ctx); !errors.Is(err, orwl.ErrClosed) {
			t.Errorf("acquire after the time-out: %v, want ErrClosed", err)
		}
		again, err := task.WriteRequest(task.Loc(0, "block"))
		if err != nil {
			return err
		}
		close(release)
		return again.Section(ctx, func([]byte) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
}
