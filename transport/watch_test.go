package transport

import (
	"slices"
	"testing"
)

// A watch list holds every connection at first, drops one that delivered nothing for
// watchKeep choices, takes it back at the first choice after it delivers again, and starts
// over with every connection when the mesh's list changes.
func TestWatchListFollowsTheTraffic(t *testing.T) {
	busy, quiet := &conn{peer: 1}, &conn{peer: 2}
	all := &[]*conn{busy, quiet}
	var w watchList
	wait := func() []*conn { // one wait, in which the busy connection delivers a message
		busy.arrivals.Add(1)
		return slices.Clone(w.watched(all))
	}
	if got := wait(); !slices.Equal(got, []*conn{busy, quiet}) {
		t.Fatalf("first wait watches %v, want both connections", peers(got))
	}
	for range watchKeep * watchEvery {
		wait()
	}
	if got := wait(); !slices.Equal(got, []*conn{busy}) {
		t.Fatalf("after %d waits with nothing from rank 2: watched %v, want [1]", watchKeep*watchEvery, peers(got))
	}
	quiet.arrivals.Add(1)
	back := false
	for range watchEvery {
		back = back || slices.Contains(wait(), quiet)
	}
	if !back {
		t.Fatalf("rank 2 not watched in the %d waits after its message", watchEvery)
	}
	for range watchKeep * watchEvery {
		wait()
	}
	third := &conn{peer: 3}
	all = &[]*conn{busy, quiet, third}
	if got := wait(); !slices.Equal(got, *all) {
		t.Errorf("a new list: watched %v, want every connection", peers(got))
	}
}

func peers(cs []*conn) []int {
	var r []int
	for _, c := range cs {
		r = append(r, c.peer)
	}
	return r
}
