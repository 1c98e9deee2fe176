package fifo

import (
	"errors"
	"slices"
	"testing"
)

func enqueue(t *testing.T, f *FIFO, m Mode) *Request {
	t.Helper()
	r := &Request{}
	if _, err := f.Enqueue(r, m, nil); err != nil {
		t.Fatalf("enqueue %v: %v", m, err)
	}
	return r
}

func release(t *testing.T, f *FIFO, r *Request) []*Request {
	t.Helper()
	granted, err := f.Release(r, nil)
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	return granted
}

func wantStates(t *testing.T, rs []*Request, want ...State) {
	t.Helper()
	got := make([]State, len(rs))
	for i, r := range rs {
		got[i] = r.State()
	}
	if !slices.Equal(got, want) {
		t.Fatalf("states = %v, want %v", got, want)
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
				release(t, &f, rs[i])
			}
			wantStates(t, rs, tc.want...)
		})
	}
}

// TestOperationsReturnWhatTheyGrant: the caller delivers grants, so every operation must
// hand back exactly the requests it granted, and nothing else.
func TestOperationsReturnWhatTheyGrant(t *testing.T) {
	var f FIFO
	w := &Request{}
	granted, err := f.Enqueue(w, Write, nil)
	if err != nil || !slices.Equal(granted, []*Request{w}) {
		t.Fatalf("enqueue on an empty FIFO granted %v (err %v), want the request", granted, err)
	}
	r1, r2, c, w2 := &Request{}, &Request{}, &Request{}, &Request{}
	for _, r := range []*Request{r1, r2, c} {
		if granted, _ := f.Enqueue(r, Read, nil); len(granted) != 0 {
			t.Fatalf("enqueue behind a writer granted %d requests", len(granted))
		}
	}
	if granted, _ := f.Enqueue(w2, Write, nil); len(granted) != 0 {
		t.Fatal("enqueue of a second writer granted something")
	}
	if granted := f.Cancel(c, nil); len(granted) != 0 {
		t.Fatal("cancelling a queued request granted something")
	}
	granted = release(t, &f, w)
	if len(granted) != 2 || !slices.Contains(granted, r1) || !slices.Contains(granted, r2) {
		t.Fatalf("release granted %d requests, want the two live readers", len(granted))
	}
	if granted := release(t, &f, r1); len(granted) != 0 {
		t.Fatal("a partial release of the group granted something")
	}
	if granted := f.Cancel(r2, nil); !slices.Equal(granted, []*Request{w2}) {
		t.Fatalf("cancelling the last granted reader granted %v, want the writer", granted)
	}
	wantStates(t, []*Request{w, r1, r2, c, w2}, Idle, Idle, Idle, Idle, Granted)
}

func TestReadJoinsGroupAfterMemberReleased(t *testing.T) {
	var f FIFO
	a, b := enqueue(t, &f, Read), enqueue(t, &f, Read)
	release(t, &f, a)
	// b still holds: the group is the tail, so a new read joins it and is granted at once
	// (rule 2; an iterative reader re-acquiring its own group, rule 6).
	if granted, err := f.Enqueue(a, Read, nil); err != nil || !slices.Equal(granted, []*Request{a}) {
		t.Fatalf("enqueue: granted %v, err %v", granted, err)
	}
	wantStates(t, []*Request{a, b}, Granted, Granted)
	w := enqueue(t, &f, Write)
	for _, r := range []*Request{a, b} {
		release(t, &f, r)
	}
	wantStates(t, []*Request{w}, Granted)
}

func TestCancelPendingReleasesWhenGranted(t *testing.T) {
	var f FIFO
	w1 := enqueue(t, &f, Write)
	r := enqueue(t, &f, Read)
	w2 := enqueue(t, &f, Write)
	f.Cancel(r, nil)
	wantStates(t, []*Request{w1, r, w2}, Granted, Cancelled, Queued)
	// r leaves on the spot when its entry comes up, without being granted: w2 moves up.
	if granted := release(t, &f, w1); !slices.Equal(granted, []*Request{w2}) {
		t.Fatalf("release granted %v, want only the second writer", granted)
	}
	wantStates(t, []*Request{w1, r, w2}, Idle, Idle, Granted)
}

func TestCancelGrantedReleases(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	next := enqueue(t, &f, Read)
	if granted := f.Cancel(w, nil); !slices.Equal(granted, []*Request{next}) {
		t.Fatalf("cancel of the holder granted %v, want the next request", granted)
	}
	f.Cancel(w, nil) // idle: nothing
	wantStates(t, []*Request{w, next}, Idle, Granted)
}

func TestMisuse(t *testing.T) {
	var f FIFO
	w := enqueue(t, &f, Write)
	r := enqueue(t, &f, Read)
	if _, err := f.Release(r, nil); !errors.Is(err, ErrNotGranted) {
		t.Errorf("release of queued request: %v, want ErrNotGranted", err)
	}
	if _, err := f.Enqueue(w, Write, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("enqueue of granted request: %v, want ErrBusy", err)
	}
	if _, err := f.Enqueue(&Request{}, Mode(9), nil); !errors.Is(err, ErrMode) {
		t.Errorf("enqueue with mode 9: %v, want ErrMode", err)
	}
	if _, err := f.Release(&Request{}, nil); !errors.Is(err, ErrNotGranted) {
		t.Errorf("release of new request: %v, want ErrNotGranted", err)
	}
	release(t, &f, w)
	if _, err := f.Release(w, nil); !errors.Is(err, ErrNotGranted) {
		t.Errorf("double release: %v, want ErrNotGranted", err)
	}
}

func TestHoldersAreTheHeadEntry(t *testing.T) {
	var f FIFO
	a, b := enqueue(t, &f, Read), enqueue(t, &f, Read)
	a.Tag, b.Tag = "a", "b"
	enqueue(t, &f, Write).Tag = "w"
	var tags []any
	f.Holders(func(h *Request) { tags = append(tags, h.Tag) })
	if !slices.Equal(tags, []any{"a", "b"}) {
		t.Fatalf("holders = %v, want [a b]", tags)
	}
	tags = nil
	f.Each(func(r *Request) { tags = append(tags, r.Tag) })
	if !slices.Equal(tags, []any{"a", "b", "w"}) {
		t.Fatalf("each = %v, want [a b w]", tags)
	}
	var empty FIFO
	empty.Holders(func(*Request) { t.Fatal("an empty FIFO has holders") })
}

func TestBehindIsTheNextEntry(t *testing.T) {
	var f FIFO
	a, b := enqueue(t, &f, Read), enqueue(t, &f, Read)
	w := enqueue(t, &f, Write)
	w.Tag = "w"
	behind := func(r *Request) (Mode, []any) {
		var tags []any
		m := r.Behind(func(o *Request) { tags = append(tags, o.Tag) })
		return m, tags
	}
	for _, r := range []*Request{a, b} {
		if m, tags := behind(r); m != Write || !slices.Equal(tags, []any{"w"}) {
			t.Fatalf("behind a reader of the head: %v %v, want write [w]", m, tags)
		}
	}
	if m, _ := behind(w); m != 0 {
		t.Fatalf("behind the last entry: %v, want none", m)
	}
	c, d := enqueue(t, &f, Read), enqueue(t, &f, Read)
	c.Tag, d.Tag = "c", "d"
	if m, tags := behind(w); m != Read || !slices.Equal(tags, []any{"c", "d"}) {
		t.Fatalf("behind the writer: %v %v, want read [c d]", m, tags)
	}
	release(t, &f, a)
	if m, _ := behind(a); m != 0 {
		t.Fatalf("behind a released request: %v, want none", m)
	}
	if m, tags := behind(b); m != Write || !slices.Equal(tags, []any{"w"}) {
		t.Fatalf("behind the reader left: %v %v, want write [w]", m, tags)
	}
}

func TestIterativeReadGroupStaysSmall(t *testing.T) {
	var f FIFO
	cur, next := &Request{Tag: "cur"}, &Request{Tag: "next"}
	if _, err := f.Enqueue(cur, Read, nil); err != nil {
		t.Fatal(err)
	}
	// An iterative reader alone keeps its group granted forever: it joins the group with its
	// next request before it releases the current one.
	for range 100 {
		if _, err := f.Enqueue(next, Read, nil); err != nil {
			t.Fatal(err)
		}
		release(t, &f, cur)
		cur, next = next, cur
	}
	if n := len(f.head.members); n != 1 {
		t.Fatalf("the group has %d members, want 1", n)
	}
	enqueue(t, &f, Write)
	var tags []any
	f.Holders(func(h *Request) { tags = append(tags, h.Tag) })
	if len(tags) != 1 || tags[0] != cur.Tag {
		t.Fatalf("holders = %v, want [%v]", tags, cur.Tag)
	}
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	var f FIFO
	cur, next := &Request{}, &Request{}
	if _, err := f.Enqueue(cur, Write, nil); err != nil {
		t.Fatal(err)
	}
	var buf [4]*Request
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := f.Enqueue(next, Write, buf[:0]); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Release(cur, buf[:0]); err != nil {
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
	if _, err := f.Enqueue(cur, m, nil); err != nil {
		b.Fatal(err)
	}
	var buf [4]*Request
	for b.Loop() {
		if _, err := f.Enqueue(next, m, buf[:0]); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Release(cur, buf[:0]); err != nil {
			b.Fatal(err)
		}
		cur, next = next, cur
	}
}

func BenchmarkWriteCycle(b *testing.B) { benchmarkCycle(b, Write) }
func BenchmarkReadCycle(b *testing.B)  { benchmarkCycle(b, Read) }
