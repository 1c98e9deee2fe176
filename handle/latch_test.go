package handle

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// latchModel is the reference life cycle of one request.
type latchModel struct{ s LatchState }

func (m *latchModel) grant() bool {
	if m.s != LatchPending {
		return false
	}
	m.s = LatchGranted
	return true
}

func (m *latchModel) fail() bool {
	if m.s != LatchPending {
		return false
	}
	m.s = LatchFailed
	return true
}

func (m *latchModel) cancel() bool {
	held := m.s == LatchGranted
	if m.s == LatchPending || m.s == LatchGranted {
		m.s = LatchCancelled
	}
	return held
}

// wait is what Wait returns with a context that is already done.
func (m *latchModel) wait(failure error) error {
	switch m.s {
	case LatchGranted:
		return nil
	case LatchFailed:
		return failure
	case LatchPending:
		return context.Canceled
	}
	return ErrNotPending
}

// TestLatchAgainstModel drives a Latch and the model with the same random operations, and in
// some steps races a concurrent waiter against a grant, a failure or its context's end: the
// waiter's result must agree with the final state (a grant it returns from is kept, one it
// abandons is reported by Cancel, so nothing is lost or given back twice).
func TestLatchAgainstModel(t *testing.T) {
	failure := errors.New("queue failed")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var l Latch
		m := &latchModel{}
		for step := range 2000 {
			op := rng.IntN(6)
			switch op {
			case 0:
				if m.s == LatchPending || m.s == LatchGranted {
					continue // a request is started only when the previous one is over
				}
				l.Start()
				m.s = LatchPending
			case 1:
				if got, want := l.Grant(), m.grant(); got != want {
					t.Fatalf("seed %d step %d: Grant = %v, model %v", seed, step, got, want)
				}
			case 2:
				if got, want := l.Fail(failure), m.fail(); got != want {
					t.Fatalf("seed %d step %d: Fail = %v, model %v", seed, step, got, want)
				}
			case 3:
				if got, want := l.Cancel(), m.cancel(); got != want {
					t.Fatalf("seed %d step %d: Cancel = %v, model %v", seed, step, got, want)
				}
			case 4:
				if got, want := l.Wait(done, make(chan struct{}, 1), false), m.wait(failure); !errors.Is(got, want) && got != want {
					t.Fatalf("seed %d step %d: Wait = %v, model %v", seed, step, got, want)
				}
			case 5:
				if m.s != LatchPending {
					continue
				}
				raceWaiter(t, rng, &l, m, failure)
			}
			if got := l.State(); got != m.s {
				t.Fatalf("seed %d step %d (op %d): state %v, model %v", seed, step, op, got, m.s)
			}
		}
	}
}

// raceWaiter waits on the pending l in another goroutine while this one grants it, fails it
// or ends the waiter's context, in a random order against the waiter's progress.
func raceWaiter(t *testing.T, rng *rand.Rand, l *Latch, m *latchModel, failure error) {
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	wake := make(chan struct{}, 1)
	watched := rng.IntN(2) == 0 // the context's end pokes wake itself (Owner.Watch)
	if watched {
		defer context.AfterFunc(ctx, func() { poke(wake) })()
	}
	go func() { result <- l.Wait(ctx, wake, watched) }()
	action := rng.IntN(3)
	switch action {
	case 0:
		if !l.Grant() {
			t.Fatal("Grant of a pending latch failed")
		}
		m.grant()
	case 1:
		if !l.Fail(failure) {
			t.Fatal("Fail of a pending latch failed")
		}
		m.fail()
	}
	cancel()
	err := <-result
	switch {
	case err == nil && m.s != LatchGranted:
		t.Fatalf("Wait returned nil but the latch is %v", m.s)
	case errors.Is(err, failure) && m.s != LatchFailed:
		t.Fatalf("Wait returned the failure but the latch is %v", m.s)
	case errors.Is(err, context.Canceled):
		if action == 2 && m.s != LatchPending {
			t.Fatalf("the waiter gave up but the latch is %v", m.s)
		}
		// The waiter gave up: its owner cancels, and must give back a grant that came.
		if held := l.Cancel(); held != m.cancel() {
			t.Fatalf("Cancel after an abandoned wait reported held=%v, model disagrees", held)
		}
	case err != nil && !errors.Is(err, failure):
		t.Fatalf("Wait: %v", err)
	}
	if got := l.State(); got != m.s {
		t.Fatalf("after the race: state %v, model %v", got, m.s)
	}
}

func TestLatchWaitIsWokenByGrant(t *testing.T) {
	var l Latch
	l.Start()
	done := make(chan error)
	go func() { done <- l.Wait(context.Background(), make(chan struct{}, 1), false) }()
	l.Grant()
	if err := <-done; err != nil || !l.Granted() {
		t.Fatalf("wait: %v, granted %v", err, l.Granted())
	}
	var idle Latch
	if err := idle.Wait(context.Background(), make(chan struct{}, 1), true); !errors.Is(err, ErrNotPending) {
		t.Fatalf("wait on an idle latch: %v, want ErrNotPending", err)
	}
}

// BenchmarkLatchHandoff measures a grant handed between two goroutines through latches,
// the floor under a local hand-off between two tasks.
func BenchmarkLatchHandoff(b *testing.B) {
	var ping, pong Latch
	ctx := context.Background()
	pingWake, pongWake := make(chan struct{}, 1), make(chan struct{}, 1)
	ping.Start()
	pong.Start()
	go func() {
		for range b.N {
			if ping.Wait(ctx, pingWake, true) != nil {
				return
			}
			ping.Start()
			pong.Grant()
		}
	}()
	for range b.N {
		ping.Grant()
		if pong.Wait(ctx, pongWake, true) != nil {
			b.Fatal("wait failed")
		}
		pong.Start()
	}
}
