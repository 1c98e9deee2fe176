package hugemem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Shared buffers. AllocShared maps a buffer from a file of shared memory that the process
// keeps for them (Linux: one memfd), so that another process of the same host, as the
// same user, may map it too and read it in place (View), with neither copy nor page faults
// of fresh memory. Each buffer holds a range of the file of its own, aligned to a huge
// page; offsets are never used twice, so a view of a freed buffer never shows another
// buffer's data, and freeing a buffer frees its memory (the range is punched out of the
// file).

// Share names a shared buffer to another process of the host: the process, its
// descriptor of the file that holds the buffer, where the buffer starts in it, and its
// length.
type Share struct {
	PID, FD int32
	Off     int64 // a multiple of the huge page
	Len     int64
}

// ShareSize is the length of a Share's encoding (Append).
const ShareSize = 24

// Append appends the encoding of s to b.
func (s Share) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(s.PID))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.FD))
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Off))
	return binary.LittleEndian.AppendUint64(b, uint64(s.Len))
}

// ParseShare decodes what Append wrote.
func ParseShare(b []byte) (Share, error) {
	if len(b) != ShareSize {
		return Share{}, fmt.Errorf("hugemem: a shared buffer's name has %d bytes, want %d", len(b), ShareSize)
	}
	s := Share{PID: int32(binary.LittleEndian.Uint32(b)), FD: int32(binary.LittleEndian.Uint32(b[4:])),
		Off: int64(binary.LittleEndian.Uint64(b[8:])), Len: int64(binary.LittleEndian.Uint64(b[16:]))}
	if s.PID <= 0 || s.FD < 0 || s.Off < 0 || s.Off%hugePage != 0 || s.Len < 0 {
		return Share{}, fmt.Errorf("hugemem: invalid shared buffer %+v", s)
	}
	return s, nil
}

// AllocShared is Alloc for a buffer that other processes of this host may map (SharedAt,
// View): one of Threshold bytes or more is mapped from this process's file of shared
// memory where the system allows it, with ORWL_HUGEPAGES's advice; otherwise it is
// Alloc's. Free, Retire and Protect take it as they take Alloc's; Move swaps it with
// another shared buffer of its size, and copies into it from any other.
func AllocShared(n int) []byte {
	if n >= Threshold {
		if p, length, off := mapShared(uintptr(n), advice()); p != nil {
			mu.Lock()
			mapped[p] = region{length: length, size: n, share: off + 1}
			mu.Unlock()
			return unsafe.Slice((*byte)(p), n)
		}
	}
	return Alloc(n)
}

// AllocSharedAny is AllocShared for a buffer of any size, however small: it is mapped from
// this process's file of shared memory (a range of whole huge pages of the file, of which
// only the pages written take memory), or nil where the system refuses.
func AllocSharedAny(n int) []byte {
	p, length, off := mapShared(uintptr(max(n, 1)), advice())
	if p == nil {
		return nil
	}
	mu.Lock()
	mapped[p] = region{length: length, size: n, share: off + 1}
	mu.Unlock()
	return unsafe.Slice((*byte)(p), n)
}

// SharedAt returns the name of the shared buffer that b starts (AllocShared), with b's
// length; ok is false for any other slice, and for a buffer that Retire made inaccessible.
func SharedAt(b []byte) (s Share, ok bool) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if p == nil {
		return Share{}, false
	}
	mu.Lock()
	r, ok := mapped[p]
	mu.Unlock()
	if !ok || r.share == 0 {
		return Share{}, false
	}
	return Share{PID: int32(selfPID), FD: int32(sharedFile.fd), Off: r.share - 1, Len: int64(len(b))}, true
}

// View's errors: where the system cannot map another process's memory (ErrNoView), and
// when the process that holds the buffer has ended (ErrGone).
var (
	ErrNoView = errors.New("hugemem: this system does not map other processes' buffers")
	ErrGone   = errors.New("hugemem: the process of the shared buffer has ended")
)

// View maps the shared buffer s of another process of this host, or of this one,
// read-only: every write to it faults, and Find reports it ReadOnly. What its owner writes
// shows in it. Free unmaps it (Retire makes it inaccessible), and neither changes the
// owner's buffer; Protect leaves it read-only. It fails when s's process has ended
// (ErrGone), or is not this user's, or runs in another namespace, or the system refuses the
// mapping.
func View(s Share) ([]byte, error) { return view(s, ReadOnly) }

// ViewWritable is View for a buffer that both processes write: words that they share, such
// as counters, never data that one of them only reads.
func ViewWritable(s Share) ([]byte, error) { return view(s, ReadWrite) }

func view(s Share, a Access) ([]byte, error) {
	if s.Len == 0 {
		return []byte{}, nil
	}
	p, length, err := mapView(s, a == ReadWrite)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	mapped[p] = region{length: length, size: int(s.Len), access: a, view: true}
	mu.Unlock()
	return unsafe.Slice((*byte)(p), int(s.Len)), nil
}

// swapShared swaps the memory of the shared buffers of size n at d and m at s, when both
// are whole, writable and of one size: each then maps the other's range of the file. It
// reports whether it did; where the system refuses, both are as they were. mu held.
func swapShared(d, s unsafe.Pointer, n, m int) bool {
	rd, rs := mapped[d], mapped[s]
	if d == s || rd.share == 0 || rs.share == 0 || n != m || rd.size != n || rs.size != m || rd.length != rs.length ||
		rd.access != ReadWrite || rs.access != ReadWrite {
		return false
	}
	if !remapShared(d, rd.length, rs.share-1) {
		return false
	}
	if !remapShared(s, rs.length, rd.share-1) {
		remapShared(d, rd.length, rd.share-1) // as it was: the same range, mapped again
		return false
	}
	rd.share, rs.share = rs.share, rd.share
	mapped[d], mapped[s] = rd, rs
	return true
}

// sharedFile is this process's file of shared memory (mapShared), made at its first use.
var sharedFile struct {
	sync.Mutex
	fd   int   // -1 when the system refused it
	made bool  // the file was tried
	end  int64 // the offset of the next buffer
}
