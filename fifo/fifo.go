// Package fifo is the ordered read-write FIFO that regulates access to one ORWL location.
//
// A FIFO holds entries in request order. An entry is either one write request or a group of
// read requests; the head entry is granted, as a whole. A read request joins the tail entry
// when that entry is a read group (even an already granted one: nothing waits behind it, so
// nobody is overtaken); a write always starts a new entry. An entry leaves the FIFO when every
// member has released, and the next entry is granted at once. Entries never leave from the
// middle: cancelling a pending request means "release it as soon as it is granted".
//
// The package is a pure state machine. It knows nothing of tasks, locations' data or the
// network, starts no goroutines and does no I/O, so the runtime can insert requests for local
// and remote handles alike. Requests are values owned by the caller and reused across
// iterations, so a steady stream of requests allocates nothing.
package fifo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

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
	// ErrNotQueued is returned by Wait for a request that is in no FIFO.
	ErrNotQueued = errors.New("request is not queued")
	// ErrMode is returned by Enqueue for a mode other than Read or Write.
	ErrMode = errors.New("invalid request mode")
)

// State is the life-cycle stage of a Request.
type State uint32

const (
	// Idle: new, released, or cancelled and settled; the request may be enqueued again.
	Idle State = iota
	// Queued: waiting in a FIFO behind other entries.
	Queued
	// Granted: its entry is the head of the FIFO; the holder may access the data.
	Granted
	// Cancelled: was queued when cancelled; it is released as soon as it is granted.
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

// FIFO is the queue of one location. Its methods are safe for concurrent use.
// The zero value is an empty FIFO ready to use.
type FIFO struct {
	mu         sync.Mutex
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

// Request is one request for access. A Request is owned by its caller, who may enqueue it
// again once it is Idle, so steady iteration allocates nothing. Enqueue, Release and Cancel
// may be called from any goroutine; Wait by one goroutine at a time, and not at the same
// time as Cancel (Wait cancels by itself when its context is done).
type Request struct {
	// Tag is opaque data of the caller's (for example the handle that made the request);
	// the FIFO never reads it and hands it back in Blockers.
	Tag any

	fifo    *FIFO
	entry   *entry
	slot    int // index of r in entry.members
	mode    Mode
	state   atomic.Uint32 // a State, or parked
	ready   chan struct{} // receives the grant's token when parked; empty otherwise
	onGrant func(*Request)
}

// parked is the state of a queued request whose Wait is blocked on its ready channel; State
// reports it as Queued. The grant swaps the state to Granted and, when it was parked,
// sends the token: one atomic decision, so a token is sent exactly when somebody waits.
const parked = State(4)

// Enqueue appends r to the FIFO in mode m and returns at once: the position of r is fixed.
// If r lands in the head entry it is granted before Enqueue returns. onGrant, if not nil, is
// called when r is granted (possibly before Enqueue returns); it runs with the FIFO's lock
// held, so it must be quick and must not call back into this FIFO.
func (f *FIFO) Enqueue(r *Request, m Mode, onGrant func(*Request)) error {
	if m != Read && m != Write {
		return ErrMode
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if State(r.state.Load()) != Idle {
		return ErrBusy
	}
	r.fifo, r.mode, r.onGrant = f, m, onGrant
	e := f.tail
	if m == Write || e == nil || e.mode != Read {
		e = f.newEntry(m)
	}
	r.entry, r.slot = e, len(e.members)
	e.members = append(e.members, r)
	r.state.Store(uint32(Queued))
	if e == f.head {
		f.grant(r)
	}
	return nil
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

// grant marks r granted and wakes its waiter; f.mu held.
func (f *FIFO) grant(r *Request) {
	if State(r.state.Swap(uint32(Granted))) == parked {
		r.ready <- struct{}{} // capacity 1 and empty: never blocks
	}
	if r.onGrant != nil {
		r.onGrant(r)
	}
}

// settle releases the granted request r and, when its entry is done, removes finished head
// entries and grants the next one as a whole; f.mu held. Cancelled members of a newly granted
// entry are released on the spot, which may finish that entry too.
func (f *FIFO) settle(r *Request) {
	r.entry.remove(r)
	r.leave()
	for f.head != nil && len(f.head.members) == 0 {
		done := f.head
		f.head = done.next
		done.next = f.free
		f.free = done
		if f.head == nil {
			f.tail = nil
			return
		}
		// Grant the new head, dropping its cancelled members; the order of the others is kept.
		n := f.head
		live := n.members[:0]
		for _, m := range n.members {
			if State(m.state.Load()) == Cancelled {
				m.leave()
				continue
			}
			m.slot = len(live)
			live = append(live, m)
			f.grant(m)
		}
		clear(n.members[len(live):])
		n.members = live
	}
}

// leave makes r, which is out of its entry's members, Idle; f.mu held.
func (r *Request) leave() {
	r.state.Store(uint32(Idle))
	r.entry, r.onGrant = nil, nil
}

// Release ends the access of a granted request: when every member of its entry has
// released, the next entry is granted. r becomes Idle.
func (r *Request) Release() error {
	f := r.fifo
	if f == nil {
		return ErrNotGranted
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if State(r.state.Load()) != Granted {
		return ErrNotGranted
	}
	f.settle(r)
	return nil
}

// Cancel withdraws r: a granted request is released, a queued one is marked so that it is
// released as soon as it is granted. Cancel of an Idle or cancelled request does nothing.
func (r *Request) Cancel() {
	f := r.fifo
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch State(r.state.Load()) {
	case Granted:
		f.settle(r)
	case Queued, parked:
		r.state.Store(uint32(Cancelled))
	}
}

// Wait blocks until r is granted or ctx is done. When it sees ctx done first it returns
// ctx.Err() and cancels r, so the FIFO keeps moving; a grant that arrives while it gives up is
// released again. Wait only waits: it never changes the position of r.
func (r *Request) Wait(ctx context.Context) error {
	if State(r.state.Load()) == Granted {
		return nil
	}
	f := r.fifo
	if f == nil {
		return ErrNotQueued
	}
	if r.ready == nil {
		r.ready = make(chan struct{}, 1)
	}
	if !r.state.CompareAndSwap(uint32(Queued), uint32(parked)) {
		if State(r.state.Load()) == Granted {
			return nil
		}
		return ErrNotQueued
	}
	select {
	case <-r.ready:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !r.state.CompareAndSwap(uint32(parked), uint32(Cancelled)) {
		// Granted meanwhile, and its token sent: the cancellation wins, give the grant back.
		<-r.ready
		f.settle(r)
	}
	return ctx.Err()
}

// Granted reports whether r is granted now. It never blocks.
func (r *Request) Granted() bool { return State(r.state.Load()) == Granted }

// State returns the life-cycle stage of r.
func (r *Request) State() State {
	if s := State(r.state.Load()); s != parked {
		return s
	}
	return Queued
}

// Mode returns the mode r was last enqueued with.
func (r *Request) Mode() Mode { return r.mode }

// Blockers calls fn for each request that holds the grant r is waiting for: the members of
// the head entry that have not released. It calls nothing when r is granted or not queued.
// fn runs with the FIFO's lock held and must not call back into the FIFO.
func (r *Request) Blockers(fn func(holder *Request)) {
	f := r.fifo
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := r.State(); s != Queued && s != Cancelled {
		return
	}
	for _, m := range f.head.members { // all granted: the head has no cancelled member
		fn(m)
	}
}
