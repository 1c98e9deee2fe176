package summa

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/internal/parallel"
	"github.com/orwl-go/orwl/orwl"
)

// Balanced runs (Params.Balance or Params.Split) are for tasks of unequal speed, typically
// GPU and CPU kernels in one job. The grid is one row of tasks (P = 1). A stays
// block-cyclic: block column k of A belongs to task k mod Q, which publishes it once, at
// the start, in its own location "p<k>" (one-shot write, position 0); every task reads
// every panel once (one-shot reads, position 1) into its own copy of A. C and B are not
// dealt block-cyclically: every task computes a contiguous range of C's columns, whose
// width is proportional to its share, with one kernel call per multiplication
// (C(:, range) = A · B(:, range)). One call lets a GPU kernel pipeline its transfers over
// the whole product and move C once, where a call per panel would move C's range to the
// device and back at every step. Every task generates the whole of B (it is never sent),
// so a range can change between multiplications at no cost: that is how the shares move.
//
// After each multiplication but the last, every task publishes the flops and the seconds
// of its kernel call in its location "rate" (iterative write, position 0) and reads
// everybody's (iterative reads, position 1). With Balance, every task then runs the same
// balancer on the same numbers and gets the same new ranges. With a static split the
// exchange only ends every multiplication for all tasks before the next begins, as in an
// application that uses C in between, and as in a balanced run: a static split is timed
// like a balanced one, exchange included. Deadlock freedom follows the
// argument of the package comment with the keys: panel writes (-1, 0), panel reads
// (-1, 1), and, in exchange r, rate write (r, 0) and rate reads (r, 1). A rate write
// waits only for the reads of exchange r-1 on the same location; a rate read waits only
// for the write of exchange r; the panel reads wait only for the panel writes, which wait
// for nothing.

// columnSplit is the strategy of balanced runs (above): every task gathers the whole of
// A, generates the whole of B, and computes a range of C's columns with one kernel call
// per multiplication; with Balance, the ranges follow the measured rates.
type columnSplit struct {
	*worker
	cuts                []int     // column ranges of all tasks
	c0, c1              int       // my range of C's columns
	aFull, bFull, cFull []float64 // the whole of A and B; C with my range filled
	rateW               *orwl.Handle
	rateR               []*orwl.Handle
	panW, panR          []*orwl.Handle // A panels published once: mine, written; all, read
	remoteA             []bool         // the A panels of grid column q are in another process
}

// generate builds my blocks of A, the whole of B, and room for the whole of A and C, and
// sets my first range of columns.
func (w *columnSplit) generate() error {
	p := w.p
	mem, err := w.alloc(len(w.rows)*len(w.aCols) + 3*p.N*p.N)
	if err != nil {
		return err
	}
	mem = w.generateA(mem)
	w.aFull, w.bFull, w.cFull = mem[:p.N*p.N], mem[p.N*p.N:2*p.N*p.N], mem[2*p.N*p.N:3*p.N*p.N]
	parallel.Rows(p.N, genRows(p.N), func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			for j := range p.N {
				w.bFull[i*p.N+j] = MatrixB(p.Seed, p.N, i, j)
			}
		}
	})
	weights := p.Split
	if weights == nil {
		weights = make([]float64, p.Grid.Tasks())
		for i := range weights {
			weights[i] = 1
		}
	}
	w.setRange(cutPoints(p.N, weights))
	return nil
}

// declare inserts the exchange of rates (when there is more than one multiplication) and
// the publication of A's panels.
func (w *columnSplit) declare() {
	t, g := w.t, w.p.Grid
	if w.p.Reps > 1 {
		w.rateHandles()
	}
	w.remoteA = make([]bool, g.Q)
	for q := range g.Q {
		w.remoteA[q] = t.ProcOf(g.ID(w.gp, q)) != t.ProcOf(w.me)
	}
	w.panelHandles()
}

// compute publishes my panels of A, runs the multiplications, and leaves my final range
// of C in w.c and w.cols.
func (w *columnSplit) compute(ctx context.Context) error {
	if err := w.publishOnce(ctx); err != nil {
		return err
	}
	if err := w.runBalanced(ctx); err != nil {
		return err
	}
	w.compactC()
	return nil
}

// columns returns the range of columns that task k's report says it computed last.
func (w *columnSplit) columns(_ int, r *report) []int {
	var cols []int
	for j := r.Span[0]; j < r.Span[1]; j++ {
		cols = append(cols, int(j))
	}
	return cols
}

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

// balancer chooses the shares of the next multiplication from what every task measured
// in the last one. Every task runs its own copy on the same numbers, so all choose alike.
//
// Shares in proportion to the rates make every task finish at the same time, which is
// the fastest split when tasks do not slow each other down. When they do (two kernels on
// cores that share a memory bus or an SMT core, a GPU whose host thread competes with CPU
// tasks), the fast tasks speed up once the slow ones are done, and the fastest split gives
// the slow tasks less. The balancer therefore weighs task i by rate_i · (rate_i /
// max rate)^bias and searches the bias: 0 first, then up by biasStep while the
// multiplication is not clearly slower than the fastest so far (by more than
// searchSlack, which lets the search cross a flat stretch that the machine's noise makes
// uneven); the first that is clearly slower, or the first whose next step would not move
// the columns any more, ends the search and brings back the fastest split measured.
// Every weighed split keeps at least one granule of columns per task, so that every task
// stays measured; but a slow task may cost more than its columns are worth (a CPU task
// beside a GPU reads the whole of A for a few columns). So right after bias 0, when some
// tasks are less than half as fast as the fastest, the search measures once the split
// without them (the fast tasks in proportion to their rates, the others idle), even when
// the bias would move no columns (the slow tasks all at their granule), then goes
// on with the weighed splits, which it compares with each other only; the fastest split of
// all is kept at the end. The first multiplication (equal or given shares) is not judged.
type balancer struct {
	n           int       // columns
	split       split     // being measured
	best        split     // the fastest multiplication's so far
	bestTime    float64   // its seconds; 0 before the first judged one
	weighedTime float64   // the fastest weighed split's seconds; 0 before one
	judged      bool      // the split being measured came from the balancer
	searching   bool      // the search is not over
	rates       []float64 // every task's last measured rate (flop/s); 0 before any
}

// split is a candidate of the balancer: the bias of weighed shares, or only the fast
// tasks (fast non-nil: the tasks that keep columns).
type split struct {
	bias float64
	fast []bool
}

// biasStep is the balancer's step of bias; searchSlack the relative slowdown it takes for
// clearly slower.
const (
	biasStep    = 0.5
	searchSlack = 0.02
)

func newBalancer(n int) *balancer { return &balancer{n: n, searching: true} }

// next takes every task's flops and seconds in the last multiplication and returns the
// weights of the next one.
func (b *balancer) next(flops, secs []float64) []float64 {
	if b.rates == nil {
		b.rates = make([]float64, len(flops))
	}
	took := 0.0 // the multiplication's time: its slowest task's
	for k := range flops {
		if secs[k] > 0 {
			b.rates[k] = flops[k] / secs[k] // a task without columns keeps its last rate
		}
		took = max(took, secs[k])
	}
	if b.judged {
		if b.bestTime == 0 || took < b.bestTime {
			b.best, b.bestTime = b.split, took
		}
		weighed := b.split.fast == nil
		if weighed && (b.weighedTime == 0 || took < b.weighedTime) {
			b.weighedTime = took
		}
		switch {
		case !b.searching:
		case !weighed: // the fast tasks alone: back to the bias search
			b.split = split{bias: biasStep}
		case b.split.bias == 0 && slowTasks(b.rates) != nil:
			b.split = split{fast: slowTasks(b.rates)}
		case took > b.weighedTime*(1+searchSlack) || b.settled():
			b.searching, b.split = false, b.best
		default:
			b.split.bias += biasStep
		}
	}
	b.judged = true
	if b.split.fast != nil {
		return fastWeights(b.rates, b.split.fast)
	}
	return balancedWeights(b.rates, b.n, b.split.bias)
}

// settled reports whether the next step of bias would give every task the columns the
// current one gives it.
func (b *balancer) settled() bool {
	now := cutPoints(b.n, balancedWeights(b.rates, b.n, b.split.bias))
	return slices.Equal(now, cutPoints(b.n, balancedWeights(b.rates, b.n, b.split.bias+biasStep)))
}

// slowTasks returns, when some tasks have less than half the top rate, which tasks do
// not (the fast ones); nil otherwise.
func slowTasks(rates []float64) []bool {
	top := slices.Max(rates)
	fast, slow := make([]bool, len(rates)), false
	for k, v := range rates {
		fast[k] = v >= top/2
		slow = slow || !fast[k]
	}
	if !slow {
		return nil
	}
	return fast
}

// fastWeights gives the fast tasks weights in proportion to their rates, the others none.
func fastWeights(rates []float64, fast []bool) []float64 {
	weights := make([]float64, len(rates))
	for k, v := range rates {
		if fast[k] {
			weights[k] = v
		}
	}
	return weights
}

// balancedWeights turns the rates measured in a multiplication of n columns into the
// weights of the next one: rate · (rate / max rate)^bias, except that every task is given
// at least the weight that earns it one granule of columns, so that a task without a
// measurement (no columns this time) or a very slow one stays measured at a cost of a
// few columns. A rate that is not a finite number > 0 counts as none.
func balancedWeights(rates []float64, n int, bias float64) []float64 {
	top := 0.0
	for _, v := range rates {
		if v > 0 && !math.IsInf(v, 0) {
			top = max(top, v)
		}
	}
	weights := make([]float64, len(rates))
	total := 0.0
	for k, v := range rates {
		if v > 0 && !math.IsInf(v, 0) {
			weights[k] = v * math.Pow(v/top, bias)
			total += weights[k]
		}
	}
	if total == 0 {
		total = 1
	}
	floor := total * min(float64(splitGranule)/float64(n), 1/float64(len(rates)))
	for k := range weights {
		weights[k] = max(weights[k], floor)
	}
	return weights
}

// setRange makes [c0, c1) the columns of C this task computes.
func (w *columnSplit) setRange(cuts []int) {
	w.cuts = cuts
	w.c0, w.c1 = cuts[w.me], cuts[w.me+1]
}

// runBalanced is a balanced run's part of a task, after Schedule: gather A, then one
// product per multiplication, with an exchange of measurements in between that, with
// Balance, moves the ranges.
func (w *columnSplit) runBalanced(ctx context.Context) error {
	if err := w.gatherA(ctx); err != nil {
		return err
	}
	bal := newBalancer(w.p.N)
	for r := range w.p.Reps {
		flops, secs := w.multiplyRange()
		w.endRep()
		if w.me == 0 && w.p.Progress != nil {
			w.p.Progress(r+1, w.p.Reps)
		}
		if r+1 == w.p.Reps {
			break
		}
		allFlops, allSecs, err := w.exchange(ctx, flops, secs)
		if err != nil {
			return err
		}
		if w.p.Balance {
			w.setRange(cutPoints(w.p.N, bal.next(allFlops, allSecs)))
		}
	}
	w.stop = time.Now()
	return nil
}

// gatherA copies every panel of A, as its owner published it, into my copy of A.
func (w *columnSplit) gatherA(ctx context.Context) error {
	n := w.p.N
	for k, h := range w.panR {
		t0 := time.Now()
		if err := h.Acquire(ctx); err != nil {
			return err
		}
		w.stats.Wait += time.Since(t0)
		panel, wd := orwl.Float64s(h.Map()), blockWidth(n, w.p.NB, k)
		if k != skipStep {
			for i := range n {
				copy(w.aFull[i*n+k*w.p.NB:i*n+k*w.p.NB+wd], panel[i*wd:(i+1)*wd])
			}
		}
		if w.remoteA[k%w.p.Grid.Q] {
			w.stats.BytesIn += int64(len(h.Map()))
		}
		if err := h.Release(); err != nil {
			return err
		}
	}
	return nil
}

// multiplyRange computes my range of C with one kernel call and returns its flops and
// seconds (0 and 0 when the range is empty).
func (w *columnSplit) multiplyRange() (flops, secs float64) {
	n, width := w.p.N, w.c1-w.c0
	if width == 0 {
		return 0, 0
	}
	t0 := time.Now()
	w.gemm.Dgemm(blas.NoTrans, blas.NoTrans, n, width, n, 1, w.aFull, n, w.bFull[w.c0:], n, 0, w.cFull[w.c0:], n)
	took := time.Since(t0)
	flops = 2 * float64(n) * float64(n) * float64(width)
	w.stats.Compute += took
	w.stats.Flops += flops
	return flops, max(took.Seconds(), 1e-9)
}

// exchange publishes my flops and seconds and returns everybody's.
func (w *columnSplit) exchange(ctx context.Context, flops, secs float64) (allFlops, allSecs []float64, err error) {
	if err := w.rateW.Section(ctx, func(b []byte) error {
		copy(orwl.Float64s(b), []float64{flops, secs})
		return nil
	}); err != nil {
		return nil, nil, err
	}
	allFlops, allSecs = make([]float64, len(w.rateR)), make([]float64, len(w.rateR))
	for k, h := range w.rateR {
		if err := h.Section(ctx, func(b []byte) error {
			allFlops[k], allSecs[k] = orwl.Float64s(b)[0], orwl.Float64s(b)[1]
			return nil
		}); err != nil {
			return nil, nil, err
		}
	}
	return allFlops, allSecs, nil
}

// rateHandles declares the exchange of measurements: mine written at position 0,
// everybody's read at position 1.
func (w *columnSplit) rateHandles() {
	t := w.t
	w.rateW = t.WriteInsert(t.Loc(w.me, "rate"), 0)
	w.rateR = make([]*orwl.Handle, t.NumTasks())
	for k := range w.rateR {
		w.rateR[k] = t.ReadInsert(t.Loc(k, "rate"), 1)
	}
}

// compactC makes w.c and w.cols my final range of C, for the checks and the checksum.
func (w *columnSplit) compactC() {
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

// locationNames are the job's locations: the 2-D algorithm's, and in balanced runs one
// per A panel.
func locationNames(p *Params, nk int) []string {
	names := []string{"out", "rate"}
	for b := range panelBuffers {
		names = append(names, panelLocation("a", b), panelLocation("b", b))
	}
	if p.balanced() {
		for k := range nk {
			names = append(names, fmt.Sprintf("p%d", k))
		}
	}
	return names
}

// panelHandles declares, in balanced runs, the one-shot writes of my A panels and the
// one-shot reads of every panel.
func (w *columnSplit) panelHandles() {
	t, q := w.t, w.p.Grid.Q
	nk := (w.p.N + w.p.NB - 1) / w.p.NB
	w.panR = make([]*orwl.Handle, nk)
	for k := range nk {
		name := fmt.Sprintf("p%d", k)
		if k%q == w.gq {
			t.Scale(name, 8*len(w.rows)*blockWidth(w.p.N, w.p.NB, k))
			w.panW = append(w.panW, t.WriteInsertOnce(t.Loc(w.me, name), 0))
		}
		w.panR[k] = t.ReadInsertOnce(t.Loc(k%q, name), 1)
	}
}

// publishOnce writes my A panels in their locations (balanced runs).
func (w *columnSplit) publishOnce(ctx context.Context) error {
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
