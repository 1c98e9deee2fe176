package orwl

import (
	"context"
	"runtime"
	"testing"
	"unsafe"
)

// parkedTicket returns a ticket whose latch has a waiter parked in Wait; the waiter returns
// when the test ends.
func parkedTicket(t *testing.T) *ticketBase {
	tk := &ticketBase{}
	tk.latch.Start()
	done := make(chan struct{})
	go func() {
		tk.latch.Wait(context.Background(), make(chan struct{}, 1), false)
		close(done)
	}()
	t.Cleanup(func() { tk.latch.Grant(); <-done })
	for !tk.latch.Parked() {
		runtime.Gosched()
	}
	return tk
}

// A process is idle when one task at least waits in Acquire, parked or polling for its
// grant, and every other one waits or has returned.
func TestDetectorIdle(t *testing.T) {
	tasks := []*Task{{id: 0}, {id: 1}}
	parked := parkedTicket(t)
	grantedTicket := func() *ticketBase {
		tk := &ticketBase{}
		tk.latch.Start()
		tk.latch.Grant()
		return tk
	}
	granted := grantedTicket()
	manyGranted := func(d *detector) { // more than a slot remembers
		for range slotWaits + 1 {
			d.block(0, grantedTicket())
		}
	}
	for _, c := range []struct {
		name  string
		setup func(d *detector)
		want  bool
	}{
		{"both run", func(d *detector) {}, false},
		{"one waits, one runs", func(d *detector) { d.block(0, parked) }, false},
		{"both wait", func(d *detector) { d.block(0, parked); d.block(1, parked) }, true},
		{"one waits, one returned", func(d *detector) { d.block(0, parked); d.finished(1) }, true},
		{"both returned", func(d *detector) { d.finished(0); d.finished(1) }, false},
		{"one woke up", func(d *detector) { d.block(0, parked); d.block(1, granted) }, false},
		{"one polls for its grant, one waits", func(d *detector) {
			d.block(0, parked)
			d.block(1, granted)
			d.slots[1].polling.Store(true)
		}, true},
		{"one polls, one runs", func(d *detector) { d.slots[0].polling.Store(true) }, false},
		{"one polls, one returned", func(d *detector) { d.slots[0].polling.Store(true); d.finished(1) }, true},
		{"one polled, then woke up", func(d *detector) {
			d.block(0, parked)
			d.slots[1].polling.Store(true)
			d.slots[1].polling.Store(false)
		}, false},
		{"both wait, one on a ticket it waited on before", func(d *detector) {
			d.block(0, parked)
			d.block(0, granted)
			d.block(0, parked)
			d.block(1, parked)
		}, true},
		{"both wait, one after many other waits", func(d *detector) {
			manyGranted(d)
			d.block(0, parked)
			d.block(1, parked)
		}, true},
		{"one woke up after many waits", func(d *detector) {
			d.block(0, parked)
			manyGranted(d)
			d.block(1, parked)
		}, false},
	} {
		d := &detector{slots: make([]slot, 2)}
		c.setup(d)
		if got := d.idle(tasks); got != c.want {
			t.Errorf("%s: idle = %v, want %v", c.name, got, c.want)
		}
	}
}

// Every task's slot fills a cache line of its own, so that a task that publishes a wait
// never takes the line of another task's slot away from its core.
func TestSlotFillsACacheLine(t *testing.T) {
	if size := unsafe.Sizeof(slot{}); size != 64 {
		t.Fatalf("a slot takes %d bytes, want 64", size)
	}
}

// A look reports moved when a protocol message came since the previous look, once for any
// number of them, and not again until another comes.
func TestDetectorMoves(t *testing.T) {
	tasks := []*Task{{id: 0}, {id: 1}}
	d := &detector{slots: make([]slot, 2)}
	d.finished(0)
	d.finished(1)
	if _, stuck, moved := d.look(tasks); !stuck || !moved {
		t.Fatalf("first look: stuck %v, moved %v; want both (it was not stuck before)", stuck, moved)
	}
	for i, c := range []struct {
		messages int
		want     bool
	}{{0, false}, {1, true}, {0, false}, {3, true}, {0, false}} {
		for range c.messages {
			d.moved()
		}
		if _, _, moved := d.look(tasks); moved != c.want {
			t.Errorf("look %d, after %d messages: moved %v, want %v", i+2, c.messages, moved, c.want)
		}
	}
}
