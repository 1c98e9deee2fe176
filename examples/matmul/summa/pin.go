package summa

import (
	"sync"

	"github.com/orwl-go/orwl/kernels/cublas"
)

// pinSet page-locks, once each, the location buffers that GPU tasks of this process read
// panels from, so that the cuBLAS kernel moves them by DMA instead of staging them through
// host threads (which compete with CPU tasks for cores and memory bandwidth). It holds the
// buffers until release, after the job, so they stay valid while pinned.
type pinSet struct {
	mu   sync.Mutex
	bufs map[*float64][]float64
}

// add pins b unless it is already pinned here; failures only cost speed.
func (ps *pinSet) add(b []float64) {
	if len(b) == 0 {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.bufs == nil {
		ps.bufs = map[*float64][]float64{}
	}
	if _, ok := ps.bufs[&b[0]]; ok {
		return
	}
	if cublas.RegisterHost(b) == nil {
		ps.bufs[&b[0]] = b
	} else {
		ps.bufs[&b[0]] = nil // do not try again
	}
}

// release unpins every buffer.
func (ps *pinSet) release() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, b := range ps.bufs {
		if b != nil {
			cublas.UnregisterHost(b)
		}
	}
	ps.bufs = nil
}
