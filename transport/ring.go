package transport

import (
	"sync/atomic"
	"unsafe"

	"github.com/orwl-go/orwl/internal/release"
)

// A ring carries one direction of a shared-memory connection (shm.go) as records: an 8-byte
// header word, then the bytes of one write of at most shmChunk bytes, padded to whole words.
// The header is written last, so a reader that polls the word at its position sees the
// record whole, and a small record (a grant, a release) reaches the reader in the cache
// line the reader polls: one transfer between the two cores, where a count of bytes kept
// apart from the data takes two. The writer clears the word after its record before it
// writes the header, so the reader finds a zero there, not a header of the ring's previous
// turn, until the next record. A record never wraps around the end of the ring: a writer
// whose record does not fit before the end marks the rest of the ring as skipped and
// writes the record at the ring's start. The reader publishes its position after each
// record (ringHeader.read), which tells the writer how much room it has. A writer past the
// ring's first rewindAfter bytes also goes back to the start, the same way, when the ring is
// empty: records then keep cycling through the ring's first pages instead of walking all of
// it, so that a long job neither faults in nor keeps resident (nor in its caches) more of the
// ring than its traffic between two reads needs.

// shmRing is the size of each ring, a power of two.
const shmRing = 4 << 20

// shmChunk is the most one record holds: the writer and the reader copy the records of a
// large write at the same time, and neither waits long for the other's progress.
const shmChunk = 256 << 10

// rewindAfter is how far into the ring a writer goes before it looks whether the reader has
// read everything, to write its next record at the ring's start; it looks again after each
// rewindEvery bytes of records while the reader lags. Each look loads the reader's position,
// whose cache line stays with the reader otherwise: a ring whose reader keeps up costs one
// look per rewindAfter bytes of records, and keeps about one page of memory (a mesh has
// four rings for each pair of processes of a host, each carrying heartbeats at least).
const (
	rewindAfter = 4 << 10
	rewindEvery = 1 << 10
)

// The header word of a record.
const (
	recordData = 1 << 63 // a record of recordData|n holds n bytes
	recordSkip = 1 << 62 // the ring's rest is padding: the next record is at the ring's start
	recordLen  = 1<<32 - 1
)

// ringHeader is the start of a ring in the segment: the reader's position, whether the
// reader sleeps, and how many tasks of the reader's process poll the ring while the reader
// may sleep (shm.go), each on a cache line of its own: the writer looks at the second after
// each record, and at the third only when the reader sleeps.
type ringHeader struct {
	read     atomic.Uint64 // the position of the next record to read; what lies before is free
	_        [56]byte
	sleeping atomic.Uint32 // awake, asleep or woken
	_        [60]byte
	polling  atomic.Int32 // tasks in Poller.Poll, on a crowded host
	_        [60]byte
}

// The values of ringHeader.sleeping: a reader that sleeps is woken by the first write after
// it fell asleep, once (the writers after it see it woken already).
const (
	awake = iota
	asleep
	woken
)

// ring is one direction of a segment.
type ring struct {
	h    *ringHeader
	data []byte // shmRing bytes, 8-byte aligned
}

// The segment: a token of tokenSize bytes (in a cache line of its own), then two rings.
const (
	tokenSize   = 32
	ringSpan    = int(unsafe.Sizeof(ringHeader{})) + shmRing
	segmentSize = 64 + 2*ringSpan
)

// rings returns the dialer-to-acceptor and acceptor-to-dialer rings of a segment.
func rings(seg []byte) (up, down ring) {
	at := func(off int) ring {
		return ring{h: (*ringHeader)(unsafe.Pointer(&seg[off])), data: seg[off+int(unsafe.Sizeof(ringHeader{})) : off+ringSpan]}
	}
	return at(64), at(64 + ringSpan)
}

// word returns the header word at position pos (a multiple of 8) of r.
func (r ring) word(pos uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.data[pos&(shmRing-1)]))
}

// span returns the ring bytes a record of n bytes takes.
func span(n uint64) uint64 { return 8 + (n+7)&^7 }

// ringWriter is the writing end of a ring, used by one goroutine at a time.
type ringWriter struct {
	ring
	pos uint64 // where the next record goes
	// read is the reader's position as the writer last loaded it, at most the current one:
	// the writer loads it again only when it leaves too little room, or to look whether the
	// ring is empty (rewinds), so that the cache line the reader stores it in stays with the
	// reader.
	read uint64
	look uint64 // the writer looks whether the ring is empty from this position on
	at   uint64 // where the record that reserve returned goes
}

// hasRoom reports whether the ring has n bytes free at the writer's position now, loading
// the reader's position only when the last one loaded leaves too little.
func (w *ringWriter) hasRoom(n uint64) bool {
	if w.pos+n-w.read <= shmRing {
		return true
	}
	w.read = w.h.read.Load()
	return w.pos+n-w.read <= shmRing
}

// put writes the first bytes of p (at most shmChunk) as one record and returns how many, or
// 0 when the ring has no room for them yet. After it, the writer must look whether the
// reader sleeps (ringHeader.sleeping): the header's store is a full barrier.
func (w *ringWriter) put(p []byte) int {
	n := min(len(p), shmChunk)
	rec := w.reserve(n)
	if rec == nil {
		return 0
	}
	copy(rec, p[:n])
	w.commit(n)
	return n
}

// reserve returns the ring bytes of a record of n bytes (at most shmChunk) at the writer's
// position, for the writer to fill and then commit, or nil when the ring has no room for it
// yet.
func (w *ringWriter) reserve(n int) []byte {
	need := span(uint64(n))
	at := w.place(need)
	// Room for the skipped rest, the record, and the next record's header word, cleared:
	// less than 2*need+8 bytes.
	if !w.hasRoom(at - w.pos + need + 8) {
		return nil
	}
	w.at = at
	off := at & (shmRing - 1)
	return w.data[off+8 : off+8+uint64(n) : off+8+uint64(n)]
}

// commit publishes the record of n bytes that reserve returned, once filled. After it, the
// writer must look whether the reader sleeps, as after put.
func (w *ringWriter) commit(n int) {
	need := span(uint64(n))
	at := w.at
	*(*uint64)(unsafe.Pointer(&w.data[(at+need)&(shmRing-1)])) = 0 // the reader looks at it next, after the header below
	w.word(at).Store(recordData | uint64(n))
	if at != w.pos {
		w.word(w.pos).Store(recordSkip) // after the record: the reader goes to it from here
	}
	w.pos = at + need
}

// place returns where a record that takes need ring bytes goes: at the writer's position,
// or at the ring's start when it does not fit before the end, or when the ring is empty past
// its first rewindAfter bytes (rewinds).
func (w *ringWriter) place(need uint64) uint64 {
	if off := w.pos & (shmRing - 1); off+need > shmRing || w.rewinds(off, need) {
		return w.pos + shmRing - off
	}
	return w.pos
}

// rewinds reports whether a record that takes need ring bytes goes to the ring's start,
// with the writer at offset off of the ring: once past rewindAfter, when the reader has read
// everything and the record, with the word cleared after it, ends before the reader's
// position in the ring (so there is room for it). It loads the reader's position once per
// rewindEvery bytes of records at most.
func (w *ringWriter) rewinds(off, need uint64) bool {
	if off < max(rewindAfter, need+8) || int64(w.pos-w.look) < 0 { // positions wrap at 2^64
		return false
	}
	if w.read != w.pos {
		w.read = w.h.read.Load()
	}
	if w.read != w.pos {
		w.look = w.pos + rewindEvery
		return false
	}
	return true
}

// ringReader is the reading end of a ring, used by one goroutine at a time; its position is
// ringHeader.read.
type ringReader struct {
	ring
	n, got uint64 // the size of the record being read (0: none), and the bytes read of it
}

// arrived reports whether something was written at the reader's position. Unlike the other
// methods it only looks, and may be called while another goroutine reads.
func (r *ringReader) arrived() bool { return r.word(r.h.read.Load()).Load() != 0 }

// ready reports whether a record with bytes to read is at the reader's position, skipping
// the padding before the ring's start.
func (r *ringReader) ready() bool {
	if r.got < r.n {
		return true
	}
	for {
		pos := r.h.read.Load()
		switch hdr := r.word(pos).Load(); {
		case hdr == 0:
			return false
		case hdr&recordSkip != 0:
			release.Uint64(&r.h.read, pos+shmRing-pos&(shmRing-1))
		default:
			r.n, r.got = hdr&recordLen, 0
			return true
		}
	}
}

// next returns the bytes left in the record at the reader's position, without reading them,
// and whether a record is there.
func (r *ringReader) next() ([]byte, bool) {
	if !r.ready() {
		return nil, false
	}
	off := r.h.read.Load() & (shmRing - 1)
	return r.data[off+8+r.got : off+8+r.n], true
}

// take reads up to len(p) bytes of the record at the reader's position into p, and returns
// how many; 0 when no record is there. The reader's position moves past a record once it is
// read whole.
func (r *ringReader) take(p []byte) int {
	rest, ok := r.next()
	if !ok {
		return 0
	}
	k := copy(p, rest)
	r.consume(k)
	return k
}

// consume moves the reader past the next k bytes of the record at its position (at most
// the bytes next returned), and past the record once it is read whole.
func (r *ringReader) consume(k int) {
	r.got += uint64(k)
	if r.got == r.n {
		release.Uint64(&r.h.read, r.h.read.Load()+span(r.n))
		r.n, r.got = 0, 0
	}
}
