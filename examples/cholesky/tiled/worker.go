package tiled

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// worker is one task's state.
type worker struct {
	p     *Params
	l     layout
	t     *orwl.Task
	me    int
	k     kernels.Cholesky
	mine  []tile   // my tiles, in the algorithm's order of tiles (column by column)
	ops   []taskOp // my operations, every factorisation, in order of position
	perOp int      // my operations per factorisation
	reps  []repHandles
	stats TaskStats
	ends  []time.Duration // every factorisation's time in this task, barrier to last operation

	// wholeInverse: the diagonal tiles I read hold the whole L(k,k)⁻¹, every task computing
	// on my kernel, a GPU's (factorDiagonal); otherwise TRSM reads only its halves' inverses.
	wholeInverse bool

	// Verification, filled while A is generated for the last factorisation.
	x      []float64 // the verification vector
	ax     []float64 // my tiles' part of A·x
	normA2 float64   // my tiles' part of ‖A‖_F²

	zW, outW       *orwl.Handle   // my "z" and "out"
	zR, outR       []*orwl.Handle // everybody's "z"; task 0: everybody's "out"
	tilesV, tilesY []*orwl.Handle // my tiles, read for z then for y
}

// taskOp is one of my operations with its handles.
type taskOp struct {
	op
	k     kernels.Cholesky // w.k, or w.wide() for an operation that runs alone
	reads []*orwl.Handle
	write *orwl.Handle
}

// repHandles are the handles of one factorisation's start: my tiles written with A, and
// the barrier.
type repHandles struct {
	init          []*orwl.Handle
	readyW, goR   *orwl.Handle
	readyR        []*orwl.Handle // task 0
	goW           *orwl.Handle   // task 0
	first, opsEnd int            // my operations of this factorisation: ops[first:opsEnd]
}

// Positions of a factorisation's start, from its base; its operations follow.
const (
	posInit = iota
	posReadyW
	posReadyR
	posGoW
	posGoR
	posOps
)

// declare sizes my locations and inserts every handle of the job's schedule.
func (w *worker) declare(order []op, alone []bool) {
	t, l, wide := w.t, w.l, w.wide()
	for j := range l.tiles {
		for i := j; i < l.tiles; i++ {
			if tl := (tile{i, j}); l.owner(tl) == w.me {
				w.mine = append(w.mine, tl)
				t.Scale(l.tileName(tl), 8*l.tileLen(tl))
			}
		}
	}
	t.Scale("ready", 8)
	t.Scale("go", 8)
	t.Scale("z", 8*l.n)
	t.Scale("out", 8*w.outLen())
	stride := posOps + len(order)
	for r := range w.p.Reps {
		base := r * stride
		rh := repHandles{first: len(w.ops)}
		for _, tl := range w.mine {
			rh.init = append(rh.init, t.WriteInsertOnce(w.loc(tl), base+posInit))
		}
		rh.readyW = t.WriteInsertOnce(t.Loc(w.me, "ready"), base+posReadyW)
		if w.me == 0 {
			for k := range t.NumTasks() {
				rh.readyR = append(rh.readyR, t.ReadInsertOnce(t.Loc(k, "ready"), base+posReadyR))
			}
			rh.goW = t.WriteInsertOnce(t.Loc(0, "go"), base+posGoW)
		}
		rh.goR = t.ReadInsertOnce(t.Loc(0, "go"), base+posGoR)
		for x, o := range order {
			if l.owner(o.written()) != w.me {
				continue
			}
			to := taskOp{op: o, k: w.k}
			if alone[x] {
				to.k = wide
			}
			for _, rt := range o.reads() {
				to.reads = append(to.reads, t.ReadInsertOnce(w.loc(rt), base+posOps+x))
			}
			to.write = t.WriteInsertOnce(w.loc(o.written()), base+posOps+x)
			w.ops = append(w.ops, to)
		}
		rh.opsEnd = len(w.ops)
		w.reps = append(w.reps, rh)
	}
	w.perOp = len(w.ops) / w.p.Reps
	w.declareVerification(w.p.Reps * stride)
}

// wide returns the kernel of my operations that run while every other task waits
// (schedule's alone): split{w.k}, on two threads, where the process may run twice w.k's
// threads at once (GOMAXPROCS), as when it has the cores of the tasks that wait; else w.k.
func (w *worker) wide() kernels.Cholesky {
	if w.k.Device() == kernels.CPU && 2*w.k.Threads() <= runtime.GOMAXPROCS(0) {
		return split{w.k}
	}
	return w.k
}

// loc is the location of tile tl.
func (w *worker) loc(tl tile) orwl.Location { return w.t.Loc(w.l.owner(tl), w.l.tileName(tl)) }

// run is a task's whole part of the job. It keeps the task's goroutine on one thread
// throughout: after a wait, and the yields of a task that polls for a grant from another
// process, the task resumes on the thread, and mostly the core and caches, of its previous
// kernel calls rather than on another of the process's threads. On the 2-core VM at
// N=4096 (5 sets of 5 runs, in turn with and without), that added 1.7-3.6% to the mean
// GFLOP/s of 2 processes (their time in kernel calls 2.3-3.4% shorter in 4 of the sets),
// and -0.5 to 2.2% to one process's; at N=8192 (4 runs in turn), 1.4% and 0.3%.
func (w *worker) run(ctx context.Context, order []op, alone []bool) (*Result, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	w.declare(order, alone)
	w.x = make([]float64, w.p.N)
	for i := range w.x {
		w.x[i] = vectorX(w.p.Seed, i)
	}
	if err := w.t.Schedule(ctx); err != nil {
		return nil, err
	}
	for r := range w.p.Reps {
		if err := w.factorise(ctx, r); err != nil {
			return nil, err
		}
	}
	return w.verify(ctx)
}

// factorise runs factorisation r: A into my tiles, the barrier, then my operations.
func (w *worker) factorise(ctx context.Context, r int) error {
	rh := &w.reps[r]
	for x, h := range rh.init {
		last := r == w.p.Reps-1
		if err := h.Section(ctx, func(b []byte) error {
			w.generate(w.mine[x], orwl.Float64s(b), last)
			return nil
		}); err != nil {
			return err
		}
	}
	if err := w.barrier(ctx, rh); err != nil {
		return err
	}
	start := time.Now()
	pending := make([]*taskOp, 0, rh.opsEnd-rh.first)
	for x := rh.first; x < rh.opsEnd; x++ {
		pending = append(pending, &w.ops[x])
	}
	for done := rh.first; len(pending) > 0; done++ {
		x := ready(pending)
		if err := w.execute(ctx, pending[x]); err != nil {
			return err
		}
		pending = slices.Delete(pending, x, x+1)
		if w.me == 0 && w.p.Progress != nil {
			w.p.Progress(done+1, len(w.ops))
		}
	}
	w.ends = append(w.ends, time.Since(start))
	return nil
}

// lookahead is how many of its next operations a task looks at for one it can run at once.
const lookahead = 16

// ready returns the index in pending (the task's operations not done yet, in the order of
// their positions) of the one to run next: the first among the next lookahead whose tiles
// are all granted already (Handle.Test), else the first, which the task then waits for. An
// operation run early only takes grants that are there and gives them back, so the task
// still waits only where the schedule has it wait, and the schedule stays deadlock-free;
// the order of the accesses to every tile is its FIFO's, so L is the same bytes.
func ready(pending []*taskOp) int {
	for x, o := range pending[:min(len(pending), lookahead)] {
		if o.write.Test() && allGranted(o.reads) {
			return x
		}
	}
	return 0
}

// allGranted reports whether every handle of hs is granted.
func allGranted(hs []*orwl.Handle) bool {
	for _, h := range hs {
		if !h.Test() {
			return false
		}
	}
	return true
}

// barrier returns when every task has written its tiles for the coming factorisation: each
// writes its "ready", task 0 reads them all and writes its "go", which every task reads.
func (w *worker) barrier(ctx context.Context, rh *repHandles) error {
	nothing := func([]byte) error { return nil }
	if err := rh.readyW.Section(ctx, nothing); err != nil {
		return err
	}
	for _, h := range rh.readyR {
		if err := h.Section(ctx, nothing); err != nil {
			return err
		}
	}
	if rh.goW != nil {
		if err := rh.goW.Section(ctx, nothing); err != nil {
			return err
		}
	}
	return rh.goR.Section(ctx, nothing)
}

// execute acquires an operation's tiles, calls its kernel and releases them.
func (w *worker) execute(ctx context.Context, o *taskOp) error {
	t0 := time.Now()
	var in [2][]float64
	for x, h := range o.reads {
		if err := h.Acquire(ctx); err != nil {
			return errors.Join(err, releaseAll(o.reads[:x]))
		}
		in[x] = orwl.Float64s(h.Map())
	}
	if err := o.write.Acquire(ctx); err != nil {
		return errors.Join(err, releaseAll(o.reads))
	}
	t1 := time.Now()
	w.stats.Wait += t1.Sub(t0)
	err := w.compute(o.k, o.op, orwl.Float64s(o.write.Map()), in)
	t2 := time.Now()
	w.stats.Compute += t2.Sub(t1)
	w.stats.Flops += w.l.flops(o.op)
	err = errors.Join(err, o.write.Release(), releaseAll(o.reads))
	w.stats.Release += time.Since(t2)
	return err
}

// compute calls kernel k for o on the tile it writes, c, and those it reads, in.
func (w *worker) compute(k kernels.Cholesky, o op, c []float64, in [2][]float64) error {
	wi, wj, wk := w.l.width(o.i), w.l.width(o.j), w.l.width(o.k)
	switch o.kind {
	case potrf: // L(k,k), then the inverses of its diagonal halves after it
		if !factorDiagonal(k, wk, c[:wk*wk], c[wk*wk:], wk, false) {
			return fmt.Errorf("tiled: the matrix is not positive definite (diagonal tile %d)", o.k)
		}
	case trsm: // L(i,k) = A(i,k)·L(k,k)⁻ᵀ
		solvePanel(k, wi, wk, c, in[0][:wk*wk], in[0][wk*wk:], w.wholeInverse)
	case syrk: // A(j,j) -= L(j,k)·L(j,k)ᵀ
		k.Dsyrk(blas.Lower, blas.NoTrans, wj, wk, -1, in[0], wk, 1, c, wj)
	case gemm: // A(i,j) -= L(i,k)·L(j,k)ᵀ
		if o != skipOp {
			k.Dgemm(blas.NoTrans, blas.Trans, wi, wj, wk, -1, in[0], wk, in[1], wk, 1, c, wj)
		}
	}
	return nil
}

// skipOp is an update every task leaves out: tests set it to check that verification
// catches a wrong factor. Its kind is potrf (never compared) in normal runs.
var skipOp = op{kind: potrf}

// releaseAll releases every handle of hs.
func releaseAll(hs []*orwl.Handle) error {
	var errs []error
	for _, h := range hs {
		errs = append(errs, h.Release())
	}
	return errors.Join(errs...)
}

// generate writes tile tl of A into a, the data of its location; for the last
// factorisation it also adds the tile's part of A·x and of ‖A‖_F² (an off-diagonal tile
// counts twice: A holds it and its transpose). A diagonal tile's second half, where POTRF
// writes the inverses of L(k,k)'s halves, is zeroed (so is the block it leaves out, in
// every factorisation alike): the first write of a location's fresh pages faults them in,
// here rather than inside the timed factorisation (at N=4096 on 2 processes, 512 of the
// 4 KiB page faults of each diagonal tile).
func (w *worker) generate(tl tile, a []float64, last bool) {
	l, p := w.l, w.p
	wi, wj := l.width(tl.i), l.width(tl.j)
	i0, j0 := tl.i*l.nb, tl.j*l.nb
	for r := range wi {
		for c := range wj {
			a[r*wj+c] = MatrixA(p.Seed, p.N, i0+r, j0+c)
		}
	}
	clear(a[wi*wj:])
	if !last {
		return
	}
	if w.ax == nil {
		w.ax = make([]float64, p.N)
	}
	x := w.x
	for r := range wi {
		for c := range wj {
			v := a[r*wj+c]
			w.ax[i0+r] += v * x[j0+c]
			w.normA2 += v * v
			if tl.i != tl.j {
				w.ax[j0+c] += v * x[i0+r]
				w.normA2 += v * v
			}
		}
	}
}
