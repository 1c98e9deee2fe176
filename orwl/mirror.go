package orwl

import (
	"fmt"
	"sync"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/trace"
)

// This file holds the mirrors, this process's copies of the data of locations of other
// processes (mirrorState, in each remoteQueue), apart from remote.go, which makes one call
// here at each step: where a grant's data lands (grantSink), the version it brings
// (landed), what a batch of grants and each release do to the mirror (hold, givenBack),
// when a mirror's buffer is given up and reused, and its guard in a checked job; and, at
// the owner, what it knows of each mirror (location.mirrors) and where a write-back lands
// (writeBackSink).
//
// A mirror's buffer is given up, to the process's spares, when nothing reads it before the
// data changes: once no grant of the queue is held, when the owner said that the data
// changes before this process's next grant (a grant that says recycle, served.recyclable: a
// one-shot read with another process's write behind it), or when this process has no
// request on the location any more. The release then says so, and the owner sends the data
// with the next grant. The next mirror that needs a buffer takes a spare one
// (spareMirrors): a job that reads many locations of other processes once each, a tiled
// factorisation, pays the page faults of a fresh buffer only for the mirrors it reads at
// the same time.
//
// A process of the same host reads shared data in place (buffers.share): the owner names
// it in a read's grant (served.granted: a view), and the mirror is then a read-only view of
// the owner's buffer (hugemem.View), mapped at the first such grant and again when the
// owner's buffer changes; nothing is copied, the view takes no fresh memory, and a write
// through a read's data faults there whatever the job (ErrReadOnlyData). The owner counts
// the requester as holding no copy, so that a write grant brings data, which replaces the
// view by a buffer of the requester's own.

// spareMirrors are the buffers of mirrors given up (see above), for the next mirror that
// needs a buffer. Only mapped buffers are kept (hugemem.Threshold): a smaller one is Go
// memory, as cheap to allocate again.
type spareMirrors struct {
	mu    sync.Mutex // guards bufs (lock order: lockorder.go)
	bufs  [][]byte
	alloc buffers // the job's
}

// take returns a buffer of n bytes for a grant's data to fill: a spare one of n to 2n
// bytes, else a new one.
func (s *spareMirrors) take(n int) []byte {
	s.mu.Lock()
	for i, b := range s.bufs {
		if c := cap(b); c >= n && c <= 2*n {
			last := len(s.bufs) - 1
			s.bufs[i], s.bufs[last] = s.bufs[last], nil
			s.bufs = s.bufs[:last]
			s.mu.Unlock()
			return b[:n]
		}
	}
	s.mu.Unlock()
	return s.alloc.filled(n)
}

// keep adds b, a mapped mirror's buffer that nothing uses any more, to the spares.
func (s *spareMirrors) keep(b []byte) {
	s.mu.Lock()
	s.bufs = append(s.bufs, b)
	s.mu.Unlock()
}

// free frees the spares, once nothing can take one.
func (s *spareMirrors) free() {
	for _, b := range s.bufs {
		s.alloc.free(b)
	}
	s.bufs = nil
}

// mirrorState is a remote queue's mirror: the data, its version, and what it counts of the
// queue's grants (guarded by remoteQueue.sendMu).
type mirrorState struct {
	mirror  []byte        // 8-byte aligned, never nil; written by a grant's data or under a write grant
	version uint64        // the version the mirror holds (0: none)
	stale   [][]byte      // mirrors that Resize replaced, freed at the write grant's release
	held    int           // grants delivered and not given back (sendMu)
	recycle bool          // the last batch said recycle (sendMu)
	guarded bool          // the mirror is read-only: read grants hold it, in a checked job (sendMu)
	viewed  hugemem.Share // the owner's buffer that the mirror views; zero: the mirror is this process's
}

// viewing reports whether the mirror is a view of the owner's data.
func (m *mirrorState) viewing() bool { return m.viewed != hugemem.Share{} }

// landed takes the version that grant m brings: its data, if any, is in the mirror already
// (grantSink); a view's payload names the data (landView); a grant without either must
// find the mirror holding its version.
func (q *remoteQueue) landed(m grantMsg, payload []byte) error {
	switch {
	case m.data:
		q.r.j.bufs.resizeKeep(&q.mirror, m.size, q.r.spare.take) // sets the size, 0 included
	case m.view:
		if err := q.landView(payload); err != nil {
			return fmt.Errorf("grant of %s: reading it in rank %d's memory (ORWL_SHM=off copies it instead): %w", q.r.j.locationAt(m.loc), q.owner, err)
		}
	case q.version != m.version:
		return fmt.Errorf("grant of %s without data: this process's copy holds version %d, not %d", q.r.j.locationAt(m.loc), q.version, m.version)
	}
	q.version = m.version
	return nil
}

// landView makes the mirror a view of the owner's data that payload names, mapped unless
// it is already. As data does, a new view comes only when no grant of q is held (the
// owner's buffer changes under a write grant, a switch from a copy needs a new version),
// so the mirror's buffer may go (dropMirror).
func (q *remoteQueue) landView(payload []byte) error {
	s, err := hugemem.ParseShare(payload)
	if err != nil || q.viewed == s {
		return err
	}
	v, err := hugemem.View(s)
	if err != nil {
		return err
	}
	q.dropMirror()
	q.mirror, q.viewed = v, s
	return nil
}

// dropMirror lets the mirror's buffer go, which no grant holds: a view is unmapped, a mapped
// buffer goes to the spares, and the mirror holds nothing.
func (q *remoteQueue) dropMirror() {
	switch {
	case q.viewing():
		q.r.j.bufs.free(q.mirror)
		q.viewed = hugemem.Share{}
	case hugemem.Mapped(q.mirror):
		q.r.spare.keep(q.mirror)
	}
	q.mirror = alignedBytes(0)
}

// hold counts n grants of a batch delivered, the last of which said recycle; read: they
// are reads, which make the mirror read-only in a checked job. q.sendMu held.
func (q *remoteQueue) hold(n int, recycle, read bool) {
	q.held += n
	q.recycle = recycle
	if read {
		q.guard(true)
	}
}

// givenBack counts a grant of version given back, q.sendMu held, and reports whether the
// mirror is given up with it. A write's release carries the mirror back (written): it is
// the owner's next version, and the buffers Resize replaced are freed. Otherwise the
// mirror is given up when no grant of q is held any more, the mirror is mapped, and the
// last batch said recycle or no request of q is left (see above). The mirror then holds
// nothing, before the release that says so is sent: the next grant's data finds it empty.
func (q *remoteQueue) givenBack(version uint64, written bool) bool {
	if written {
		q.version = version + 1 // what the owner's data becomes
		q.r.j.bufs.freeStale(&q.stale)
	}
	q.held--
	var spare []byte
	if q.held == 0 {
		q.guard(false)
		if !written && (q.recycle || q.active == 0) && !q.viewing() && hugemem.Mapped(q.mirror) {
			spare, q.mirror, q.version = q.mirror, alignedBytes(0), 0
		}
		q.recycle = false
	}
	if spare == nil {
		return false
	}
	q.r.spare.keep(spare)
	return true
}

// guard makes the mirror read-only (read) or writable again, in a checked job (see
// buffers); q.sendMu held.
func (q *remoteQueue) guard(read bool) {
	if q.guarded != read && q.r.j.bufs.checked {
		q.r.j.bufs.guard(q.mirror, read)
		q.guarded = read
	}
}

// grantSink returns where the data of a grant goes: the mirror of its ticket's location.
// Data for a ticket that holds no grant to receive it is refused, the peer is broken, unless
// the job has failed: the owner granted it before it heard of the failure, and refusing it
// would cut the connection, which the owner would take for this process's loss. It lands
// in the connection's scratch memory then (nil), and Handle's error changes nothing.
func (r *requester) grantSink(from int, m grantMsg) ([]byte, error) {
	if !m.data {
		return nil, nil
	}
	t := r.find(from, m.ticket)
	if t == nil {
		if r.j.failed.Load() {
			return nil, nil
		}
		return nil, fmt.Errorf("orwl: data for unknown ticket %d", m.ticket)
	}
	if r.j.rec != nil {
		t.transfer = r.j.rec.TaskTrack(t.spec.Task).BeginTransfer(trace.Loc(r.j.locationAt(m.loc)), trace.In, from, int64(m.size))
	}
	// Data comes only when no grant of the queue is held (a new version needs every reader
	// of the old one to have released), so the mirror is writable; a failed job's late
	// grant is the exception that must not fault.
	q := t.q
	if r.j.bufs.checked {
		q.sendMu.Lock()
		q.guard(false)
		q.sendMu.Unlock()
	}
	if q.viewing() { // the owner's buffer, read-only: the data needs a buffer of this process's
		q.dropMirror()
	}
	return r.j.bufs.resizeKeep(&q.mirror, m.size, r.spare.take), nil
}

// recyclable reports whether the copy of the data that s's grant leaves the requester is
// not read again before the data changes, so that the requester may give its buffer to
// another mirror: s is a one-shot read, and the entry behind its read group is a write of
// another process (or of this one), whose release makes a new version; l.mu held, with s
// granted. An iterative read's next request is not there yet, and a write of the
// requester's own needs the copy.
func (s *served) recyclable() bool {
	if s.rnd >= 0 || s.req.Mode() != fifo.Read {
		return false
	}
	other := true
	behind := s.req.Behind(func(r *fifo.Request) {
		if o, ok := r.Tag.(*served); ok && o.from == s.from {
			other = false
		}
	})
	return behind == fifo.Write && other
}

// setMirror records that rank's mirror of l holds version (0: nothing).
func (l *location) setMirror(rank int, version uint64) {
	l.sendMu.Lock()
	l.mirrors[rank] = version
	l.sendMu.Unlock()
}

// writeBackSink returns where the data of a write release goes: the location's data. Data
// for a ticket that holds no write grant is refused, the peer is broken, unless the job has
// failed (see requester.grantSink).
func (o *owner) writeBackSink(from int, m releaseMsg) ([]byte, error) {
	if !m.data {
		return nil, nil
	}
	s := o.servedGrant(from, m.ticket)
	if s == nil || s.req.Mode() != fifo.Write {
		if o.j.failed.Load() {
			return nil, nil
		}
		return nil, fmt.Errorf("orwl: write-back for ticket %d, which holds no write grant", m.ticket)
	}
	if o.j.rec != nil {
		s.transfer = o.j.rec.TaskTrack(s.loc.id.Task).BeginTransfer(trace.Loc(s.loc.id), trace.In, from, int64(m.size))
	}
	return o.j.bufs.resizeKeep(&s.loc.data, m.size, s.loc.filledAlloc()), nil
}
