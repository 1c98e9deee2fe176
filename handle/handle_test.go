package handle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// queue is a minimal Queue over one FIFO and one buffer: operations under a lock, grants
// delivered to the tickets' latches after it, as the runtime does.
type queue struct {
	mu      sync.Mutex
	f       fifo.FIFO
	data    []byte
	made    int      // tickets allocated
	refuse  error    // when set, Request fails with it
	release int      // releases of grants, given back or not
	failed  error    // set by a failed grant: nothing is granted any more
	waiting func()   // when set, called by Ticket.Waiting
	traced  []string // the events its tickets were told (Ticket.Traced), by name
}

type ticket struct {
	req   fifo.Request
	latch handle.Latch
	q     *queue
}

func (q *queue) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	if q.refuse != nil {
		return nil, q.refuse
	}
	t, _ := reuse.(*ticket)
	if t == nil {
		t = &ticket{q: q}
		t.req.Tag = t
		q.made++
	}
	t.latch.Start()
	q.mu.Lock()
	if q.failed != nil {
		q.mu.Unlock()
		return nil, q.failed
	}
	granted, err := q.f.Enqueue(&t.req, h.Mode(), nil)
	q.mu.Unlock()
	deliver(granted)
	return t, err
}

func deliver(granted []*fifo.Request) {
	for _, r := range granted {
		r.Tag.(*ticket).latch.Grant()
	}
}

func (t *ticket) Latch() *handle.Latch { return &t.latch }
func (t *ticket) Waiting(context.Context) {
	if t.q.waiting != nil {
		t.q.waiting()
	}
}
func (t *ticket) Granted() bool {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.q.failed == nil && t.req.State() == fifo.Granted
}
func (t *ticket) Data() []byte { return t.q.data }

func (t *ticket) Traced(_ *handle.Handle, e handle.Event) {
	t.q.traced = append(t.q.traced, []string{"request", "wait", "wait end", "acquire", "release"}[e])
}
func (t *ticket) Resize(n int) ([]byte, error) {
	t.q.data = make([]byte, n)
	return t.q.data, nil
}

func (t *ticket) Release() error {
	t.q.mu.Lock()
	granted, err := t.q.f.Release(&t.req, nil)
	t.q.release++
	t.q.mu.Unlock()
	deliver(granted)
	return err
}

func (t *ticket) Fail(err error) {
	t.q.mu.Lock()
	t.q.failed = err
	var waiting []*ticket
	t.q.f.Each(func(r *fifo.Request) { waiting = append(waiting, r.Tag.(*ticket)) })
	t.q.mu.Unlock()
	for _, w := range waiting {
		w.latch.Fail(err)
	}
}

func (t *ticket) Cancel() {
	t.latch.Cancel()
	t.q.mu.Lock()
	if t.req.State() == fifo.Granted {
		t.q.release++
	}
	granted := t.q.f.Cancel(&t.req, nil)
	t.q.mu.Unlock()
	deliver(granted)
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

// TestFailedSection: a read section that fails releases its grant as usual; a write section
// that fails or panics hands nothing on (the data may be half-written): whoever waits on the
// location, or comes later, gets an error naming the handle and the cause.
func TestFailedSection(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	q := &queue{data: make([]byte, 8)}
	r := newHandle(q, fifo.Read, true)
	if err := r.Request(); err != nil {
		t.Fatal(err)
	}
	if err := r.Section(ctx, func([]byte) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("read section: %v", err)
	}
	if r.Map() != nil || !r.Test() {
		t.Fatal("the failed read section did not release")
	}

	for _, panics := range []bool{false, true} {
		q := &queue{data: make([]byte, 8)}
		w := newHandle(q, fifo.Write, true)
		next := newHandle(q, fifo.Read, false)
		if err := w.Request(); err != nil {
			t.Fatal(err)
		}
		if err := next.Request(); err != nil {
			t.Fatal(err)
		}
		var err error
		func() {
			defer func() { recover() }()
			err = w.Section(ctx, func(b []byte) error {
				b[0] = 0xff // half-written
				if panics {
					panic("kaboom")
				}
				return boom
			})
		}()
		if !panics && !errors.Is(err, boom) {
			t.Fatalf("write section: %v", err)
		}
		err = next.Acquire(ctx)
		// This queue fails its location at once; the runtime's waits for the owner's end.
		want := "task 1's write handle on x (position 0): its write section failed: "
		if err == nil || !strings.Contains(err.Error(), want) || !panics && !errors.Is(err, boom) {
			t.Fatalf("panics=%v: the next request got %v, want the section's failure", panics, err)
		}
		if w.Active() || w.Map() != nil {
			t.Fatal("the failed write handle still holds or queues something")
		}
		if err := w.Request(); !errors.Is(err, handle.ErrClosed) {
			t.Fatalf("request on the failed write handle: %v, want ErrClosed", err)
		}
		if err := newHandle(q, fifo.Read, false).Request(); err == nil {
			t.Fatal("a later request on the failed location succeeded")
		}
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

// ownErr is the error type of an owner that makes its handles' errors itself.
type ownErr struct {
	op   string
	spec handle.Spec
	err  error
}

func (e *ownErr) Error() string { return e.op + ": " + e.err.Error() }
func (e *ownErr) Unwrap() error { return e.err }

// TestOwnerMakesTheErrors: the errors of an owner's handles, a closed one's included, are
// those its NewOwner function makes, wrapping the cause.
func TestOwnerMakesTheErrors(t *testing.T) {
	o := handle.NewOwner(false, func(op string, s handle.Spec, err error) error { return &ownErr{op, s, err} })
	spec := handle.Spec{Task: 3, Location: "x", Pos: 2, Mode: fifo.Read}
	mistake := errors.New("no such location")
	for _, c := range []struct {
		err   error
		op    string
		cause error
	}{
		{handle.New(&queue{}, spec, o).Release(), "release", handle.ErrNotHeld},
		{handle.Closed(spec, mistake, o).Acquire(context.Background()), "acquire", mistake},
	} {
		e, ok := errors.AsType[*ownErr](c.err)
		if !ok || e.op != c.op || e.spec != spec || !errors.Is(c.err, c.cause) {
			t.Errorf("error %#v, want the owner's, of %s, wrapping %v", c.err, c.op, c.cause)
		}
	}
}

// TestAcquireFailsOnDoneContextEvenWhenGranted: rule 5 as in x/sync/semaphore. A task looping
// on an uncontended handle must see its context end.
func TestAcquireFailsOnDoneContextEvenWhenGranted(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	h := newHandle(q, fifo.Write, true)
	other := newHandle(q, fifo.Write, true)
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	if err := other.Request(); err != nil {
		t.Fatal(err)
	}
	if !h.Test() {
		t.Fatal("h is not granted")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop")
	cancel(stop)
	err := h.Acquire(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, stop) {
		t.Fatalf("acquire with a done context: %v, want context.Canceled and its cause", err)
	}
	if h.Map() != nil || h.Active() {
		t.Fatal("the handle holds or queues something after a failed acquire")
	}
	if err := h.Acquire(context.Background()); !errors.Is(err, handle.ErrClosed) {
		t.Fatalf("acquire after the failed one: %v, want ErrClosed", err)
	}
	if !other.Test() {
		t.Fatal("the FIFO did not move on: the grant was not given back")
	}
}

// TestFailedReRequestHoldsNothing: an iterative Acquire whose re-request fails returns the
// error holding nothing, so that the location is not left blocked.
func TestFailedReRequestHoldsNothing(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	h := newHandle(q, fifo.Write, true)
	other := newHandle(q, fifo.Write, true)
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	if err := other.Request(); err != nil {
		t.Fatal(err)
	}
	q.refuse = errors.New("queue refuses")
	err := h.Acquire(context.Background())
	if !errors.Is(err, q.refuse) {
		t.Fatalf("acquire: %v, want the queue's refusal", err)
	}
	if h.Map() != nil || h.Active() {
		t.Fatal("the handle holds something after a failed acquire")
	}
	if err := h.Section(context.Background(), func([]byte) error { return nil }); !errors.Is(err, handle.ErrClosed) {
		t.Fatalf("section after the failure: %v, want ErrClosed", err)
	}
	if !other.Test() {
		t.Fatal("the location stays blocked after the failed acquire")
	}
}

// TestFailedRequestFailsAcquire: a request its queue fails (a failed job, a lost owner)
// makes the waiting Acquire return the queue's error, and the handle is closed.
func TestFailedRequestFailsAcquire(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	holder := newHandle(q, fifo.Write, false)
	h := newHandle(q, fifo.Read, true)
	for _, x := range []*handle.Handle{holder, h} {
		if err := x.Request(); err != nil {
			t.Fatal(err)
		}
	}
	if err := holder.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("owner lost")
	done := make(chan error)
	go func() { done <- h.Acquire(context.Background()) }()
	q.mu.Lock()
	var pending *ticket
	q.f.Each(func(r *fifo.Request) {
		if r.State() == fifo.Queued {
			pending = r.Tag.(*ticket)
		}
	})
	q.mu.Unlock()
	pending.latch.Fail(lost)
	if err := <-done; !errors.Is(err, lost) {
		t.Fatalf("acquire of a failed request: %v, want the failure", err)
	}
	if h.Active() || h.Map() != nil {
		t.Fatal("the handle holds or queues something after its request failed")
	}
}

// TestOwnerHoldsWhatIsInUse: an owner's set has every handle that holds or queues a request
// and nothing else, however many handles come and go, and a re-requested one-shot handle is
// back in it (rule 8 for every handle ever made).
func TestOwnerHoldsWhatIsInUse(t *testing.T) {
	q := &queue{data: make([]byte, 8)}
	g := handle.NewOwner(false, nil)
	ctx := context.Background()
	iter := handle.New(q, handle.Spec{Task: 1, Location: "x", Mode: fifo.Read, Iterative: true}, g)
	if err := iter.Request(); err != nil {
		t.Fatal(err)
	}
	var reused *handle.Handle
	for i := range 1000 {
		h := handle.New(q, handle.Spec{Task: 1, Location: "x", Mode: fifo.Read}, g)
		if err := h.Request(); err != nil {
			t.Fatal(err)
		}
		if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			reused = h
		}
	}
	if g.Len() != 1 {
		t.Fatalf("the owner has %d handles, want the one iterative handle", g.Len())
	}
	if err := reused.Request(); err != nil {
		t.Fatal(err)
	}
	if g.Len() != 2 {
		t.Fatalf("the owner has %d handles after a re-request, want 2", g.Len())
	}
	if err := iter.Acquire(ctx); err != nil { // holds one grant, has queued the next
		t.Fatal(err)
	}
	if err := g.CloseAll(); err != nil {
		t.Fatal(err)
	}
	if g.Len() != 0 || iter.Active() || reused.Active() {
		t.Fatal("CloseAll left handles in use")
	}
	w := newHandle(q, fifo.Write, false)
	if err := w.Request(); err != nil {
		t.Fatal(err)
	}
	if !w.Test() {
		t.Fatal("the location is still held after CloseAll")
	}
}

// TestCancellationBeforeGrantWins: a waiter parked in Acquire whose context ends before the
// holder releases must give the grant back and fail, however the two wake-ups interleave.
// The holder cancels, then releases (so the cancellation happens before the grant).
func TestCancellationBeforeGrantWins(t *testing.T) {
	const runs = 2000
	wrong := 0
	for range runs {
		q := &queue{data: make([]byte, 8)}
		holder := newHandle(q, fifo.Write, false)
		waiter := newHandle(q, fifo.Write, false)
		next := newHandle(q, fifo.Write, false)
		for _, h := range []*handle.Handle{holder, waiter, next} {
			if err := h.Request(); err != nil {
				t.Fatal(err)
			}
		}
		if err := holder.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- waiter.Acquire(ctx) }()
		cancel()
		if err := holder.Release(); err != nil {
			t.Fatal(err)
		}
		err := <-done
		switch {
		case err == nil:
			wrong++
		case !errors.Is(err, context.Canceled):
			t.Fatalf("acquire whose context ended before the grant: %v, want context.Canceled", err)
		case waiter.Map() != nil || waiter.Active():
			t.Fatal("the waiter holds or queues something after its cancelled acquire")
		case !next.Test():
			t.Fatal("the grant was not given back: the next request is not granted")
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d acquires whose context ended before the grant returned the grant", wrong, runs)
	}
}

// TestTracedAndWaiting: a handle that blocks tells its ticket (Ticket.Waiting) once, before
// it sleeps, whether it is traced or not, and the ticket of a traced owner's handle is told
// every step (Ticket.Traced), in order; an untraced one is told none.
func TestTracedAndWaiting(t *testing.T) {
	section := func(traced bool) (got, events []string) {
		q := &queue{data: make([]byte, 8)}
		ctx := context.Background()
		first := handle.New(q, handle.Spec{Task: 0, Location: "x", Mode: fifo.Write}, nil)
		h := handle.New(q, handle.Spec{Task: 1, Location: "x", Mode: fifo.Write}, handle.NewOwner(traced, nil))
		if err := first.Request(); err != nil {
			t.Fatal(err)
		}
		if err := h.Request(); err != nil {
			t.Fatal(err)
		}
		q.waiting = func() { // h blocks behind first: first's section lets it in
			got = append(got, "waiting")
			if err := first.Section(ctx, func([]byte) error { return nil }); err != nil {
				t.Error(err)
			}
		}
		if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		return got, q.traced
	}
	got, events := section(false)
	if want := []string{"waiting"}; !slices.Equal(got, want) {
		t.Errorf("untraced: the ticket was told %q, want %q", got, want)
	}
	if len(events) > 0 {
		t.Errorf("untraced: the tickets were told the events %q", events)
	}
	got, events = section(true)
	if want := []string{"waiting"}; !slices.Equal(got, want) {
		t.Errorf("traced: the ticket was told %q, want %q", got, want)
	}
	if want := []string{"request", "wait", "wait end", "acquire", "release"}; !slices.Equal(events, want) {
		t.Errorf("traced: the ticket was told the events %q, want %q", events, want)
	}
}
