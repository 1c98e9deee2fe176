package handle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// queue is a minimal Queue over one FIFO and one buffer.
type queue struct {
	f    fifo.FIFO
	data []byte
	made int // tickets allocated
}

type ticket struct {
	fifo.Request
	q *queue
}

func (t *ticket) Data() []byte { return t.q.data }
func (t *ticket) Resize(n int) ([]byte, error) {
	t.q.data = make([]byte, n)
	return t.q.data, nil
}

func (q *queue) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	t, _ := reuse.(*ticket)
	if t == nil {
		t = &ticket{q: q}
		q.made++
	}
	return t, q.f.Enqueue(&t.Request, h.Mode(), nil)
}

func newHandle(q *queue, mode fifo.Mode, iterative bool) *handle.Handle {
	return handle.New(q, handle.Spec{Task: 1, Location: "x", Mode: mode, Iterative: iterative}, nil)
}

func TestIterativeRequestsAtAcquire(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	w := newHandle(q, fifo.Write, true)
	r := newHandle(q, fifo.Read, true)
	ctx := context.Background()
	for _, h := range []*handle.Handle{w, r} {
		if err := h.Request(); err != nil {
			t.Fatal(err)
		}
	}
	if !w.Test() || r.Test() {
		t.Fatalf("Test: writer %v reader %v, want true false", w.Test(), r.Test())
	}
	for i := range 5 {
		if err := w.Section(ctx, func(b []byte) error { b[0] = byte(i); return nil }); err != nil {
			t.Fatal(err)
		}
		if w.Test() {
			t.Fatal("the writer's next iteration is granted before the reader's turn")
		}
		if err := r.Section(ctx, func(b []byte) error {
			if b[0] != byte(i) {
				t.Errorf("iteration %d: reader sees %d", i, b[0])
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if q.made != 4 { // two tickets per handle, reused in turn
		t.Errorf("%d tickets made, want 4", q.made)
	}
}

func TestOneShotServesOnce(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	h := newHandle(q, fifo.Write, false)
	ctx := context.Background()
	if err := h.Acquire(ctx); !errors.Is(err, handle.ErrNotRequested) {
		t.Fatalf("acquire before request: %v", err)
	}
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	if err := h.Request(); !errors.Is(err, handle.ErrRequested) {
		t.Fatalf("second request: %v", err)
	}
	if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if h.Active() {
		t.Fatal("a used one-shot handle is still active")
	}
	if err := h.Acquire(ctx); !errors.Is(err, handle.ErrNotRequested) {
		t.Fatalf("second acquire: %v", err)
	}
}

func TestCloseReleasesAndCancels(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	a := newHandle(q, fifo.Write, true)
	b := newHandle(q, fifo.Write, true)
	for _, h := range []*handle.Handle{a, b} {
		if err := h.Request(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // releases the grant and cancels the next iteration
		t.Fatal(err)
	}
	if !b.Test() {
		t.Fatal("b is not granted after a closed")
	}
	if err := b.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if !b.Test() {
		t.Fatal("b's next iteration waits on a's cancelled request")
	}
	if err := a.Release(); !errors.Is(err, handle.ErrClosed) {
		t.Fatalf("release after close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestSectionReleasesOnError(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	h := newHandle(q, fifo.Write, true)
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := h.Section(context.Background(), func([]byte) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("section: %v", err)
	}
	if h.Map() != nil || !h.Test() {
		t.Fatal("the failed section did not release")
	}
}

func TestErrorNamesTaskLocationPosition(t *testing.T) {
	q := &queue{}
	h := handle.New(q, handle.Spec{Task: 3, Location: `task 5 "bound"`, Pos: 2, Mode: fifo.Read}, nil)
	err := h.Release()
	want := `task 3: release of read handle on task 5 "bound" (position 2): not acquired`
	if err == nil || err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	var he *handle.Error
	if !errors.As(err, &he) || he.Op != "release" {
		t.Fatalf("error is not a *handle.Error with Op release: %#v", err)
	}
}
