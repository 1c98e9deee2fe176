package orwl

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/hugemem"
)

// The buffers of the job: the data of locations and mirrors, how they are allocated, guarded
// in a checked job, resized under a write grant, and freed.

// envChecked overrides CheckedDefault.
const envChecked = "ORWL_CHECKED"

// resolve says whether a job with the choice c is checked.
func (c Checking) resolve() (bool, error) {
	switch c {
	case CheckedOn:
		return true, nil
	case CheckedOff:
		return false, nil
	case CheckedDefault:
	default:
		return false, fmt.Errorf("orwl: Config.Checked is %d: want CheckedDefault, CheckedOn or CheckedOff", c)
	}
	switch v := os.Getenv(envChecked); v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	case "":
		bench := flag.Lookup("test.bench")
		return testing.Testing() && (bench == nil || bench.Value.String() == ""), nil
	default:
		return false, fmt.Errorf("orwl: %s=%q: want on or off", envChecked, v)
	}
}

// buffers allocates and frees the data of locations and mirrors. In a checked job every
// buffer has pages of its own (hugemem.Pages), read-only while read grants of this
// process hold it (guard), and a buffer that Resize replaces or that Run frees is retired
// (hugemem.Retire), never used again: a write through a read handle's data, and a use of a
// slice of before Resize or after Run, fault at every size, and the task's Section (or its
// recovery, callTask) reports the misuse (handle.ErrReadOnlyData, handle.ErrStaleData).
//
// In a job of several processes (share), the data of a location of hugemem.Threshold bytes
// or more is a shared buffer (hugemem.AllocShared), which the processes of this host read
// in place, through a view, instead of receiving a copy (mirror.go).
type buffers struct{ checked, share bool }

// alloc returns n zeroed bytes, 8-byte aligned; never nil.
func (b buffers) alloc(n int) []byte {
	if b.checked {
		return hugemem.Pages(n)
	}
	return alignedBytes(n)
}

// filled is alloc for a buffer that the caller fills at once (see filledBytes).
func (b buffers) filled(n int) []byte {
	if b.checked {
		return hugemem.Pages(n)
	}
	return filledBytes(n)
}

// data is alloc for the data of a location: shared where the job shares (see buffers).
func (b buffers) data(n int) []byte {
	if b.share && n >= hugemem.Threshold {
		return hugemem.AllocShared(n)
	}
	return b.alloc(n)
}

// filledData is data for a buffer that the caller fills at once, faulted in as filled's.
func (b buffers) filledData(n int) []byte {
	d := b.data(n)
	if !b.checked {
		hugemem.Populate(d)
	}
	return d
}

// free frees buf, a buffer of alloc, filled, data or filledData, or a view (mirror.go),
// which must not be used afterwards (in a checked job every use faults).
func (b buffers) free(buf []byte) {
	if b.checked {
		hugemem.Retire(buf)
		return
	}
	freeBytes(buf)
}

// guard makes buf read-only (read) or writable again, in a checked job. The system refuses
// only when the process has too many mappings: the data then stays as it is, unguarded.
func (b buffers) guard(buf []byte, read bool) {
	a := hugemem.ReadWrite
	if read {
		a = hugemem.ReadOnly
	}
	hugemem.Protect(buf, a)
}

// guardReads counts the read grants of this process's tasks among rs, granted (by +1) or
// ended (by -1), in a checked job: the data is read-only while one of them holds it (l.mu
// held, so that a write grant that follows finds it writable again).
func (l *location) guardReads(rs []*fifo.Request, by int) {
	was := l.readers
	for _, r := range rs {
		if _, local := r.Tag.(*localTicket); local && r.Mode() == fifo.Read {
			l.readers += by
		}
	}
	if (was == 0) != (l.readers == 0) {
		l.j.bufs.guard(l.data, l.readers > 0)
	}
}

// resize sets *data, under a write grant, to n bytes, keeping the common prefix and
// zero-filling the rest, and returns it; a new buffer comes from alloc. A checked job
// always moves the data to a new buffer and retires the old one, so that the slice of
// before faults at every size.
// Otherwise the buffer is kept when its capacity allows it, and one that is replaced waits
// in *stale until the grant's release (freeStale), so that a write through the slice of
// before is lost at every size, rather than faulting on a mapped buffer only.
func (b buffers) resize(data *[]byte, stale *[][]byte, n int, alloc func(int) []byte) []byte {
	old := *data
	if !b.checked && n <= cap(old) {
		*data = old[:n]
		if n > len(old) {
			clear((*data)[len(old):])
		}
		return *data
	}
	*data = alloc(n)
	copy(*data, old)
	if b.checked {
		b.free(old)
	} else {
		*stale = append(*stale, old)
	}
	return *data
}

// freeStale frees the buffers that Resize replaced during a write grant, at its release.
func (b buffers) freeStale(stale *[][]byte) {
	for i, buf := range *stale {
		b.free(buf)
		(*stale)[i] = nil
	}
	*stale = (*stale)[:0]
}

// resizeKeep sets *b to n bytes, reallocating with alloc (freeing the old buffer) only when
// it must grow; its callers fill it with a payload at once, so alloc gives a buffer whose
// pages are faulted in (filled, or a spare mirror). It is small enough to be inlined: a
// payload's buffer mostly keeps its size.
func (bs buffers) resizeKeep(b *[]byte, n int, alloc func(int) []byte) []byte {
	if n > cap(*b) {
		bs.regrow(b, n, alloc)
	}
	*b = (*b)[:n]
	return *b
}

// regrow frees *b and sets it to a buffer of n bytes from alloc.
func (bs buffers) regrow(b *[]byte, n int, alloc func(int) []byte) {
	bs.free(*b)
	*b = alloc(n)
}

// alignedBytes returns n zeroed bytes whose first byte is 8-byte aligned; never nil. Large
// buffers (location data, mirrors) are mapped outside the Go heap with huge pages, so that
// filling them the first time takes few page faults: they are freed (hugemem.Free) when
// they are replaced, and at the end of Run (job.freeBuffers).
func alignedBytes(n int) []byte { return hugemem.Alloc(n) }

// filledBytes is alignedBytes for a buffer that the caller fills at once (a grant's or a
// write-back's payload lands in it): its pages are faulted in during the call, in one
// system call rather than a page fault per page in the copy (hugemem.AllocFilled), which
// shortens the first transfer of a tile into a fresh mirror.
func filledBytes(n int) []byte { return hugemem.AllocFilled(n) }

// freeBytes frees a buffer alignedBytes or filledBytes returned; it must not be used afterwards.
func freeBytes(b []byte) { hugemem.Free(b) }
