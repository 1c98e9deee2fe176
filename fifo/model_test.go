package fifo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is a deliberately naive reference of the FIFO rules: a list of entries, each with
// its live members, re-normalised from scratch after every step.
type model struct {
	entries []*modelEntry
	state   []State
}

type modelEntry struct {
	mode Mode
	live []int // members that have not released
}

func newModel(n int) *model { return &model{state: make([]State, n)} }

func (m *model) enqueue(id int, mode Mode) {
	last := len(m.entries) - 1
	if mode == Read && last >= 0 && m.entries[last].mode == Read {
		m.entries[last].live = append(m.entries[last].live, id)
	} else {
		m.entries = append(m.entries, &modelEntry{mode: mode, live: []int{id}})
	}
	m.state[id] = Queued
	m.normalize()
}

func (m *model) release(id int) {
	for _, e := range m.entries {
		for i, x := range e.live {
			if x == id {
				e.live = append(e.live[:i], e.live[i+1:]...)
				m.state[id] = Idle
				m.normalize()
				return
			}
		}
	}
	panic(fmt.Sprintf("model: %d is in no entry", id))
}

func (m *model) cancel(id int) {
	switch m.state[id] {
	case Granted:
		m.release(id)
	case Queued:
		m.state[id] = Cancelled
	}
}

// normalize grants the head entry and drops finished heads.
func (m *model) normalize() {
	for len(m.entries) > 0 {
		head := m.entries[0]
		var live []int
		for _, id := range head.live {
			if m.state[id] == Cancelled {
				m.state[id] = Idle
				continue
			}
			m.state[id] = Granted
			live = append(live, id)
		}
		head.live = live
		if len(live) > 0 {
			return
		}
		m.entries = m.entries[1:]
	}
}

// checkInvariants verifies, on the real FIFO, that every request in an entry is at its slot,
// that holders form one entry and that a writer never holds together with anyone else.
func checkInvariants(t *testing.T, step int, reqs []*Request) {
	t.Helper()
	var holders []*Request
	for _, r := range reqs {
		if r.State() != Idle && r.entry.members[r.slot] != r {
			t.Fatalf("step %d: a request is not at its slot in its entry", step)
		}
		if r.State() == Granted {
			holders = append(holders, r)
		}
	}
	for _, h := range holders {
		if h.entry != holders[0].entry {
			t.Fatalf("step %d: holders in two different entries", step)
		}
		if h.mode == Write && len(holders) > 1 {
			t.Fatalf("step %d: a writer holds together with %d others", step, len(holders)-1)
		}
	}
}

// TestFIFOAgainstModel drives the FIFO and the model with the same random operations and
// compares every request's state after each one; it also checks that every operation
// returns exactly the requests it turned Granted.
func TestFIFOAgainstModel(t *testing.T) {
	const requests, steps = 7, 3000
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 99))
		var f FIFO
		reqs := make([]*Request, requests)
		for i := range reqs {
			reqs[i] = &Request{Tag: i}
		}
		ref := newModel(requests)
		for step := range steps {
			id := rng.IntN(requests)
			r := reqs[id]
			before := slices.Clone(ref.state)
			var op string
			var granted []*Request
			var err error
			switch ref.state[id] {
			case Idle:
				mode := Read
				if rng.IntN(3) == 0 {
					mode = Write
				}
				op = "enqueue " + mode.String()
				granted, err = f.Enqueue(r, mode, nil)
				ref.enqueue(id, mode)
			case Granted:
				if rng.IntN(4) == 0 {
					op = "cancel granted"
					granted = f.Cancel(r, nil)
					ref.cancel(id)
				} else {
					op = "release"
					granted, err = f.Release(r, nil)
					ref.release(id)
				}
			case Queued:
				if rng.IntN(5) != 0 {
					continue // mostly let queued requests be
				}
				op = "cancel queued"
				granted = f.Cancel(r, nil)
				ref.cancel(id)
			case Cancelled:
				continue
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %s: %v", seed, step, op, err)
			}
			for i, x := range reqs {
				if got, want := x.State(), ref.state[i]; got != want {
					t.Fatalf("seed %d step %d (%s of %d): request %d is %v, model says %v", seed, step, op, id, i, got, want)
				}
			}
			var newly []int
			for i := range reqs {
				if ref.state[i] == Granted && before[i] != Granted {
					newly = append(newly, i)
				}
			}
			var got []int
			for _, g := range granted {
				got = append(got, g.Tag.(int))
			}
			slices.Sort(got)
			if !slices.Equal(got, newly) {
				t.Fatalf("seed %d step %d (%s of %d): returned grants %v, newly granted %v", seed, step, op, id, got, newly)
			}
			checkInvariants(t, step, reqs)
		}
	}
}
