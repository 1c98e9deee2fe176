package summa

import (
	"sync"

	"github.com/orwl-go/orwl/kernels/cublas"
)

// pinSet page-locks, once each, the location buffers that GPU tasks of this process read
// panels from, so that the cuBLAS kernel moves them by DMA instead of staging them through
// host threads (which compete with CPU tasks for cores and memory bandwidth). Every task
// of this process that may pin enters the set when it starts and leaves it when it ends;
// the last to leave unpins every buffer, while the buffers are still valid (orwl.Run frees
// location buffers when it returns).
type pinSet struct {
	mu     sync.Mutex
	bufs   map[*float64][]float64
	active int // tasks in the set
}

// enter counts a task in; it must call leave when it ends.
func (ps *pinSet) enter() {
	ps.mu.Lock()
	ps.active++
	ps.mu.Unlock()
}

// leave counts a task out; the last one out unpins every buffer.
func (ps *pinSet) leave() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.active--; ps.active > 0 {
		return
	}
	for _, b := range ps.bufs {
		if b != nil {
			cublas.UnregisterHost(b)
		}
	}
	ps.bufs = nil
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
