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
	"github.com/orwl-go/orwl/trace"
)

// Location names one location of the job: the location called Name of task Task.
type Location struct {
	Task int
	Name string
}

func (l Location) String() string { return fmt.Sprintf("task %d %q", l.Task, l.Name) }

// location is a location owned by this process: its FIFO and its data. It is the
// handle.Queue of the local handles on it; the node places remote handles' requests in it.
type location struct {
	id      Location
	index   uint32 // its number in the job, as it travels on the wire
	fifo    fifo.FIFO
	data    []byte // 8-byte aligned; written only under a write grant (or before the schedule)
	version uint64 // counts the write releases; read and written under grants, like data

	fq       *trace.FIFO   // the trace of this FIFO; nil when tracing is off
	lastFlow atomic.Uint64 // the trace flow of the last release, for the grant it causes

	scheduled atomic.Bool // the initial requests have been placed in the FIFO
	mu        sync.Mutex
	pending   []pendingRequest // requests that came before the schedule; guarded by mu
}

// pendingRequest is a request that came before the schedule placed the initial ones.
type pendingRequest struct {
	initial   bool // declared in the init phase (else a later request that arrived early)
	pos, task int
	req       *fifo.Request
	mode      fifo.Mode
	onGrant   func(*fifo.Request)
}

// localTicket is a request on a location of this process.
type localTicket struct {
	fifo.Request
	loc *location
}

func (t *localTicket) Data() []byte { return t.loc.data }

func (t *localTicket) Resize(n int) ([]byte, error) {
	t.loc.data = resized(t.loc.data, n)
	return t.loc.data, nil
}

// Release ends the access; a write makes a new version of the data.
func (t *localTicket) Release() error {
	if t.Mode() == fifo.Write && t.Granted() {
		t.loc.version++
	}
	return t.Request.Release()
}

// Request implements handle.Queue. Before the schedule the request is only recorded; the
// schedule places all of them in the global order.
func (l *location) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	t, _ := reuse.(*localTicket)
	if t == nil || t.State() != fifo.Idle {
		t = &localTicket{loc: l}
	}
	t.Tag = h
	spec := h.Spec()
	if err := l.enqueue(&t.Request, spec.Mode, true, spec.Pos, spec.Task, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// enqueue places r in the FIFO, or, before the schedule, keeps it for the schedule.
func (l *location) enqueue(r *fifo.Request, mode fifo.Mode, initial bool, pos, task int, onGrant func(*fifo.Request)) error {
	l.fq.Request(task, traceMode(mode), pos)
	if !l.scheduled.Load() {
		l.mu.Lock()
		if !l.scheduled.Load() {
			l.pending = append(l.pending, pendingRequest{initial, pos, task, r, mode, onGrant})
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
	}
	return l.fifo.Enqueue(r, mode, onGrant)
}

// schedule places the initial requests in the FIFO ordered by position, then task id, then
// arrival order (which is declaration order within a task), then the requests that arrived
// early from processes already past the schedule, and lets later requests in.
func (l *location) schedule() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.SortStableFunc(l.pending, func(a, b pendingRequest) int {
		if a.initial != b.initial {
			if a.initial {
				return -1
			}
			return 1
		}
		if !a.initial {
			return 0
		}
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.task, b.task))
	})
	for _, p := range l.pending {
		if err := l.fifo.Enqueue(p.req, p.mode, p.onGrant); err != nil {
			return fmt.Errorf("schedule %s: %w", l.id, err)
		}
	}
	l.pending = nil
	l.scheduled.Store(true)
	return nil
}

// resized returns b resized to n bytes, keeping the common prefix and zero-filling the rest;
// it reallocates (8-byte aligned) only when b's capacity is short.
func resized(b []byte, n int) []byte {
	if n <= cap(b) {
		old := len(b)
		b = b[:n]
		if n > old {
			clear(b[old:])
		}
		return b
	}
	nb := alignedBytes(n)
	copy(nb, b)
	return nb
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
