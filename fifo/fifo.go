// Package fifo is the ordered read-write FIFO that regulates access to one ORWL location.
//
// A FIFO holds entries in request order. An entry is either one write request or a group of
// read requests; the head entry is granted, as a whole. A read request joins the tail entry
// when that entry is a read group (even an already granted one: nothing waits behind it, so
// nobody is overtaken); a write always starts a new entry. An entry leaves the FIFO when every
// member has released, and the next entry is granted at once. Entries never leave from the
// middle: cancelling a pending request means "release it as soon as it is granted".
//
// The package is a pure state machine, in the manner of go.etcd.io/raft's core: it has no
// lock, starts no goroutines, does no I/O and never blocks. Every operation returns the
// requests it granted, and the caller, which serialises the operations of one FIFO, delivers
// those grants (wakes a local waiter, sends a message to another process) after it has let go
// of its own lock. It knows nothing of tasks, data or the network, so the runtime inserts
// requests of local and remote handles alike. Requests are values owned by the caller and
// reused across iterations, so a steady stream of requests allocates nothing.
package fifo

import "errors"

// Mode says whether a request asks for shared (Read) or exclusive (Write) access.
type Mode uint8

const (
	// Read requests shared access: adjacent reads are granted together.
	Read Mode = iota + 1
	// Write requests exclusive access.
	Write
)

// String returns "read" or "write".
func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "invalid mode"
}

// Errors returned for misuse of a Request. They are wrapped with context by the callers.
var (
	// ErrNotGranted is returned by Release for a request that is not granted.
	ErrNotGranted = errors.New("request is not granted")
	// ErrBusy is returned by Enqueue for a request that is still queued or granted.
	ErrBusy = errors.New("request is still in a FIFO")
	// ErrMode is returned by Enqueue for a mode other than Read or Write.
	ErrMode = errors.New("invalid request mode")
)

// State is the life-cycle stage of a Request in its FIFO.
type State uint8

const (
	// Idle: new, released, or cancelled and settled; the request may be enqueued again.
	Idle State = iota
	// Queued: waiting in a FIFO behind other entries.
	Queued
	// Granted: its entry is the head of the FIFO; the holder may access the data.
	Granted
	// Cancelled: was queued when cancelled; it leaves the FIFO as soon as its entry is
	// granted, without being granted itself.
	Cancelled
)

// String returns the lower-case name of the state.
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Queued:
		return "queued"
	case Granted:
		return "granted"
	case Cancelled:
		return "cancelled"
	}
	return "invalid state"
}

// FIFO is the queue of one location. It is not safe for concurrent use: the caller
// serialises the operations on one FIFO and its requests (the runtime holds its location's
// lock). The zero value is an empty FIFO ready to use.
type FIFO struct {
	head, tail *entry
	free       *entry // recycled entries, linked by next
}

// entry is one write request or one group of read requests. It is granted exactly when it
// is the head of its FIFO, and it leaves the FIFO when members is empty.
type entry struct {
	mode    Mode
	members []*Request // the requests that have not released yet, cancelled ones included
	next    *entry
}

// remove takes r out of e.members in O(1); the order of the others may change.
func (e *entry) remove(r *Request) {
	last := len(e.members) - 1
	m := e.members[last]
	e.members[r.slot], m.slot = m, r.slot
	e.members[last] = nil
	e.members = e.members[:last]
}

// Request is one request for access. It is owned by its caller, who may enqueue it again
// once it is Idle, so steady iteration allocates nothing. Like its FIFO, it is not safe for
// concurrent use.
type Request struct {
	// Tag is opaque data of the caller's (for example the ticket that holds the request);
	// the FIFO never reads it.
	Tag any

	entry *entry
	slot  int // index of r in entry.members
	mode  Mode
	state State
}

// Enqueue appends r to f in mode m: the position of r is fixed. It appends to granted the
// requests this grants (r itself when it lands in the head entry) and returns it.
func (f *FIFO) Enqueue(r *Request, m Mode, granted []*Request) ([]*Request, error) {
	if m != Read && m != Write {
		return granted, ErrMode
	}
	if r.state != Idle {
		return granted, ErrBusy
	}
	r.mode = m
	e := f.tail
	if m == Write || e == nil || e.mode != Read {
		e = f.newEntry(m)
	}
	r.entry, r.slot = e, len(e.members)
	e.members = append(e.members, r)
	r.state = Queued
	if e == f.head {
		r.state = Granted
		granted = append(granted, r)
	}
	return granted, nil
}

// newEntry appends an empty entry of mode m; it is the (granted) head if the FIFO was empty.
func (f *FIFO) newEntry(m Mode) *entry {
	e := f.free
	if e != nil {
		f.free = e.next
		e.next = nil
	} else {
		e = &entry{}
	}
	e.mode = m
	if f.tail == nil {
		f.head = e
	} else {
		f.tail.next = e
	}
	f.tail = e
	return e
}

// Release ends the access of the granted request r, which becomes Idle. When every member
// of its entry has released, the next entry is granted as a whole; Release appends the
// requests it grants to granted and returns it.
func (f *FIFO) Release(r *Request, granted []*Request) ([]*Request, error) {
	if r.state != Granted {
		return granted, ErrNotGranted
	}
	return f.settle(r, granted), nil
}

// Cancel withdraws r: a granted request is released (as by Release), a queued one leaves
// the FIFO as soon as its entry is granted, without being granted. Cancel of an Idle or
// cancelled request does nothing. It appends the requests it grants to granted.
func (f *FIFO) Cancel(r *Request, granted []*Request) []*Request {
	switch r.state {
	case Granted:
		return f.settle(r, granted)
	case Queued:
		r.state = Cancelled
	}
	return granted
}

// settle takes r, granted or cancelled, out of its entry and, when that finishes the head,
// removes finished head entries and grants the next one as a whole. Cancelled members of a
// newly granted entry leave on the spot, which may finish that entry too.
func (f *FIFO) settle(r *Request, granted []*Request) []*Request {
	r.entry.remove(r)
	r.leave()
	for f.head != nil && len(f.head.members) == 0 {
		done := f.head
		f.head = done.next
		done.next = f.free
		f.free = done
		if f.head == nil {
			f.tail = nil
			break
		}
		// Grant the new head as a whole, then drop its cancelled members, if any.
		n := f.head
		cancelled := false
		for _, m := range n.members {
			if m.state == Cancelled {
				cancelled = true
				continue
			}
			m.state = Granted
			granted = append(granted, m)
		}
		if cancelled {
			n.dropCancelled()
		}
	}
	return granted
}

// dropCancelled takes the cancelled members out of e, which makes them Idle; the order of
// the others is kept.
func (e *entry) dropCancelled() {
	live := e.members[:0]
	for _, m := range e.members {
		if m.state == Cancelled {
			m.leave()
			continue
		}
		m.slot = len(live)
		live = append(live, m)
	}
	clear(e.members[len(live):])
	e.members = live
}

// leave makes r, which is out of its entry's members, Idle.
func (r *Request) leave() {
	r.state = Idle
	r.entry = nil
}

// Each calls fn for every request in f that is queued, granted or cancelled, head first.
func (f *FIFO) Each(fn func(*Request)) {
	for e := f.head; e != nil; e = e.next {
		for _, m := range e.members {
			fn(m)
		}
	}
}

// Holders calls fn for each request of the granted head entry that has not released: the
// requests whose release every queued request waits for.
func (f *FIFO) Holders(fn func(holder *Request)) {
	if f.head == nil {
		return
	}
	for _, m := range f.head.members { // all granted: the head has no cancelled member
		fn(m)
	}
}

// Behind calls fn for every request of the entry right behind r's, cancelled ones included,
// and returns that entry's mode; it returns 0 when r's entry is the last, or r is Idle. The
// entry behind stays there until r's entry has left the FIFO: what Behind says of a granted
// request holds until its entry is finished.
func (r *Request) Behind(fn func(*Request)) Mode {
	if r.entry == nil || r.entry.next == nil {
		return 0
	}
	e := r.entry.next
	for _, m := range e.members {
		fn(m)
	}
	return e.mode
}

// State returns the life-cycle stage of r.
func (r *Request) State() State { return r.state }

// Mode returns the mode r was last enqueued with.
func (r *Request) Mode() Mode { return r.mode }
