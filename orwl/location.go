package orwl

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// Location names one location of the job: the location called Name of task Task.
type Location struct {
	Task int
	Name string
}

func (l Location) String() string { return fmt.Sprintf("task %d %q", l.Task, l.Name) }

// location is a location owned by this process: its FIFO and its data. It is the
// handle.Queue of the handles on it.
type location struct {
	id   Location
	fifo fifo.FIFO
	data []byte // 8-byte aligned; written only under a write grant (or before the schedule)

	scheduled atomic.Bool // the initial requests have been placed in the FIFO
	mu        sync.Mutex
	initial   []initialEntry // requests made before the schedule, in arrival order; guarded by mu
}

// initialEntry is a request made before the schedule, placed in the FIFO by schedule.
type initialEntry struct {
	pos, task int
	req       *fifo.Request
	mode      fifo.Mode
}

// localTicket is a request on a location of this process.
type localTicket struct {
	fifo.Request
	loc *location
}

func (t *localTicket) Data() []byte { return t.loc.data }

func (t *localTicket) Resize(n int) ([]byte, error) {
	t.loc.resize(n)
	return t.loc.data, nil
}

// Request implements handle.Queue. Before the schedule the request is only recorded; the
// schedule places all of them in the global order.
func (l *location) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	t, _ := reuse.(*localTicket)
	if t == nil || t.State() != fifo.Idle {
		t = &localTicket{loc: l}
	}
	t.Tag = h
	if !l.scheduled.Load() && l.recordInitial(h, t) {
		return t, nil
	}
	if err := l.fifo.Enqueue(&t.Request, h.Mode(), nil); err != nil {
		return nil, err
	}
	return t, nil
}

// recordInitial keeps t for the schedule, unless the schedule is already done.
func (l *location) recordInitial(h *handle.Handle, t *localTicket) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scheduled.Load() {
		return false
	}
	spec := h.Spec()
	l.initial = append(l.initial, initialEntry{pos: spec.Pos, task: spec.Task, req: &t.Request, mode: spec.Mode})
	return true
}

// schedule places the initial requests in the FIFO ordered by position, then task id, then
// arrival order (which is declaration order within a task), and lets later requests in.
func (l *location) schedule() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.SortStableFunc(l.initial, func(a, b initialEntry) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.task, b.task))
	})
	for _, e := range l.initial {
		if err := l.fifo.Enqueue(e.req, e.mode, nil); err != nil {
			return fmt.Errorf("schedule %s: %w", l.id, err)
		}
	}
	l.initial = nil
	l.scheduled.Store(true)
	return nil
}

// resize sets the size of the data to n bytes, keeping the common prefix, zero-filling the rest.
func (l *location) resize(n int) {
	if n <= cap(l.data) {
		old := len(l.data)
		l.data = l.data[:n]
		if n > old {
			clear(l.data[old:])
		}
		return
	}
	b := alignedBytes(n)
	copy(b, l.data)
	l.data = b
}

// alignedBytes returns n zeroed bytes whose first byte is 8-byte aligned.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// Float64s views a mapped buffer as float64 values (little-endian, the machine's order);
// trailing bytes that do not fill a value are left out. Location data is 8-byte aligned,
// so the view is always valid for it. The view shares memory with b.
func Float64s(b []byte) []float64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// Bytes views float64 values as bytes, the inverse of Float64s; it shares memory with f.
func Bytes(f []float64) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*8)
}
