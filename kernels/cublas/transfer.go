package cublas

import (
	"unsafe"

	"github.com/orwl-go/orwl/internal/parallel"
)

// Transfers between host slices and device memory. Slices inside pinned
// memory (AllocHost, RegisterHost) are copied by DMA directly with one
// asynchronous 2D copy. Ordinary Go slices are pageable: CUDA would copy them
// synchronously through its own small bounce buffer, so instead they go
// through a ring of pinned staging slots, chunk by chunk: host goroutines
// pack a chunk into a free slot while the previous chunks are on the bus.

// slotsPerRing staging slots per direction let packing, DMA and unpacking
// overlap.
const slotsPerRing = 3

// slotBytes is the size of one staging slot (a variable so that tests can
// exercise chunking on small matrices).
var slotBytes = 32 << 20

// hostMat is a rows×cols row-major block of host memory starting at s[0]
// with leading dimension ld.
type hostMat struct {
	s              []float64
	ld, rows, cols int
}

// extent returns exactly the elements the block spans.
func (h hostMat) extent() []float64 { return h.s[:(h.rows-1)*h.ld+h.cols] }

// rowsFrom returns the block of rows [r0, r0+n).
func (h hostMat) rowsFrom(r0, n int) hostMat {
	return hostMat{s: h.s[r0*h.ld:], ld: h.ld, rows: n, cols: h.cols}
}

// devMat is a block of device memory: address and leading dimension
// (elements), row-major.
type devMat struct {
	ptr uintptr
	ld  int
}

func (d devMat) row(r int) uintptr { return d.ptr + uintptr(r*d.ld*8) }

// slot is a pinned staging buffer, the event marking the end of its last
// transfer, and for device-to-host transfers the unpacking still to do once
// that event has completed.
type slot struct {
	buf    []float64
	ev     uintptr
	used   bool
	unpack func()
}

// ring is a set of staging slots used round robin.
type ring struct {
	slots [slotsPerRing]slot
	next  int
}

// take returns the next slot of r with at least n elements, after its
// previous transfer completed (and was unpacked).
func (g *Kernel) take(r *ring, n int) (*slot, error) {
	s := &r.slots[r.next]
	r.next = (r.next + 1) % len(r.slots)
	if err := g.settle(s); err != nil {
		return nil, err
	}
	if len(s.buf) < n {
		if s.buf != nil {
			if err := FreeHost(s.buf); err != nil {
				return nil, err
			}
			s.buf = nil
		}
		buf, err := AllocHost(max(n, slotBytes/8))
		if err != nil {
			return nil, err
		}
		s.buf = buf
	}
	if s.ev == 0 {
		if err := lib.check(lib.eventCreate(&s.ev, eventDisableTiming)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// settle waits for the slot's last transfer and performs its unpacking.
func (g *Kernel) settle(s *slot) error {
	if !s.used {
		return nil
	}
	s.used = false
	err := lib.check(lib.eventSynchronize(s.ev))
	if err == nil && s.unpack != nil {
		s.unpack()
	}
	s.unpack = nil
	return err
}

// drain settles every staging slot: after it, all staged transfers issued so
// far are complete and unpacked into Go memory.
func (g *Kernel) drain() error {
	var first error
	for _, r := range []*ring{&g.up, &g.down} {
		for i := range r.slots {
			if err := g.settle(&r.slots[i]); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// h2d enqueues the copy of src to dst on stream.
func (g *Kernel) h2d(dst devMat, src hostMat, stream uintptr) error {
	width := uintptr(src.cols * 8)
	if isPinned(src.extent()) {
		return lib.check(lib.memcpy2DToDevice(dst.ptr, uintptr(dst.ld*8), unsafe.Pointer(&src.s[0]), uintptr(src.ld*8),
			width, uintptr(src.rows), memcpyHostToDevice, stream))
	}
	return g.staged(&g.up, src.rows, src.cols, stream, func(s *slot, r0, n int) (func(), error) {
		packRows(s.buf, src.rowsFrom(r0, n))
		return nil, lib.check(lib.memcpy2DToDevice(dst.row(r0), uintptr(dst.ld*8), unsafe.Pointer(&s.buf[0]), width,
			width, uintptr(n), memcpyHostToDevice, stream))
	})
}

// d2h enqueues the copy of src to dst on stream. For pageable dst the data
// reaches dst only when the staging slot is settled (take or drain).
func (g *Kernel) d2h(dst hostMat, src devMat, stream uintptr) error {
	width := uintptr(dst.cols * 8)
	if isPinned(dst.extent()) {
		return lib.check(lib.memcpy2DToHost(unsafe.Pointer(&dst.s[0]), uintptr(dst.ld*8), src.ptr, uintptr(src.ld*8),
			width, uintptr(dst.rows), memcpyDeviceToHost, stream))
	}
	return g.staged(&g.down, dst.rows, dst.cols, stream, func(s *slot, r0, n int) (func(), error) {
		err := lib.check(lib.memcpy2DToHost(unsafe.Pointer(&s.buf[0]), width, src.row(r0), uintptr(src.ld*8),
			width, uintptr(n), memcpyDeviceToHost, stream))
		part, buf := dst.rowsFrom(r0, n), s.buf
		return func() { unpackRows(part, buf) }, err
	})
}

// staged enqueues on stream, through the slots of ring r, the copy of a pageable block of
// rows×cols elements, in chunks of whole rows that fit a slot: for the n rows from r0,
// copyChunk queues the copy between the slot and the device (packing what goes up first)
// and returns what to unpack once it is complete (nil when nothing), which the slot keeps
// with the event recorded after the copy.
func (g *Kernel) staged(r *ring, rows, cols int, stream uintptr, copyChunk func(s *slot, r0, n int) (unpack func(), err error)) error {
	chunk := max(1, slotBytes/8/cols)
	for r0 := 0; r0 < rows; r0 += chunk {
		n := min(chunk, rows-r0)
		s, err := g.take(r, n*cols)
		if err != nil {
			return err
		}
		unpack, err := copyChunk(s, r0, n)
		if err != nil {
			return err
		}
		if err := lib.check(lib.eventRecord(s.ev, stream)); err != nil {
			return err
		}
		s.used = true
		s.unpack = unpack
	}
	return nil
}

// packRows copies the block h into buf, compact (leading dimension
// h.cols), on several goroutines (parallel.Rows) when it is large.
func packRows(buf []float64, h hostMat) {
	parallel.Rows(h.rows, stagingRows(h), func(r0, r1 int) {
		if h.ld == h.cols {
			// One long copy per goroutine: Go's memmove switches to
			// non-temporal stores above 1 MiB, which nearly halves the
			// memory traffic of staging.
			copy(buf[r0*h.cols:r1*h.cols], h.s[r0*h.ld:r1*h.ld])
			return
		}
		for i := r0; i < r1; i++ {
			copy(buf[i*h.cols:(i+1)*h.cols], h.s[i*h.ld:i*h.ld+h.cols])
		}
	})
}

// unpackRows copies the compact buf (leading dimension h.cols) into the
// block h, like packRows in the other direction.
func unpackRows(h hostMat, buf []float64) {
	parallel.Rows(h.rows, stagingRows(h), func(r0, r1 int) {
		if h.ld == h.cols {
			copy(h.s[r0*h.ld:r1*h.ld], buf[r0*h.cols:r1*h.cols])
			return
		}
		for i := r0; i < r1; i++ {
			copy(h.s[i*h.ld:i*h.ld+h.cols], buf[i*h.cols:(i+1)*h.cols])
		}
	})
}

// stagingRows is the fewest rows of h worth a goroutine of their own when staging: 1 MiB.
func stagingRows(h hostMat) int { return max(1, (1<<20)/max(1, h.cols*8)) }
