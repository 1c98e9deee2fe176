package orwl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/transport"
)

// Pairs (docs/design.md, "Pairs"). A location whose FIFO holds, at the schedule, exactly
// one iterative write of a task of its owner's process and one iterative read of a task of
// another process of the host, through shared memory, only ever alternates them, round
// after round: the writer's round k, then the reader's (or the reader's first, when its
// position comes first). The owner then makes it a pair: the data moves into a buffer that
// both processes map, and a header in shared memory holds the FIFO as counters, so that
// neither side sends a message, runs a FIFO operation or wakes a goroutine for a round:
//
//   - granted, stored by the owner: the reader may acquire its round k once granted > k
//     (the writer's release stores it; ^0 once the writer has gone);
//   - acquired, stored by the reader: the rounds it acquired, its request of round k+1 being
//     made as it acquires round k (rule 6);
//   - released, stored by the reader: the rounds it released (pairGone once it has gone);
//     the writer may acquire its round k once released >= k (k+1 when the reader comes
//     first).
//
// A task that waits for its round polls its counter while the host's processes poll
// (ticketBase.Waiting), then says in the header that it sleeps and parks: the other side's
// next store then comes with a message (msgPair) that wakes it. The owner's side runs under
// the location's lock; the reader's is its task's alone.
//
// A request of any other handle on the location dissolves the pair, under the location's
// lock, before it is placed (location.dissolve): the owner marks the reader's acquired
// counter (pairDissolved), reads the counters, and places in the FIFO the requests they
// imply, which alternate the writer's and the reader's rounds from the first one not
// released to the last one requested; the newcomer follows them. The reader's rounds stay
// entries of the FIFO that its counters drive (pairServed): the FIFO grants them with a
// grant message among those of the same operation (flagPair), so that the reader's process
// sees a read group granted whole, and the reader, which sees the mark, reports each
// acquire and release with a message, which the owner takes once (by round) whether or not
// the counters had told it first. The data stays in shared memory, where the reader reads
// it in place; a buffer that Resize or a write-back replaces is named in the header before
// the reader's next grant (gen, share).
//
// A pair has no FIFO operation for the checkpoints' round snapshots nor the trace's events
// to follow: a job that takes checkpoints or a trace makes no pairs. A checked job makes
// them: the reader's data is a read-only view in any job, and the writer's buffers are
// shared mappings, pages of their own.

// The reader's counters' flags: the owner dissolved the pair (acquired), the reader has
// gone (released: its handle was cancelled or closed, it requests no more rounds).
const (
	pairDissolved = 1 << 63
	pairGone      = 1 << 62
	pairCount     = pairGone - 1
)

// pairHeader is the memory the two processes of a pair share, each side's words on cache
// lines of their own.
type pairHeader struct {
	// Stored by the owner.
	granted atomic.Uint64    // the reader may acquire round k once granted > k
	gen     atomic.Uint64    // changes when the data moves to another buffer, named in share
	share   [3]atomic.Uint64 // the data's hugemem.Share (pid<<32|fd, offset, length)
	_       [24]byte
	wSleeps atomic.Uint32 // the writer waits, parked, for the reader's release
	_       [60]byte
	// Stored by the reader.
	acquired atomic.Uint64 // rounds the reader acquired; pairDissolved
	_        [56]byte
	released atomic.Uint64 // rounds the reader released; pairGone
	ticket   atomic.Uint64 // the id of the reader's latest request (the deadlock watch)
	rSleeps  atomic.Uint32 // the reader waits, parked, for its grant
	_        [44]byte
}

// pairHeaderSize is the length of the shared buffer that holds a pairHeader.
const pairHeaderSize = int(unsafe.Sizeof(pairHeader{}))

// header returns the pairHeader at the start of buf.
func header(buf []byte) *pairHeader { return (*pairHeader)(unsafe.Pointer(unsafe.SliceData(buf))) }

// setShare names the data's buffer s in h, for the reader's next grant.
func (h *pairHeader) setShare(s hugemem.Share) {
	h.share[0].Store(uint64(s.PID)<<32 | uint64(uint32(s.FD)))
	h.share[1].Store(uint64(s.Off))
	h.share[2].Store(uint64(s.Len))
	h.gen.Add(1)
}

// dataShare returns the data's buffer that h names.
func (h *pairHeader) dataShare() hugemem.Share {
	w := h.share[0].Load()
	return hugemem.Share{PID: int32(w >> 32), FD: int32(uint32(w)), Off: int64(h.share[1].Load()), Len: int64(h.share[2].Load())}
}

// pairOwner is the owner's side of a pair, in its location; l.mu guards it but for
// dissolved, which the writer's tasks read without it.
type pairOwner struct {
	hdr       *pairHeader
	hdrBuf    []byte         // the shared buffer of hdr
	wHandle   *handle.Handle // the writer's
	rank      int            // the reader's process
	w, r      pairSide
	readFirst bool // the reader's position comes before the writer's
	dissolved atomic.Bool

	// The writer's tickets, while paired: the one it holds, and its request waiting.
	held, waiting *localTicket
	wAcquired     int  // rounds the writer acquired
	wGone         bool // the writer's handle was cancelled or closed
	published     []byte

	// Once dissolved: the reader's requests in the FIFO, by round, and how far the owner
	// took its counters (placed: its requests of rounds below; done: its releases).
	entries      map[int]*pairServed
	placed, done int
}

// pairSide is one handle of a pair, as the deadlock watch names it.
type pairSide struct{ task, pos int }

// pairServed is a request of a pair's reader in the FIFO of its dissolved pair.
type pairServed struct {
	req fifo.Request
	l   *location
	rnd int
}

func (s *pairServed) task() int    { return s.l.pair.r.task }
func (s *pairServed) round() int   { return s.rnd }
func (s *pairServed) failed(error) {} // the reader learns of the job's failure itself

// granted grants the reader its round, once the pair has dissolved: with a grant message
// (flagPair) among those of the same FIFO operation for the reader's process, which its
// requester delivers together (requester.granted), rather than through the grant count,
// which the reader could see before them. A round granted while paired (the head of the
// FIFO that dissolve made) is the reader's already.
func (s *pairServed) granted(onTask, more bool) {
	l, p := s.l, s.l.pair
	if p.hdr.granted.Load() > uint64(s.rnd) || p.hdr.released.Load()&pairGone != 0 {
		return // its report that it has gone cancels s
	}
	l.sendMu.Lock()
	err := l.publish() // no writer holds the data: the reader's round is granted
	if err == nil {
		m := grantMsg{loc: l.index, ticket: p.hdr.ticket.Load(), version: l.version, more: more, pair: true}
		err = l.j.mesh.SendAhead(p.rank, transport.Owner, m.header(), nil)
	}
	l.sendMu.Unlock()
	if err == nil {
		err = l.j.mesh.Flush(p.rank, transport.Owner, onTask)
	}
	if err != nil && !peerClosed(err) {
		l.j.fail(fmt.Errorf("orwl: sending the grant of %s to rank %d: %w", l.id, p.rank, err))
	}
}

// pairUp makes l a pair when its initial requests allow it (see above); l.mu held, at the
// schedule, with l.pending holding the job's initial requests of l. It reports whether it
// did; the requests are then the pair's, and none is placed in the FIFO. The error is the
// reader's process's, whose setup message could not be sent: it fails the job.
func (l *location) pairUp() (bool, error) {
	j := l.j
	if len(l.pending) != 2 || j.node == nil || j.ckpt != nil || j.rec != nil {
		return false, nil
	}
	a, b := l.pending[0], l.pending[1]
	if b.pos < a.pos || b.pos == a.pos && b.task < a.task {
		a, b = b, a
	}
	readFirst := a.mode == fifo.Read
	if readFirst {
		a, b = b, a
	}
	w, okW := a.req.Tag.(*localTicket)
	r, okR := b.req.Tag.(*served)
	if !okW || !okR || !a.initial || !b.initial || a.mode != fifo.Write || b.mode != fifo.Read ||
		!w.spec.Iterative || r.rnd < 0 || !j.mesh.SharedMemory(r.from, transport.Owner) {
		return false, nil
	}
	hdrBuf := hugemem.AllocSharedAny(pairHeaderSize)
	data := hugemem.AllocSharedAny(len(l.data))
	hs, okH := hugemem.SharedAt(hdrBuf)
	ds, okD := hugemem.SharedAt(data)
	if !okH || !okD {
		hugemem.Free(hdrBuf)
		hugemem.Free(data)
		return false, nil
	}
	copy(data, l.data)
	j.bufs.free(l.data)
	l.data = data
	p := &pairOwner{hdr: header(hdrBuf), hdrBuf: hdrBuf, wHandle: w.h, rank: r.from, readFirst: readFirst, published: data,
		w: pairSide{w.spec.Task, w.spec.Pos}, r: pairSide{r.taskID, r.pos}}
	p.hdr.setShare(ds)
	p.hdr.ticket.Store(r.id)
	if readFirst {
		p.hdr.granted.Store(1)
	}
	l.pair = p
	p.waiting = w
	w.rnd = 0
	if !readFirst {
		w.latch.Grant()
	}
	payload := hs.Append(nil)
	payload = ds.Append(payload)
	err := j.mesh.Send(r.from, transport.Owner, pairMsg{loc: l.index, kind: pairSetup, ticket: r.id}.header(), payload)
	if err != nil && !peerClosed(err) {
		return true, fmt.Errorf("orwl: pairing %s with rank %d: %w", l.id, r.from, err)
	}
	return true, nil
}

// wOpen reports whether the writer may acquire round k; l.mu held or not (the counters only
// grow).
func (p *pairOwner) wOpen(k int) bool {
	rel := p.hdr.released.Load()
	need := uint64(k)
	if p.readFirst {
		need++
	}
	return rel&pairGone != 0 || rel&pairCount >= need
}

// pairRequest makes t the writer's request of round rnd of the pair, and reports whether it
// did: not for a request of another handle, nor once the pair has dissolved. The writer
// requests round k as it acquires round k-1 (rule 6), which it then holds. t, a ticket
// reused, changes under l.mu, where a wake on a reader goroutine looks at it (pairReported).
func (l *location) pairRequest(t *localTicket, rnd int) bool {
	p := l.lockPair(t)
	if p == nil {
		return false
	}
	defer l.mu.Unlock()
	t.rnd = rnd
	t.latch.Start()
	p.held, p.waiting = p.waiting, t
	p.wAcquired = t.rnd
	if p.wOpen(t.rnd) {
		t.latch.Grant()
	}
	return true
}

// lockPair returns l's pair, l.mu held, when t is a request of its writer and the pair has
// not dissolved; nil, l.mu not held, otherwise.
func (l *location) lockPair(t *localTicket) *pairOwner {
	p := l.pair
	if p == nil || t.h != p.wHandle {
		return nil
	}
	l.mu.Lock()
	if p.dissolved.Load() {
		l.mu.Unlock()
		return nil
	}
	return p
}

// pairPoll grants the writer's waiting ticket t when its round is open; it reports whether
// t is settled.
func (l *location) pairPoll(t *localTicket) bool {
	if t.latch.State() != handle.LatchPending {
		return true
	}
	p := l.pair
	if !p.wOpen(t.rnd) {
		return false
	}
	l.mu.Lock()
	if !p.dissolved.Load() && p.waiting == t {
		t.latch.Grant()
	}
	l.mu.Unlock()
	return t.latch.State() != handle.LatchPending
}

// pairRelease ends the writer's round of t, unless the pair has dissolved (it reports
// whether it did): a new version of the data, named to the reader when it moved, and the
// reader's round granted.
func (l *location) pairRelease(t *localTicket) bool {
	p := l.lockPair(t)
	if p == nil {
		return false
	}
	l.version++
	l.j.bufs.freeStale(&l.stale)
	if p.held == t {
		p.held = nil
	}
	if err := l.publish(); err != nil {
		l.mu.Unlock()
		l.j.fail(err)
		return true
	}
	next := uint64(t.rnd) + 1
	if p.readFirst {
		next++
	}
	p.hdr.granted.Store(next)
	l.mu.Unlock()
	l.wakeReader()
	return true
}

// pairCancel withdraws the writer's ticket t, unless the pair has dissolved (it reports
// whether it did): the writer has gone, and every round of the reader is granted from now
// on, with the data as it is.
func (l *location) pairCancel(t *localTicket) bool {
	p := l.lockPair(t)
	if p == nil {
		return false
	}
	t.latch.Cancel()
	if p.waiting == t {
		p.waiting = nil
	}
	p.wGone = true
	p.hdr.granted.Store(math.MaxUint64)
	l.mu.Unlock()
	l.wakeReader()
	return true
}

// publish names l's data to the reader when it moved since it was last named, with l.mu
// held while paired, l.sendMu once dissolved (pairServed.granted). It fails only where the
// system refused the shared buffer that pairAlloc asked for: the reader cannot see the data.
func (l *location) publish() error {
	p := l.pair
	if unsafe.SliceData(p.published) == unsafe.SliceData(l.data) && len(p.published) == len(l.data) {
		return nil
	}
	s, ok := hugemem.SharedAt(l.data)
	if !ok {
		return fmt.Errorf("orwl: %s: the system refused shared memory for its data, which rank %d reads in place", l.id, p.rank)
	}
	p.hdr.setShare(s)
	p.published = l.data
	return nil
}

// filledAlloc is dataAlloc for a buffer that the caller fills at once.
func (l *location) filledAlloc() func(int) []byte {
	if l.pair != nil {
		return l.pairAlloc
	}
	return l.j.bufs.filledData
}

// pairAlloc allocates l's data while l is or was a pair: in shared memory, whatever its size.
func (l *location) pairAlloc(n int) []byte {
	if b := hugemem.AllocSharedAny(n); b != nil {
		return b
	}
	return l.j.bufs.data(n) // publish fails the job: the reader cannot see it
}

// dataAlloc is the allocator of l's data: pairAlloc for a pair, else the job's.
func (l *location) dataAlloc() func(int) []byte {
	if l.pair != nil {
		return l.pairAlloc
	}
	return l.j.bufs.data
}

// wakeReader sends the reader the message that wakes it when it sleeps.
func (l *location) wakeReader() {
	h := l.pair.hdr
	if h.rSleeps.Load() != 0 && h.rSleeps.CompareAndSwap(1, 0) {
		l.sendPair(pairWake, 0)
	}
}

// sendPair sends the pair's reader kind about count; a failure fails the job.
func (l *location) sendPair(kind uint8, count uint64) {
	err := l.j.mesh.Send(l.pair.rank, transport.Owner, pairMsg{loc: l.index, kind: kind, count: count}.header(), nil)
	if err != nil && !peerClosed(err) {
		l.j.fail(fmt.Errorf("orwl: waking the reader of %s in rank %d: %w", l.id, l.pair.rank, err))
	}
}

// dissolve turns the pair back into a FIFO, before another request is placed (see above);
// l.mu held. It returns the grants to deliver.
func (l *location) dissolve(granted []*fifo.Request) []*fifo.Request {
	p := l.pair
	acq := l.pair.hdr.acquired.Or(pairDissolved) & pairCount
	rel := p.hdr.released.Load()
	p.dissolved.Store(true)
	p.entries = map[int]*pairServed{}
	rGone := rel&pairGone != 0
	rDone := int(rel & pairCount)
	rLast := int(acq) // its request of round acq waits, unless it has gone
	if rGone {
		rLast--
	}
	p.placed, p.done = int(acq)+1, rDone
	// The writer holds round wAcquired-1 (held), and its request of round wAcquired waits
	// unless it has gone.
	writes := map[int]*localTicket{}
	for _, t := range []*localTicket{p.held, p.waiting} {
		if t != nil {
			writes[t.rnd] = t
		}
	}
	first, last := rDone, rLast
	for k := range writes {
		first, last = min(first, k), max(last, k)
	}
	for k := first; k <= last; k++ {
		for _, write := range []bool{!p.readFirst, p.readFirst} {
			if t := writes[k]; write && t != nil {
				granted, _ = l.fifo.Enqueue(&t.req, fifo.Write, granted)
			} else if !write && k >= rDone && k <= rLast {
				granted = l.placeRead(k, granted)
			}
		}
	}
	p.held, p.waiting = nil, nil
	return granted
}

// placeRead places the reader's request of round k in the FIFO of its dissolved pair, and
// returns granted with what that grants; l.mu held.
func (l *location) placeRead(k int, granted []*fifo.Request) []*fifo.Request {
	s := &pairServed{l: l, rnd: k}
	s.req.Tag = s
	l.pair.entries[k] = s
	granted, _ = l.fifo.Enqueue(&s.req, fifo.Read, granted) // s is idle
	return granted
}

// pairReported takes the reader's report (msgPair) of its acquire or release count, or
// that it has gone, once the pair dissolved (or while the writer sleeps: then it only
// wakes it).
func (o *owner) pairReported(from int, m pairMsg) error {
	l, err := o.j.ownedByIndex(m.loc)
	if err != nil || l.pair == nil || l.pair.rank != from {
		return fmt.Errorf("a pair message for %d, which is not a pair of rank %d's", m.loc, from)
	}
	p := l.pair
	if !p.dissolved.Load() { // a wake of the writer
		p.hdr.wSleeps.Store(0)
		l.mu.Lock()
		if t := p.waiting; !p.dissolved.Load() && t != nil && t.latch.State() == handle.LatchPending && p.wOpen(t.rnd) {
			t.latch.Grant()
		}
		l.mu.Unlock()
		return nil
	}
	var buf [grantBuf]*fifo.Request
	granted := buf[:0]
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return nil
	}
	switch m.kind {
	case pairAcquire: // its request of round count
		for k := p.placed; k <= int(m.count); k++ {
			granted = l.placeRead(k, granted)
		}
		p.placed = max(p.placed, int(m.count)+1)
	case pairRelease:
		for k := p.done; k < int(m.count&pairCount); k++ {
			if s := p.entries[k]; s != nil {
				delete(p.entries, k)
				granted, _ = l.fifo.Release(&s.req, granted)
			}
		}
		p.done = max(p.done, int(m.count&pairCount))
		if m.count&pairGone != 0 {
			for k, s := range p.entries {
				delete(p.entries, k)
				granted = l.fifo.Cancel(&s.req, granted)
			}
		}
	}
	l.granting(granted)
	l.mu.Unlock()
	deliver(granted, false)
	return nil
}

// pairReader is the reader's side of a pair, in its remoteQueue.
type pairReader struct {
	handle *handle.Handle // the reader's
	hdr    *pairHeader
	hdrBuf []byte     // the view of the owner's buffer that holds hdr
	mu     sync.Mutex // guards the grant of a round and the reuse of the reader's tickets
	data   []byte     // a view of the owner's data
	gen    uint64     // the generation of data
}

// pairSetup takes the owner's message that makes q a pair: the header's and the data's
// buffers (payload), and the reader's first request, ticket.
func (r *requester) pairSetup(from int, m pairMsg, payload []byte) error {
	q, ok := r.j.queueAt(m.loc).(*remoteQueue)
	if !ok || q.owner != from || len(payload) != 2*hugemem.ShareSize {
		return fmt.Errorf("a pair of %d, which is not a location of rank %d's", m.loc, from)
	}
	hs, err := hugemem.ParseShare(payload[:hugemem.ShareSize])
	if err != nil {
		return err
	}
	hdrBuf, err := hugemem.ViewWritable(hs)
	if err != nil || len(hdrBuf) < pairHeaderSize {
		return fmt.Errorf("mapping the pair header of %s: %v", r.j.locationAt(m.loc), err)
	}
	p := &pairReader{hdr: header(hdrBuf), hdrBuf: hdrBuf}
	if err := p.remap(); err != nil {
		return fmt.Errorf("mapping the data of %s: %w", r.j.locationAt(m.loc), err)
	}
	t := r.find(from, m.ticket)
	if t == nil {
		return fmt.Errorf("a pair of %s for ticket %d, which does not wait", r.j.locationAt(m.loc), m.ticket)
	}
	p.handle = t.h
	q.pairWaiting.Store(t)
	p.hdr.rSleeps.Store(1) // its task may have parked before the pair came: the grant wakes it
	q.sendMu.Lock()
	if q.active > 1 { // another request of this process is on its way (see freeze)
		p.freeze()
	}
	q.pair.Store(p)
	q.sendMu.Unlock()
	if t.latch.State() == handle.LatchCancelled { // its handle closed before the pair came
		q.pairRelease(p, t, true)
		return nil
	}
	p.poll(t)
	return nil
}

// remap maps the data the header names, when it changed.
func (p *pairReader) remap() error {
	gen := p.hdr.gen.Load()
	if gen == p.gen && p.data != nil {
		return nil
	}
	v, err := hugemem.View(p.hdr.dataShare())
	if err != nil {
		return err
	}
	if p.data != nil {
		hugemem.Free(p.data)
	}
	p.data, p.gen = v, gen
	return nil
}

// paired returns the pair of t's queue when t is a request of the pair's reader, else nil.
func (t *remoteTicket) paired() *pairReader {
	if p := t.q.pair.Load(); p != nil && t.h == p.handle {
		return p
	}
	return nil
}

// pairRequest makes t, the reader's request of round t.rnd, the pair's: it notes the
// acquire of the round before (rule 6), and reports it when the pair has dissolved.
func (q *remoteQueue) pairRequest(p *pairReader, t *remoteTicket) {
	h := p.hdr
	h.ticket.Store(t.id)
	k := uint64(t.rnd)
	for {
		old := h.acquired.Load()
		if old&pairDissolved != 0 {
			h.acquired.Store(k | pairDissolved)
			q.sendPair(pairAcquire, k)
			return
		}
		if h.acquired.CompareAndSwap(old, k) {
			return
		}
	}
}

// pairRelease ends the reader's round of t; the owner hears of it when its writer sleeps or
// the pair has dissolved: then only from a message, once this process has marked it.
func (q *remoteQueue) pairRelease(p *pairReader, t *remoteTicket, gone bool) {
	h := p.hdr
	n := uint64(t.rnd) + 1
	if gone { // marked even once dissolved: a grant on its way finds the request cancelled
		n = h.released.Or(pairGone) | pairGone
	}
	if h.acquired.Load()&pairDissolved != 0 { // told in order with this process's requests
		q.sendPair(pairRelease, n)
		return
	}
	h.released.Store(n)
	switch {
	case h.acquired.Load()&pairDissolved != 0: // the owner may have read the count before
		q.sendPair(pairRelease, n)
	case h.wSleeps.Load() != 0 && h.wSleeps.CompareAndSwap(1, 0):
		q.sendPair(pairRelease, n)
	}
}

// freeze marks the pair dissolved from the reader's side, before another handle of this
// process sends a request on its location, which dissolves it at the owner: the reader's
// releases and acquires then travel as messages behind that request, never ahead of it
// through the counters, as they would through the connection without the pair.
func (p *pairReader) freeze() { p.hdr.acquired.Or(pairDissolved) }

// sendPair sends the owner kind about count.
func (q *remoteQueue) sendPair(kind uint8, count uint64) {
	err := q.r.mesh.Send(q.owner, transport.Requester, pairMsg{loc: q.loc, kind: kind, count: count}.header(), nil)
	if err != nil && !peerClosed(err) {
		q.r.j.fail(fmt.Errorf("orwl: telling rank %d of a round of %s: %w", q.owner, q.r.j.locationAt(q.loc), err))
	}
}

// pairPoll grants t, a request of a paired queue, when its round is granted; it reports
// whether t is settled. The data it reads comes with the grant: mapped anew when it moved.
// Only t's task calls it (another goroutine calls pairReader.poll).
func (t *remoteTicket) pairPoll() bool {
	if t.latch.State() != handle.LatchPending {
		return true
	}
	p := t.paired()
	if p == nil || p.hdr.granted.Load() <= uint64(t.rnd) {
		return false
	}
	p.mu.Lock()
	if t.latch.State() == handle.LatchPending {
		p.grantLocked(t)
	}
	p.mu.Unlock()
	return true
}

// grantLocked grants t, whose round is granted, with the data mapped anew when it moved;
// p.mu held.
func (p *pairReader) grantLocked(t *remoteTicket) {
	if err := p.remap(); err != nil {
		t.latch.Fail(fmt.Errorf("orwl: mapping the data of %s, rank %d's: %w", t.q.r.j.locationAt(t.q.loc), t.q.owner, err))
		return
	}
	t.latch.Grant()
}

// pairAwait implements ticket: the writer's request of a pair that has not dissolved polls
// the reader's releases (see pairWait).
func (t *localTicket) pairAwait(ctx context.Context) bool {
	if !t.pairAwaits() {
		return false
	}
	l := t.loc
	pairWait(l.j.task[t.spec.Task].poller, ctx, func() bool { return l.pairPoll(t) }, &l.pair.hdr.wSleeps)
	return true
}

// pairAwaits reports whether t is a request of the writer of a pair that has not
// dissolved, whose grant its counters decide.
func (t *localTicket) pairAwaits() bool {
	p := t.loc.pair
	return p != nil && t.h == p.wHandle && !p.dissolved.Load()
}

// pairAwait implements ticket: a request of a pair's reader polls its grant count (see
// pairWait). Its first request, made before the owner's schedule made the pair, polls the
// mesh too, for the owner's pairSetup or its grant.
func (t *remoteTicket) pairAwait(ctx context.Context) bool {
	if t.spec.Mode != fifo.Read || !t.spec.Iterative {
		return false
	}
	p := t.q.pair.Load()
	if p == nil {
		t.q.r.j.task[t.spec.Task].poller.Poll(func() bool { return t.pairPoll() || t.settled() }, ctx.Done())
		return true
	}
	if t.h != p.handle {
		return false
	}
	pairWait(t.q.r.j.task[t.spec.Task].poller, ctx, t.pairPoll, &p.hdr.rSleeps)
	return true
}

// pairWait polls poll, which grants the waiting request when its round opens, as a task
// polls for a message (transport.Poller.Await); before the task parks, it says so in
// sleeps, the header's word that the other side reads after its store: the store that opens
// the round then comes before this look at it, or with a message that wakes the task.
func pairWait(pl *transport.Poller, ctx context.Context, poll func() bool, sleeps *atomic.Uint32) {
	pl.Await(poll, ctx.Done())
	if !poll() {
		sleeps.Store(1)
		poll()
	}
}

// pairLanded takes a dissolved pair's grant message for t (requester.granted): the data it
// reads is the pair's, mapped anew when it moved.
func (t *remoteTicket) pairLanded() error {
	p := t.paired()
	if p == nil {
		return fmt.Errorf("a pair's grant of %s for ticket %d, which is not its reader's", t.q.r.j.locationAt(t.q.loc), t.id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.remap()
}

// pairGone returns, for rank from's grant m of a dissolved pair's reader, its queue when
// the reader has gone, else nil: a grant that the owner sent before the reader's report came
// finds its request cancelled.
func (r *requester) pairGone(from int, m grantMsg) *remoteQueue {
	q, ok := r.j.queueAt(m.loc).(*remoteQueue)
	if !m.pair || !ok || q.owner != from {
		return nil
	}
	if p := q.pair.Load(); p != nil && p.hdr.released.Load()&pairGone != 0 {
		return q
	}
	return nil
}

// heldOf counts the grants of batch that the mirror holds: those of a pair's reader read the
// pair's buffer instead.
func (q *remoteQueue) heldOf(batch []*remoteTicket) int {
	n := len(batch)
	if q.pair.Load() == nil {
		return n
	}
	for _, t := range batch {
		if t.paired() != nil {
			n--
		}
	}
	return n
}

// pairWoken takes the owner's message that the reader's grant came while it slept.
func (r *requester) pairWoken(from int, m pairMsg) error {
	q, ok := r.j.queueAt(m.loc).(*remoteQueue)
	if !ok || q.owner != from || q.pair.Load() == nil {
		return fmt.Errorf("a pair message for %d, which is not a pair of rank %d's", m.loc, from)
	}
	if t := q.pairWaiting.Load(); t != nil {
		q.pair.Load().poll(t)
	}
	return nil
}

// poll grants t, a request of the pair's reader, when its round is granted, from another
// goroutine than its task's, which may reuse t for a later round meanwhile
// (remoteQueue.Request, under p.mu).
func (p *pairReader) poll(t *remoteTicket) {
	p.mu.Lock()
	if t.latch.State() == handle.LatchPending && p.hdr.granted.Load() > uint64(t.rnd) {
		p.grantLocked(t)
	}
	p.mu.Unlock()
}

// pair dispatches a pair's message.
func (n *node) pair(from int, m pairMsg, payload []byte) error {
	switch m.kind {
	case pairSetup:
		return n.req.pairSetup(from, m, payload)
	case pairWake:
		return n.req.pairWoken(from, m)
	case pairAcquire, pairRelease:
		return n.own.pairReported(from, m)
	}
	return fmt.Errorf("a pair message of kind %d", m.kind)
}

// peerClosed reports whether err says that the peer closed its mesh: nobody waits for the
// message.
func peerClosed(err error) bool { return errors.Is(err, transport.ErrPeerClosed) }

// queueAt returns the queue of the location numbered idx, nil for none.
func (j *job) queueAt(idx uint32) handle.Queue {
	if int(idx) >= len(j.queues) {
		return nil
	}
	return j.queues[idx]
}

// pairWait describes, for the deadlock watch, the wait of the writer's ticket t of a pair
// that has not dissolved, and reports whether it did so (w filled in); l.mu not held. The
// reader holds the round before t's, acquired when it asked for its next one.
func (l *location) pairWait(t *localTicket, w *waitRecord) bool {
	p := l.pair
	if p == nil || t.h != p.wHandle {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.dissolved.Load() || p.waiting != t || t.latch.State() != handle.LatchPending {
		return false
	}
	h := p.hdr
	acq, rel := h.acquired.Load()&pairCount, h.released.Load()&pairCount
	hold := HoldUnknown
	if acq > rel {
		hold = Held
	}
	w.Loc, w.grants = int(l.index), acq+rel+h.granted.Load()
	w.Holders = []holder{{Task: p.r.task, Pos: p.r.pos, Hold: hold}}
	return true
}

// pairServedRecord is the reader's request of a pair that has not dissolved, for the
// deadlock watch, when it waits for the writer's round; l.mu held.
func (l *location) pairServedRecord() (servedRecord, bool) {
	p := l.pair
	if p == nil || p.dissolved.Load() {
		return servedRecord{}, false
	}
	h := p.hdr
	if h.released.Load()&pairGone != 0 {
		return servedRecord{}, false
	}
	k := h.acquired.Load() & pairCount // the round of its request that waits
	rec := servedRecord{From: p.rank, Ticket: h.ticket.Load(), Granted: h.granted.Load() > k}
	if !rec.Granted && !p.wGone {
		hold := GrantedOnly
		if p.held != nil {
			hold = Held
		}
		rec.Holders = []holder{{Task: p.w.task, Pos: p.w.pos, Hold: hold}}
	}
	return rec, true
}
