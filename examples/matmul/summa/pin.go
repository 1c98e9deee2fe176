package summa

import (
	"sync"

	"github.com/orwl-go/orwl/kernels"
)

// pinSet page-locks, once each, the location buffers that tasks of this process whose
// kernel pins (kernels.HostPinner: the cuBLAS kernel) read panels from, so that the kernel
// moves them by DMA instead of staging them through host threads (which compete with CPU
// tasks for cores and memory bandwidth). Every task of this process enters the set when it
// starts and leaves it when it ends; the last to leave unpins every buffer, with the
// kernel that pinned it (pinning outlives the kernel's Close, as HostPinner's contract
// says), while the buffers are still valid (orwl.Run frees location buffers when it
// returns).
type pinSet struct {
	mu     sync.Mutex
	bufs   map[*float64]pinned
	active int // tasks in the set
}

// pinned is a buffer and the kernel that pinned it; by is nil when pinning failed.
type pinned struct {
	buf []float64
	by  kernels.HostPinner
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
		if b.by != nil {
			b.by.UnpinHost(b.buf)
		}
	}
	ps.bufs = nil
}

// add pins b with k unless it is already pinned here (or failed to be); failures only
// cost speed.
func (ps *pinSet) add(k kernels.HostPinner, b []float64) {
	if len(b) == 0 {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.bufs == nil {
		ps.bufs = map[*float64]pinned{}
	}
	if _, ok := ps.bufs[&b[0]]; ok {
		return
	}
	if k.PinHost(b) == nil {
		ps.bufs[&b[0]] = pinned{b, k}
	} else {
		ps.bufs[&b[0]] = pinned{} // do not try again
	}
}

// holds reports whether b (its first element) is pinned here, or failed to be.
func (ps *pinSet) holds(b []float64) bool {
	if len(b) == 0 {
		return false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.bufs[&b[0]]
	return ok
}
