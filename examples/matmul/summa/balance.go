package summa

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/kernels/cublas"
	"github.com/orwl-go/orwl/orwl"
)

// Balanced runs (Params.Balance or Params.Split) are for tasks of unequal speed, typically
// GPU and CPU kernels in one job. The grid is one row of tasks (P = 1). A stays
// block-cyclic: block column k of A belongs to task k mod Q, which publishes it once, at
// the start, in its own location "p<k>" (one-shot write, position 0); every task reads
// every panel in every multiplication (iterative reads, position 1; a read group that no
// write ever follows, so they never wait after the first grant, and a remote panel
// travels once: its version never changes). Unlike the 2-D algorithm there is no copy
// per step, which matters when one task is a GPU that multiplies a panel faster than a
// host thread copies it. C and B are not dealt block-cyclically: every task computes a
// contiguous range of C's columns, whose width is proportional to its share. Every task
// generates the whole of B (it is never sent), so a range can change between
// multiplications at no cost: that is how the shares move.
//
// With Balance, after each multiplication but the last, every task publishes its measured
// rate (flops / seconds inside kernel calls during that multiplication) in its location
// "rate" (iterative write, position 0) and reads everybody's (iterative reads, position 1);
// every task then computes the same new ranges, in proportion to the rates. The exchange
// comes after the task's last product of the multiplication and before its next one, so in
// the order of the deadlock argument (package comment) it sits between step s and step
// s+1: it waits only for earlier accesses, and nothing earlier waits for it.

// splitGranule is the multiple of columns that ranges are rounded to.
const splitGranule = 8

// cutPoints splits n columns into len(weights) contiguous ranges with widths in
// proportion to weights, rounded to multiples of splitGranule: range t is
// [cuts[t], cuts[t+1]). Every task computes it from the same weights and gets the same cuts.
func cutPoints(n int, weights []float64) []int {
	var total float64
	for _, v := range weights {
		total += max(v, 0)
	}
	cuts := make([]int, len(weights)+1)
	acc := 0.0
	for t, v := range weights {
		acc += max(v, 0)
		c := n
		if total > 0 && t < len(weights)-1 {
			c = int(math.Round(acc/total*float64(n)/splitGranule)) * splitGranule
		} else if total <= 0 {
			c = (t + 1) * n / len(weights)
		}
		cuts[t+1] = min(max(c, cuts[t]), n)
	}
	cuts[len(weights)] = n
	return cuts
}

// setRange makes [c0, c1) the columns of C this task computes.
func (w *worker) setRange(cuts []int) {
	w.cuts = cuts
	w.c0, w.c1 = cuts[w.me], cuts[w.me+1]
}

// rebalance exchanges the rates of the multiplication that just ended and moves the
// column ranges in proportion to them. A task's rate is its flops over the whole time it
// spent on its part (from the end of the previous exchange to its last product), not only
// inside kernel calls: what a task does around its products (waiting for panels, copies,
// a GPU's transfers) grows with its share too, and leaving it out overrates some tasks.
func (w *worker) rebalance(ctx context.Context) error {
	rate := 0.0
	if busy := w.repEnds[len(w.repEnds)-1].Sub(w.repBegin); busy > 0 {
		rate = w.repFlops / busy.Seconds()
	}
	w.repFlops = 0
	defer func() { w.repBegin = time.Now() }()
	if err := w.rateW.Section(ctx, func(b []byte) error {
		orwl.Float64s(b)[0] = rate
		return nil
	}); err != nil {
		return err
	}
	weights := make([]float64, len(w.rateR))
	for k, h := range w.rateR {
		if err := h.Section(ctx, func(b []byte) error {
			weights[k] = orwl.Float64s(b)[0]
			return nil
		}); err != nil {
			return err
		}
	}
	// A task without a measurement (no columns this time) and a very slow one keep a
	// small share, minShare of the total, so that they are measured again.
	total := 0.0
	for _, v := range weights {
		if v > 0 && !math.IsInf(v, 0) {
			total += v
		}
	}
	if total == 0 {
		total = 1
	}
	for k, v := range weights {
		if !(v >= minShare*total) || math.IsInf(v, 0) {
			weights[k] = minShare * total
		}
	}
	w.setRange(cutPoints(w.p.N, weights))
	return nil
}

// minShare is the smallest share of the total rate a task is given when balancing.
const minShare = 0.02

// balanceHandles declares the rate exchange: my rate written at position 0, everybody's
// read at position 1.
func (w *worker) balanceHandles() {
	t := w.t
	w.rateW = t.WriteInsert(t.Loc(w.me, "rate"), 0)
	w.rateR = make([]*handle.Handle, t.NumTasks())
	for k := range w.rateR {
		w.rateR[k] = t.ReadInsert(t.Loc(k, "rate"), 1)
	}
}

// multiplyRange adds A_panel x B(k, c0:c1) to C(:, c0:c1) for step st.
func (w *worker) multiplyRange(st step, a []float64, s int) {
	n, wd := w.p.N, blockWidth(w.p.N, w.p.NB, st.k)
	width := w.c1 - w.c0
	if width == 0 || s == skipStep {
		return
	}
	beta := 1.0
	if st.k == 0 {
		beta = 0
	}
	b := w.bFull[st.k*w.p.NB*n+w.c0:]
	w.gemm.Dgemm(blas.NoTrans, blas.NoTrans, n, width, wd, 1, a[:n*wd], wd, b, n, beta, w.cFull[w.c0:], n)
	flops := 2 * float64(n) * float64(width) * float64(wd)
	w.stats.Flops += flops
	w.repFlops += flops
}

// compactC makes w.c and w.cols my final range of C, for the checks and the checksum.
func (w *worker) compactC() {
	n, width := w.p.N, w.c1-w.c0
	w.c = make([]float64, n*width)
	w.cols = w.cols[:0:0]
	for j := w.c0; j < w.c1; j++ {
		w.cols = append(w.cols, j)
	}
	for i := range n {
		copy(w.c[i*width:(i+1)*width], w.cFull[i*n+w.c0:i*n+w.c1])
	}
}

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

// locationNames are the job's locations: the 2-D algorithm's, and in balanced runs one
// per A panel.
func locationNames(p *Params, nk int) []string {
	names := []string{"a0", "a1", "b0", "b1", "out", "rate"}
	if p.balanced() {
		for k := range nk {
			names = append(names, fmt.Sprintf("p%d", k))
		}
	}
	return names
}

// panelHandles declares, in balanced runs, the one-shot writes of my A panels and the
// iterative reads of every panel.
func (w *worker) panelHandles() {
	t, q := w.t, w.p.Grid.Q
	nk := (w.p.N + w.p.NB - 1) / w.p.NB
	w.panR = make([]*handle.Handle, nk)
	for k := range nk {
		name := fmt.Sprintf("p%d", k)
		if k%q == w.gq {
			t.Scale(name, 8*len(w.rows)*blockWidth(w.p.N, w.p.NB, k))
			w.panW = append(w.panW, t.WriteInsertOnce(t.Loc(w.me, name), 0))
		}
		w.panR[k] = t.ReadInsert(t.Loc(k%q, name), 1)
	}
}

// publishOnce writes my A panels in their locations (balanced runs).
func (w *worker) publishOnce(ctx context.Context) error {
	for j, h := range w.panW {
		if err := h.Section(ctx, func(b []byte) error {
			copy(orwl.Float64s(b), w.aPanels[j])
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
