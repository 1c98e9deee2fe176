package cublas

import (
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/kernels"
)

// An accumulation (kernels.Accumulation) keeps C on the device across products. Each Add
// uploads its A and B into device buffers of their own and queues their product behind
// those already on the GPU, at most queueDepth deep (onto an idle GPU, tile by tile as the
// operands go up, see tiled); a product added while queueDepth are
// computing waits on the device as pending, its operands uploaded. Store computes the
// pending products chunk of C's rows by chunk, and downloads each chunk while the next one
// is computed: when the GPU is the bottleneck, uploads run ahead of the products and only
// the last chunk's download is not hidden behind compute; when the bus is, nothing waits
// and C is downloaded once.

// queueDepth is the number of products an accumulation keeps queued on the GPU (a
// variable so that tests can make every product pending).
var queueDepth = 2

// storeChunks is the number of row chunks Store computes and downloads C in.
const storeChunks = 16

// firstTiles is the number of row chunks of A, and of column chunks of B, that a product
// added to an idle GPU is uploaded in, interleaved, each piece of the product queued as
// soon as its chunks are up: the GPU starts after 1/firstTiles of the operands instead of
// all of them.
const firstTiles = 4

// tileWhenIdle enables that (a variable so that tests can take the other path on a fake
// device, where the GPU is always idle).
var tileWhenIdle = true

var _ kernels.Accumulator = (*Kernel)(nil)

// accumulation is an m×n C on the device and the operands of its products.
type accumulation struct {
	g       *Kernel
	m, n    int
	c       uintptr // m×n, leading dimension n
	chunkEv [storeChunks]uintptr
	tileEv  [firstTiles]uintptr
	// budget bounds the bytes of operands kept on the device; used counts them.
	budget, used int
	// pending products are uploaded and not queued; queued ones run or ran on the
	// compute stream, oldest first; spare operands are free for the next Add.
	pending, queued, spare []*operands
	broken                 error // the first CUDA failure: the accumulation is unusable
	closed                 bool
}

// operands are the device copies of one product's A (m×k) and B (k×n), its scalars, and
// the events that mark the end of their upload and of their last product.
type operands struct {
	a, b        devBuf
	k           int
	alpha, beta float64
	up, done    uintptr
}

// NewAccumulation implements kernels.Accumulator: C lives in device memory, and the
// operands of its products may use up to half of the device memory free after C's
// allocation.
func (g *Kernel) NewAccumulation(m, n int) (kernels.Accumulation, error) {
	acc := &accumulation{g: g, m: m, n: n}
	err := g.create("NewAccumulation", m, n, func() error {
		if err := lib.check(lib.malloc(&acc.c, uintptr(m*n*8))); err != nil {
			return fmt.Errorf("cudaMalloc(%d bytes): %w", m*n*8, err)
		}
		for _, e := range append(ptrs(acc.chunkEv[:]), ptrs(acc.tileEv[:])...) {
			if err := lib.check(lib.eventCreate(e, eventDisableTiming)); err != nil {
				return errors.Join(fmt.Errorf("cudaEventCreate: %w", err), acc.release())
			}
		}
		var free, total uintptr
		if err := lib.check(lib.memGetInfo(&free, &total)); err != nil {
			return errors.Join(fmt.Errorf("cudaMemGetInfo: %w", err), acc.release())
		}
		acc.budget = int(free / 2)
		g.accums[acc] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return acc, nil
}

// Add implements kernels.Accumulation: it returns when A and B are on the device, with
// their product queued or pending. k must be at least 1.
func (acc *accumulation) Add(k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64) error {
	m, n := acc.m, acc.n
	switch {
	case k < 1:
		return fmt.Errorf("cublas: Add: k is %d; need k >= 1", k)
	case lda < k:
		return fmt.Errorf("cublas: Add: lda %d < k %d", lda, k)
	case ldb < n:
		return fmt.Errorf("cublas: Add: ldb %d < n %d", ldb, n)
	case len(a) < (m-1)*lda+k:
		return fmt.Errorf("cublas: Add: len(a) %d < %d for a %dx%d A", len(a), (m-1)*lda+k, m, k)
	case len(b) < (k-1)*ldb+n:
		return fmt.Errorf("cublas: Add: len(b) %d < %d for a %dx%d B", len(b), (k-1)*ldb+n, k, n)
	}
	checkInt32(k, lda, ldb)
	return acc.do(func() error {
		op, err := acc.take(k)
		if err != nil {
			return err
		}
		g := acc.g
		op.k, op.alpha, op.beta = k, alpha, beta
		if tileWhenIdle && len(acc.queued) == 0 && len(acc.pending) == 0 {
			// The GPU is idle: compute while the operands go up.
			if err := acc.tiled(op, a, lda, b, ldb); err != nil {
				return err
			}
			acc.queued = append(acc.queued, op)
		} else {
			if err := g.h2d(devMat{op.a.ptr, k}, hostMat{a, lda, m, k}, g.sUp); err != nil {
				return err
			}
			if err := g.h2d(devMat{op.b.ptr, n}, hostMat{b, ldb, k, n}, g.sUp); err != nil {
				return err
			}
			if err := lib.check(lib.eventRecord(op.up, g.sUp)); err != nil {
				return err
			}
			acc.pending = append(acc.pending, op)
		}
		// a and b are read until the upload completes.
		if err := lib.check(lib.eventSynchronize(op.up)); err != nil {
			return err
		}
		return acc.feed()
	})
}

// tiled uploads A in firstTiles chunks of rows and B in as many chunks of columns,
// interleaved, and queues the product tile by tile: tile (i, j) of C, from A's chunk i and
// B's chunk j, right after the later of the two is up. It records op.up after the last
// upload and op.done after the last tile.
func (acc *accumulation) tiled(op *operands, a []float64, lda int, b []float64, ldb int) error {
	g, m, n, k := acc.g, acc.m, acc.n, op.k
	rows, cols := (m+firstTiles-1)/firstTiles, (n+firstTiles-1)/firstTiles
	tile := func(i, j int) error {
		r0, c0 := i*rows, j*cols
		if r0 >= m || c0 >= n {
			return nil
		}
		r1, c1 := min(r0+rows, m), min(c0+cols, n)
		return g.gemm(0, 0, c1-c0, r1-r0, k, op.alpha, devMat{op.b.ptr + uintptr(c0*8), n},
			devMat{op.a.ptr + uintptr(r0*k*8), k}, op.beta, devMat{acc.c + uintptr((r0*n+c0)*8), n})
	}
	for s := range firstTiles {
		if r0 := s * rows; r0 < m {
			if err := g.h2d(devMat{op.a.ptr + uintptr(r0*k*8), k}, hostMat{a[r0*lda:], lda, min(rows, m-r0), k}, g.sUp); err != nil {
				return err
			}
		}
		if c0 := s * cols; c0 < n {
			if err := g.h2d(devMat{op.b.ptr + uintptr(c0*8), n}, hostMat{b[c0:], ldb, k, min(cols, n-c0)}, g.sUp); err != nil {
				return err
			}
		}
		// Uploads complete in order: after this event, chunks 0..s of A and B are up.
		if err := g.record(acc.tileEv[s], g.sUp, g.sComp); err != nil {
			return err
		}
		for i := 0; i <= s; i++ {
			if err := tile(i, s); err != nil {
				return err
			}
		}
		for j := 0; j < s; j++ {
			if err := tile(s, j); err != nil {
				return err
			}
		}
	}
	if err := lib.check(lib.eventRecord(op.up, g.sUp)); err != nil {
		return err
	}
	return lib.check(lib.eventRecord(op.done, g.sComp))
}

// Store implements kernels.Accumulation.
func (acc *accumulation) Store(c []float64, ldc int) error {
	m, n := acc.m, acc.n
	switch {
	case ldc < n:
		return fmt.Errorf("cublas: Store: ldc %d < n %d", ldc, n)
	case len(c) < (m-1)*ldc+n:
		return fmt.Errorf("cublas: Store: len(c) %d < %d for a %dx%d C", len(c), (m-1)*ldc+n, m, n)
	}
	checkInt32(ldc)
	return acc.do(func() error {
		g := acc.g
		rows := (m + storeChunks - 1) / storeChunks
		for i, r0 := 0, 0; r0 < m; i, r0 = i+1, r0+rows {
			r1 := min(r0+rows, m)
			for _, op := range acc.pending {
				if err := acc.launch(op, r0, r1); err != nil {
					return err
				}
			}
			if err := g.record(acc.chunkEv[i], g.sComp, g.sDown); err != nil {
				return err
			}
			if err := g.d2h(hostMat{c[r0*ldc:], ldc, r1 - r0, n}, devMat{acc.c + uintptr(r0*n*8), n}, g.sDown); err != nil {
				return err
			}
		}
		for _, op := range acc.pending {
			if err := lib.check(lib.eventRecord(op.done, g.sComp)); err != nil {
				return err
			}
		}
		acc.queued, acc.pending = append(acc.queued, acc.pending...), nil
		if err := lib.check(lib.streamSynchronize(g.sDown)); err != nil {
			return err
		}
		return g.drain()
	})
}

// Close implements kernels.Accumulation.
func (acc *accumulation) Close() error {
	g := acc.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if acc.closed {
		return nil
	}
	delete(g.accums, acc)
	if g.closed {
		return nil // the kernel's Close released it
	}
	return g.on(acc.release)
}

// do runs f on the kernel's thread, under its lock, unless the accumulation or the
// kernel is closed or broken; a failure of f breaks the accumulation.
func (acc *accumulation) do(f func() error) error {
	g := acc.g
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case acc.closed || g.closed:
		return errors.New("cublas: accumulation closed")
	case acc.broken != nil:
		return fmt.Errorf("cublas: accumulation unusable after an earlier failure: %w", acc.broken)
	}
	if err := g.on(f); err != nil {
		acc.broken = err
		return err
	}
	return nil
}

// launch queues on the compute stream, after op's upload, the product of op on the rows
// [r0, r1) of C: Cᵀ = Bᵀ·Aᵀ in cuBLAS's column-major terms.
func (acc *accumulation) launch(op *operands, r0, r1 int) error {
	g := acc.g
	if err := lib.check(lib.streamWaitEvent(g.sComp, op.up, 0)); err != nil {
		return err
	}
	return g.gemm(0, 0, acc.n, r1-r0, op.k, op.alpha, devMat{op.b.ptr, acc.n},
		devMat{op.a.ptr + uintptr(r0*op.k*8), op.k}, op.beta, devMat{acc.c + uintptr(r0*acc.n*8), acc.n})
}

// feed queues pending products, oldest first, while fewer than queueDepth are unfinished.
func (acc *accumulation) feed() error {
	for len(acc.pending) > 0 {
		if err := acc.reclaim(); err != nil {
			return err
		}
		if len(acc.queued) >= queueDepth {
			return nil
		}
		if err := acc.queueOldest(); err != nil {
			return err
		}
	}
	return nil
}

// queueOldest queues the product of the oldest pending operands, on all of C.
func (acc *accumulation) queueOldest() error {
	op := acc.pending[0]
	if err := acc.launch(op, 0, acc.m); err != nil {
		return err
	}
	if err := lib.check(lib.eventRecord(op.done, acc.g.sComp)); err != nil {
		return err
	}
	acc.pending, acc.queued = acc.pending[1:], append(acc.queued, op)
	return nil
}

// reclaim moves the queued operands whose products are finished to spare. Products
// finish in queue order: they run on one stream.
func (acc *accumulation) reclaim() error {
	for len(acc.queued) > 0 {
		switch code := lib.eventQuery(acc.queued[0].done); code {
		case 0:
			acc.spare, acc.queued = append(acc.spare, acc.queued[0]), acc.queued[1:]
		case int32(ErrNotReady):
			return nil
		default:
			return lib.check(code)
		}
	}
	return nil
}

// take returns operands with room for an m×k A and a k×n B: spare ones, or new ones
// within the budget, after waiting for queued products to finish (and queueing pending
// ones) when the budget is spent.
func (acc *accumulation) take(k int) (*operands, error) {
	aBytes, bBytes := acc.m*k*8, k*acc.n*8
	for {
		if err := acc.reclaim(); err != nil {
			return nil, err
		}
		for i, op := range acc.spare {
			if op.a.bytes >= aBytes && op.b.bytes >= bBytes {
				acc.spare = append(acc.spare[:i], acc.spare[i+1:]...)
				return op, nil
			}
		}
		if acc.used+aBytes+bBytes <= acc.budget {
			break
		}
		switch {
		case len(acc.spare) > 0: // too small: make room
			op := acc.spare[0]
			acc.spare = acc.spare[1:]
			if err := acc.free(op); err != nil {
				return nil, err
			}
		case len(acc.queued) > 0:
			if err := lib.check(lib.eventSynchronize(acc.queued[0].done)); err != nil {
				return nil, err
			}
		case len(acc.pending) > 0:
			if err := acc.queueOldest(); err != nil {
				return nil, err
			}
		default: // nothing to wait for: try anyway, cudaMalloc will tell
			acc.budget = acc.used + aBytes + bBytes
		}
	}
	op := &operands{}
	for _, e := range []*uintptr{&op.up, &op.done} {
		if err := lib.check(lib.eventCreate(e, eventDisableTiming)); err != nil {
			acc.free(op)
			return nil, fmt.Errorf("cudaEventCreate: %w", err)
		}
	}
	for _, b := range []struct {
		buf   *devBuf
		bytes int
	}{{&op.a, aBytes}, {&op.b, bBytes}} {
		if err := lib.check(lib.malloc(&b.buf.ptr, uintptr(b.bytes))); err != nil {
			acc.free(op)
			return nil, fmt.Errorf("cudaMalloc(%d bytes): %w", b.bytes, err)
		}
		b.buf.bytes = b.bytes
		acc.used += b.bytes
	}
	return op, nil
}

// free releases op's device memory and events; its products must be finished.
func (acc *accumulation) free(op *operands) error {
	var errs []error
	for _, b := range []devBuf{op.a, op.b} {
		if b.ptr != 0 {
			errs = append(errs, lib.check(lib.free(b.ptr)))
			acc.used -= b.bytes
		}
	}
	for _, e := range []uintptr{op.up, op.done} {
		if e != 0 {
			errs = append(errs, lib.check(lib.eventDestroy(e)))
		}
	}
	return errors.Join(errs...)
}

// release waits for the accumulation's work and frees everything it holds; it runs on
// the kernel's thread, under its lock.
func (acc *accumulation) release() error {
	acc.closed = true
	g := acc.g
	errs := []error{lib.check(lib.streamSynchronize(g.sComp)), lib.check(lib.streamSynchronize(g.sUp))}
	for _, list := range [][]*operands{acc.pending, acc.queued, acc.spare} {
		for _, op := range list {
			errs = append(errs, acc.free(op))
		}
	}
	acc.pending, acc.queued, acc.spare = nil, nil, nil
	for _, e := range append(acc.chunkEv[:], acc.tileEv[:]...) {
		if e != 0 {
			errs = append(errs, lib.check(lib.eventDestroy(e)))
		}
	}
	if acc.c != 0 {
		errs = append(errs, lib.check(lib.free(acc.c)))
		acc.c = 0
	}
	return errors.Join(errs...)
}
