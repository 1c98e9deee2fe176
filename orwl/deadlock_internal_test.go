package orwl

import "testing"

// A process is idle when one task at least waits in Acquire and every other one waits or
// has returned.
func TestDetectorIdle(t *testing.T) {
	tasks := []*Task{{id: 0}, {id: 1}}
	var ticket ticketBase
	for _, c := range []struct {
		name  string
		setup func(d *detector)
		want  bool
	}{
		{"both run", func(d *detector) {}, false},
		{"one waits, one runs", func(d *detector) { d.block(0, &ticket) }, false},
		{"both wait", func(d *detector) { d.block(0, &ticket); d.block(1, &ticket) }, true},
		{"one waits, one returned", func(d *detector) { d.block(0, &ticket); d.finished(1) }, true},
		{"both returned", func(d *detector) { d.finished(0); d.finished(1) }, false},
		{"one woke up", func(d *detector) { d.block(0, &ticket); d.block(1, &ticket); d.unblock(1) }, false},
	} {
		d := &detector{slots: make([]slot, 2)}
		c.setup(d)
		if got := d.idle(tasks); got != c.want {
			t.Errorf("%s: idle = %v, want %v", c.name, got, c.want)
		}
	}
}
