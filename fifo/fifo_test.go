package fifo

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func enqueue(t *testing.T, f *FIFO, m Mode) *Request {
	t.Helper()
	r := &Request{}
	if err := f.Enqueue(r, m, nil); err != nil {
		t.Fatalf("enqueue %v: %v", m, err)
	}
	return r
}

func states(rs ...*Request) []State {
	s := make([]State, len(rs))
	for i, r := range rs {
		s[i] = r.State()
	}
	return s
}

func wantStates(t *testing.T, rs []*Request, want ...State) {
	t.Helper()
	got := states(rs...)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("states = %v, want %v", got, want)
		}
	}
}

func TestRules(t *testing.T) {
	G, Q, I := Granted, Queued, Idle
	tests := []struct {
		name  string
		modes []Mode
		// after enqueueing modes in order, release these indexes one by one
		release []int
		want    []State
	}{
		{"empty FIFO grants at once", []Mode{Write}, nil, []State{G}},
		{"adjacent reads granted together", []Mode{Read, Read, Read}, nil, []State{G, G, G}},
		{"write is exclusive", []Mode{Write, Write, Read}, nil, []State{G, Q, Q}},
		{"read joins a granted read group", []Mode{Read, Read}, nil, []State{G, G}},
		{"reads never join across a write", []Mode{Read, Write, Read}, nil, []State{G, Q, Q}},
		{"group leaves only when all released", []Mode{Read, Read, Write}, []int{0}, []State{I, G, Q}},
		{"next entry granted as a whole", []Mode{Write, Read, Read, Write}, []int{0}, []State{I, G, G, Q}},
		{"write after group", []Mode{Read, Read, Write}, []int{1, 0}, []State{I, I, G}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f FIFO
			var rs []*Request
			for _, m := range tc.modes {
				rs = append(rs, enqueue(t, &f, m))
			}
			for _, i := range tc.release {
				if err := rs[i].Release(); err != nil {
					t.Fatalf("release %d: %v", i, err)
				}
			}
			wantStates(t, rs, tc.want...)
		})
	}
}

func TestReadJoinsGroupAfterMemberReleased(t *testing.T) {
	var f FIFO
	a, b := enqueue(t, &f, Read), enqueue(t, &f, Read)
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	// b still holds: the group is the tail, so a new read joins it and is granted at once
	// (rule 2; an iterative reader re-acquiring its own group, rule 6).
	if err := f.Enqueue(a, Read, nil); err != nil {
		t.Fatal(err)
	}
	wantStates(t, []*Request{a, b}, Granted, Granted)
	w := enqueue(t, &f, Write)
	for _, r := range []*Request{a, b} {
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
	}
	wantStates(t, []*Request{w}, Granted)
}

func TestCancelPendingReleasesWhenGranted(t *testing.T) {
	var f FIFO
	w1 := enqueue(t, &f, Write)
	r := enqueue(t, &f, Read)
	w2 := enqueue(t, &f, Write)
	r.Cancel()
	wantStates(t, []*Request{w1, r, w2}, Granted, Cancelled, Queued)
	if err := w1.Release(); err != nil {
		t.Fatal(err)
	}
	// r was granted and released on the spot: w2 moves up.
	wantStates(t, []*Request{w1, r, w2}, Idle, Idle, Granted)
}

func TestMisuse(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	r := enqueue(t, &f, Read)
	if err := r.Release(); !errors.Is(err, ErrNotGranted) {
		t.Errorf("release of queued request: %v, want ErrNotGranted", err)
	}
	if err := f.Enqueue(w, Write, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("enqueue of granted request: %v, want ErrBusy", err)
	}
	if err := f.Enqueue(&Request{}, Mode(9), nil); !errors.Is(err, ErrMode) {
		t.Errorf("enqueue with mode 9: %v, want ErrMode", err)
	}
	if err := (&Request{}).Release(); !errors.Is(err, ErrNotGranted) {
		t.Errorf("release of new request: %v, want ErrNotGranted", err)
	}
	if err := (&Request{}).Wait(context.Background()); !errors.Is(err, ErrNotQueued) {
		t.Errorf("wait of new request: %v, want ErrNotQueued", err)
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(); !errors.Is(err, ErrNotGranted) {
		t.Errorf("double release: %v, want ErrNotGranted", err)
	}
}

func TestWaitIsWokenByRelease(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	readers := []*Request{enqueue(t, &f, Read), enqueue(t, &f, Read)}
	var wg sync.WaitGroup
	errs := make([]error, len(readers))
	for i, r := range readers {
		wg.Go(func() { errs[i] = r.Wait(context.Background()) })
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || !readers[i].Granted() {
			t.Fatalf("reader %d: err %v, granted %v", i, err, readers[i].Granted())
		}
	}
}

func TestWaitCancelledKeepsFIFOMoving(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	r := enqueue(t, &f, Write)
	next := enqueue(t, &f, Read)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v, want context.Canceled", err)
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	wantStates(t, []*Request{r, next}, Idle, Granted)
}

func TestCancellationWinsOverRacingGrant(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	r := enqueue(t, &f, Write)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Release(); err != nil { // r is granted and its token is ready...
		t.Fatal(err)
	}
	// ... but the context is already done; whichever branch the select takes, a grant that
	// the waiter returns from is kept, one it abandons is released.
	err := r.Wait(ctx)
	switch {
	case err == nil && !r.Granted():
		t.Fatal("wait returned nil but the request is not granted")
	case err != nil && r.State() != Idle:
		t.Fatalf("wait returned %v but the request is %v, want idle", err, r.State())
	}
}

func TestOnGrantCallback(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	var got []string
	r := &Request{}
	if err := f.Enqueue(r, Read, func(*Request) { got = append(got, "granted") }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatal("callback ran before the grant")
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("callback ran %d times, want 1", len(got))
	}
}

func TestBlockersAreHeadHolders(t *testing.T) {
	var f FIFO
	a, b := enqueue(t, &f, Read), enqueue(t, &f, Read)
	a.Tag, b.Tag = "a", "b"
	w := enqueue(t, &f, Write)
	var tags []any
	w.Blockers(func(h *Request) { tags = append(tags, h.Tag) })
	if len(tags) != 2 || tags[0] != "a" || tags[1] != "b" {
		t.Fatalf("blockers = %v, want [a b]", tags)
	}
	tags = nil
	a.Blockers(func(h *Request) { tags = append(tags, h.Tag) })
	if len(tags) != 0 {
		t.Fatalf("a granted request has blockers %v", tags)
	}
}

func TestIterativeReadGroupStaysSmall(t *testing.T) {
	var f FIFO
	cur, next := &Request{Tag: "cur"}, &Request{Tag: "next"}
	if err := f.Enqueue(cur, Read, nil); err != nil {
		t.Fatal(err)
	}
	// An iterative reader alone keeps its group granted forever: it joins the group with its
	// next request before it releases the current one.
	for range 100 {
		if err := f.Enqueue(next, Read, nil); err != nil {
			t.Fatal(err)
		}
		if err := cur.Release(); err != nil {
			t.Fatal(err)
		}
		cur, next = next, cur
	}
	if n := len(f.head.members); n != 1 {
		t.Fatalf("the group has %d members, want 1", n)
	}
	w := enqueue(t, &f, Write)
	var tags []any
	w.Blockers(func(h *Request) { tags = append(tags, h.Tag) })
	if len(tags) != 1 || tags[0] != cur.Tag {
		t.Fatalf("blockers = %v, want [%v]", tags, cur.Tag)
	}
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	var f FIFO
	cur, next := &Request{}, &Request{}
	if err := f.Enqueue(cur, Write, nil); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := f.Enqueue(next, Write, nil); err != nil {
			t.Fatal(err)
		}
		if err := cur.Release(); err != nil {
			t.Fatal(err)
		}
		cur, next = next, cur
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per iteration, want 0", allocs)
	}
}

// benchmarkCycle measures one steady iteration of a handle on an otherwise idle FIFO: the
// next request is enqueued while the current one holds, then the current one releases.
func benchmarkCycle(b *testing.B, m Mode) {
	var f FIFO
	cur, next := &Request{}, &Request{}
	if err := f.Enqueue(cur, m, nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := f.Enqueue(next, m, nil); err != nil {
			b.Fatal(err)
		}
		if err := cur.Release(); err != nil {
			b.Fatal(err)
		}
		cur, next = next, cur
	}
}

func BenchmarkWriteCycle(b *testing.B) { benchmarkCycle(b, Write) }
func BenchmarkReadCycle(b *testing.B)  { benchmarkCycle(b, Read) }

// BenchmarkWaitHandoff measures a grant handed between two goroutines through Wait.
func BenchmarkWaitHandoff(b *testing.B) {
	var f FIFO
	ctx := context.Background()
	reqs := [2][2]*Request{{{}, {}}, {{}, {}}} // per goroutine: current and next
	if err := f.Enqueue(reqs[0][0], Write, nil); err != nil {
		b.Fatal(err)
	}
	if err := f.Enqueue(reqs[1][0], Write, nil); err != nil {
		b.Fatal(err)
	}
	n := b.N
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range 2 {
		wg.Go(func() {
			cur, next := reqs[g][0], reqs[g][1]
			for range n {
				if err := cur.Wait(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := f.Enqueue(next, Write, nil); err != nil {
					b.Error(err)
					return
				}
				if err := cur.Release(); err != nil {
					b.Error(err)
					return
				}
				cur, next = next, cur
			}
		})
	}
	wg.Wait()
}
