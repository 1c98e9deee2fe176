package summa

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/internal/parallel"
	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// blockCyclic is SUMMA on the 2-D block-cyclic deal (see the package comment): in every
// step, the owners of A's block column and B's block row publish their pieces to their
// grid row and column through the panel locations, lookahead steps ahead, and every task
// adds the product of the two panels it reads to its blocks of C.
type blockCyclic struct {
	*worker
	*schedulePlan
	bPanels [][]float64  // my part of B, by local block row
	aW, bW  panelHandles // my panel locations, written
	// aLent and bLent are, per panel location of mine, the panel whose pages it holds
	// (see put), or nil.
	aLent, bLent     [panelBuffers][]float64
	aR               []panelHandles // A panels of my grid row, by grid column and buffer
	bR               []panelHandles // B panels of my grid column, by grid row and buffer
	remoteA, remoteB []bool         // the A (B) locations of grid column q (row p) are in another process
	// acc keeps my part of C in my kernel's memory across the steps of a multiplication,
	// when the kernel can (kernels.Accumulator: on the GPU); nil otherwise.
	acc kernels.Accumulation
}

// schedulePlan is the steps of a block-cyclic job and how often each owner uses each
// panel buffer (see schedule); computed once per process, read by all its tasks.
type schedulePlan struct {
	steps        []step
	aUses, bUses []bufferUses
}

func newSchedulePlan(g grid.Grid, nk, reps int) *schedulePlan {
	s := &schedulePlan{}
	s.steps, s.aUses, s.bUses = schedule(g, nk, reps)
	return s
}

// generate builds my blocks of A and B, in memory from alloc. Every panel of B starts on
// a page (pagePanel), so that put can move its pages; where another process reads them,
// each is a shared buffer of its own (allocShared), which put's Move swaps with the
// location's, so that a reader of this host reads it in place.
func (s *blockCyclic) generate() error {
	p, g := s.p, s.p.Grid
	mloc, nloc := len(s.rows), len(s.cols)
	kA := len(s.cols) // my A has nloc columns
	shared := s.remoteReaders()
	bSize := 0
	for I := s.gp; I*p.NB < p.N && !shared; I += g.P {
		bSize += pagePanel(blockWidth(p.N, p.NB, I) * nloc)
	}
	mem, err := s.alloc(pagePanel(mloc*kA) + bSize)
	if err != nil {
		return err
	}
	mem = s.generateA(mem)
	mem = mem[len(mem)-bSize:]
	for I := s.gp; I*p.NB < p.N; I += g.P {
		wd := blockWidth(p.N, p.NB, I)
		var panel []float64
		if shared {
			panel = s.allocShared(wd * nloc)
		} else {
			panel = mem[: wd*nloc : wd*nloc]
			mem = mem[pagePanel(wd*nloc):]
		}
		parallel.Rows(wd, genRows(nloc), func(r0, r1 int) {
			for r := r0; r < r1; r++ {
				for j, gj := range s.cols {
					panel[r*nloc+j] = MatrixB(p.Seed, p.N, I*p.NB+r, gj)
				}
			}
		})
		s.bPanels = append(s.bPanels, panel)
	}
	return nil
}

// remoteReaders reports whether tasks of another process read my B panels (my grid
// column), which my kernel keeps in host memory.
func (s *blockCyclic) remoteReaders() bool {
	if _, device := s.gemm.(kernels.Allocator); device || s.p.Grid.P == 1 {
		return false
	}
	for pr := range s.p.Grid.P {
		if s.t.ProcOf(s.p.Grid.ID(pr, s.gq)) != s.t.ProcOf(s.me) {
			return true
		}
	}
	return false
}

// pagePanel returns n float64s rounded up to whole pages (4 KiB): the room of a panel of n
// values that starts on a page, as the next one does.
func pagePanel(n int) int { return (n + 511) &^ 511 }

// declare sizes my panel locations and inserts the handles of the panels I publish (at
// position 0) and read (at position 1). A panel with Q == 1 (a B panel with P == 1) is
// read by its owner only: it is used where it is, with no location and no copy.
func (s *blockCyclic) declare() {
	t, g := s.t, s.p.Grid
	maxW := min(s.p.NB, s.p.N)
	for b := range panelBuffers {
		if s.aUses[s.gq][b] > 0 && g.Q > 1 {
			t.Scale(panelLocation("a", b), 8*len(s.rows)*maxW)
			s.aW[b] = t.WriteInsert(t.Loc(s.me, panelLocation("a", b)), 0)
		}
		if s.bUses[s.gp][b] > 0 && g.P > 1 {
			t.Scale(panelLocation("b", b), 8*maxW*len(s.cols))
			s.bW[b] = t.WriteInsert(t.Loc(s.me, panelLocation("b", b)), 0)
		}
	}
	myProc := t.ProcOf(s.me)
	s.aR, s.remoteA = make([]panelHandles, g.Q), make([]bool, g.Q)
	for q := range g.Q {
		owner := g.ID(s.gp, q)
		s.remoteA[q] = t.ProcOf(owner) != myProc
		s.aR[q] = readPanels(t, owner, "a", s.aUses[q], g.Q > 1)
	}
	s.bR, s.remoteB = make([]panelHandles, g.P), make([]bool, g.P)
	for pr := range g.P {
		owner := g.ID(pr, s.gq)
		s.remoteB[pr] = t.ProcOf(owner) != myProc
		s.bR[pr] = readPanels(t, owner, "b", s.bUses[pr], g.P > 1)
	}
}

// readPanels inserts, when shared, the reads of owner's panel buffers of matrix that it
// uses.
func readPanels(t *orwl.Task, owner int, matrix string, uses bufferUses, shared bool) panelHandles {
	var hs panelHandles
	for b := range panelBuffers {
		if uses[b] > 0 && shared {
			hs[b] = t.ReadInsert(t.Loc(owner, panelLocation(matrix, b)), 1)
		}
	}
	return hs
}

// compute allocates C and runs the steps: publish the panels of the step lookahead steps
// ahead, multiply those of this one.
func (s *blockCyclic) compute(ctx context.Context) error {
	var err error
	if s.c, err = s.alloc(len(s.rows) * len(s.cols)); err != nil {
		return err
	}
	if ac, ok := s.gemm.(kernels.Accumulator); ok && len(s.rows) > 0 && len(s.cols) > 0 {
		if s.acc, err = ac.NewAccumulation(len(s.rows), len(s.cols)); err != nil {
			return fmt.Errorf("task %d: %w", s.me, err)
		}
		defer s.acc.Close()
	}
	for st := range min(lookahead, len(s.steps)) {
		if err := s.publishPanels(ctx, st); err != nil {
			return err
		}
	}
	for st := range s.steps {
		if st+lookahead < len(s.steps) {
			if err := s.publishPanels(ctx, st+lookahead); err != nil {
				return err
			}
		}
		if err := s.multiply(ctx, st); err != nil {
			return err
		}
		if (st+1)%(len(s.steps)/s.p.Reps) == 0 {
			if err := s.storeC(); err != nil {
				return err
			}
			s.endRep()
		}
		if s.me == 0 && s.p.Progress != nil {
			s.p.Progress(st+1, len(s.steps))
		}
	}
	s.stop = time.Now()
	return nil
}

// columns returns the global columns of task k's blocks of C.
func (s *blockCyclic) columns(k int, _ *report) []int {
	_, qk := s.p.Grid.Coords(k)
	return globals(s.p.N, s.p.NB, qk, s.p.Grid.Q)
}

// publishPanels writes my pieces of the panels of step st, if I own any.
func (s *blockCyclic) publishPanels(ctx context.Context, st int) error {
	step, g := s.steps[st], s.p.Grid
	if step.aCol == s.gq && g.Q > 1 {
		panel := s.aPanels[step.k/g.Q]
		keep := s.p.Verify&Freivalds != 0 || !step.aLends // Freivalds' check reads my A panels at the end
		if err := s.timedSection(ctx, s.aW[step.aBuf], func(b []byte) { s.put(b, &s.aLent[step.aBuf], panel, keep) }); err != nil {
			return err
		}
	}
	if step.bRow == s.gp && g.P > 1 {
		panel := s.bPanels[step.k/g.P]
		if err := s.timedSection(ctx, s.bW[step.bBuf], func(b []byte) { s.put(b, &s.bLent[step.bBuf], panel, !step.bLends) }); err != nil {
			return err
		}
	}
	return nil
}

// put writes panel into b, the data of one of my panel locations under my write grant,
// which holds the pages of the panel *lent (nil: its own). It lends the location the
// panel's pages (hugemem.Move) rather than copying them, once the location has given
// back those of the panel it held: nothing is copied, and the location never touches
// fresh pages, which would cost the first multiplication a page fault per 4 KiB. While
// lent, a panel reads zero where it lives, where nothing reads it. It copies the panel
// instead when something reads it there later, or when I publish it next through another
// location before this one takes another panel (keep: see lendable), and when a kernel of
// this process has pinned the location, whose pages the device maps.
func (s *blockCyclic) put(b []byte, lent *[]float64, panel []float64, keep bool) {
	dst := orwl.Float64s(b)
	if *lent != nil && len(panel) > 0 && &(*lent)[0] == &panel[0] {
		return // the location holds this panel's pages: the data is there
	}
	pinned := s.pins.holds(dst)
	if *lent != nil {
		if pinned {
			copy(*lent, dst)
		} else {
			hugemem.MoveFloat64s(*lent, dst)
		}
		*lent = nil
	}
	if keep || pinned {
		copy(dst, panel)
		return
	}
	if _, moved := hugemem.MoveFloat64s(dst, panel); moved {
		*lent = panel
	}
}

// timedSection is a write section whose acquire counts as waiting.
func (w *worker) timedSection(ctx context.Context, h *orwl.Handle, fn func([]byte)) error {
	t0 := time.Now()
	if err := h.Acquire(ctx); err != nil {
		return err
	}
	w.stats.Wait += time.Since(t0)
	fn(h.Map())
	return h.Release()
}

// multiply reads the panels of step st and adds their product to C.
func (s *blockCyclic) multiply(ctx context.Context, st int) error {
	step, g := s.steps[st], s.p.Grid
	mloc, nloc := len(s.rows), len(s.cols)
	wd := blockWidth(s.p.N, s.p.NB, step.k)
	var a, b []float64
	var ha, hb *orwl.Handle
	var err error
	t0 := time.Now()
	if g.Q > 1 {
		ha = s.aR[step.aCol][step.aBuf]
		if a, err = s.acquirePanel(ctx, ha, s.remoteA[step.aCol]); err != nil {
			return err
		}
	} else {
		a = s.aPanels[step.k]
	}
	if g.P > 1 {
		hb = s.bR[step.bRow][step.bBuf]
		if b, err = s.acquirePanel(ctx, hb, s.remoteB[step.bRow]); err != nil {
			return errors.Join(err, release(ha))
		}
	} else {
		b = s.bPanels[step.k]
	}
	t1 := time.Now()
	s.stats.Wait += t1.Sub(t0)
	if mloc > 0 && nloc > 0 && st != skipStep {
		beta := 1.0
		if step.k == 0 {
			beta = 0
		}
		a, b = a[:mloc*wd], b[:wd*nloc]
		if s.acc != nil {
			err = s.acc.Add(wd, 1, a, wd, b, nloc, beta)
		} else {
			s.gemm.Dgemm(blas.NoTrans, blas.NoTrans, mloc, nloc, wd, 1, a, wd, b, nloc, beta, s.c, nloc)
		}
		s.stats.Flops += 2 * float64(mloc) * float64(nloc) * float64(wd)
	}
	s.stats.Compute += time.Since(t1)
	return errors.Join(err, release(hb), release(ha))
}

// storeC copies my part of C out of my kernel's accumulation, when it keeps one: at the
// end of every multiplication.
func (s *blockCyclic) storeC() error {
	if s.acc == nil {
		return nil
	}
	t0 := time.Now()
	err := s.acc.Store(s.c, len(s.cols))
	s.stats.Compute += time.Since(t0)
	if err != nil {
		return fmt.Errorf("task %d: %w", s.me, err)
	}
	return nil
}

// acquirePanel acquires h, a panel location read in the 2-D algorithm, and returns its
// data, pinned when my kernel pins (kernels.HostPinner) and counted in BytesIn when remote
// (another process's).
func (w *worker) acquirePanel(ctx context.Context, h *orwl.Handle, remote bool) ([]float64, error) {
	if err := h.Acquire(ctx); err != nil {
		return nil, err
	}
	panel := orwl.Float64s(h.Map())
	if w.pinner != nil {
		w.pins.add(w.pinner, panel)
	}
	if remote {
		w.stats.BytesIn += int64(len(h.Map()))
	}
	return panel, nil
}

// release releases h, when there is one.
func release(h *orwl.Handle) error {
	if h == nil {
		return nil
	}
	return h.Release()
}
