// Package jacobi is the engine of examples/stencil: an iterative Jacobi stencil, 3-point on a
// line or 5-point on a plane, over a PX × PY grid of ORWL tasks that exchange halos through
// ORWL locations, bit-identical to a sequential sweep whatever the number of tasks and
// processes.
//
// Every task computes one block of the domain in private memory (two buffers with a frame of
// ghost cells) and shares only its edges. An edge is published in three locations used in
// turn (slots), so publishing the edge of iteration k waits only for the neighbour to have
// read the edge of iteration k-3, long done: the one message on the critical path of an
// iteration is the grant that carries an edge to the neighbour. A
// task publishes its edges, computes the cells that need no neighbour's value while the edges
// travel, then copies the neighbours' edges into its ghost cells (releasing them at once) and
// computes the cells along its border.
//
// The package does the computation and the reporting of one job; it does not parse flags or
// print anything.
package jacobi

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// Params describe one job.
type Params struct {
	Dim    int // 1: 3-point stencil on a line (NY and PY must be 1); 2: 5-point on a plane
	NX, NY int // cells along x and y; the domain is NY rows of NX cells
	PX, PY int // tasks along x and y; task id = y*PX + x
	Iters  int // iterations
	// Trace is orwl.Config.Trace: a file for the job's Chrome trace, or "".
	Trace string
}

// MaxTasks is the largest job Validate accepts: far more than any machine runs, far fewer
// than what would exhaust memory just describing the job.
const MaxTasks = 1 << 16

// Tasks returns the number of tasks of the job, PX*PY.
func (p Params) Tasks() int { return p.PX * p.PY }

// Validate reports what makes p unusable, or nil.
func (p Params) Validate() error {
	switch {
	case p.Dim != 1 && p.Dim != 2:
		return fmt.Errorf("dimension %d: want 1 or 2", p.Dim)
	case p.PX > MaxTasks || p.PY > MaxTasks || p.Tasks() > MaxTasks:
		return fmt.Errorf("%dx%d tasks: at most %d", p.PX, p.PY, MaxTasks)
	case p.PX < 1 || p.PY < 1 || p.NX < p.PX || p.NY < p.PY:
		return fmt.Errorf("%dx%d cells cannot be split over %dx%d tasks (at least one cell per task)", p.NX, p.NY, p.PX, p.PY)
	case p.Dim == 1 && (p.NY != 1 || p.PY != 1):
		return fmt.Errorf("a line has one row and one row of tasks, not %d and %d", p.NY, p.PY)
	case p.Iters < 0:
		return fmt.Errorf("%d iterations", p.Iters)
	}
	return nil
}

// Warmup returns how many of iters iterations come before the timed ones: a tenth of them,
// so that connections and caches are warm when the clock starts. The C MPI reference of the
// bench harness follows the same rule.
func Warmup(iters int) int { return iters / 10 }

// Result is what Run returns in the process of task 0.
type Result struct {
	Cells []float64 // the final values, NY rows of NX cells
	// Seconds is the time of the Timed iterations (all but the Warmup ones) of the slowest
	// task, measured by each task around its own loop.
	Seconds float64
	Timed   int
	// Resumed is the iteration the job restarted at from a checkpoint, 0 for a fresh start.
	Resumed int
	// Checkpoints is the number of checkpoints the tasks entered, summed over tasks, and
	// HeldSeconds the time these checkpoints held them up (Task.CheckpointHold), summed.
	Checkpoints int
	HeldSeconds float64
}

// PerIteration returns the time of one timed iteration, or 0 when none was timed.
func (r *Result) PerIteration() time.Duration {
	if r.Timed == 0 {
		return 0
	}
	return time.Duration(r.Seconds / float64(r.Timed) * 1e9)
}

// Boundary values of the sides of the domain (Dirichlet conditions).
const (
	WestBoundary, EastBoundary   = 1.0, -1.0
	NorthBoundary, SouthBoundary = 0.5, -0.5
)

// Initial is the value of the cell in column x, row y before the first iteration.
func Initial(x, y int) float64 { return float64((x+2*y)%5) / 4 }

// dir is a side of a block.
type dir int

const (
	west dir = iota
	east
	north // row y-1
	south // row y+1
)

func (d dir) opposite() dir { return d ^ 1 }

func (d dir) boundary() float64 {
	return [...]float64{WestBoundary, EastBoundary, NorthBoundary, SouthBoundary}[d]
}

// step returns the change of task coordinates toward d.
func (d dir) step() (dx, dy int) {
	return [...]int{-1, 1, 0, 0}[d], [...]int{0, 0, -1, 1}[d]
}

// edgeName is the location in which a task publishes its edge on side d in iterations of
// slot.
func edgeName(d dir, slot int) string { return fmt.Sprintf("%c%d", "WENS"[d], slot) }

// span returns the part [lo, hi) of n cells that the i-th of parts gets.
func span(n, parts, i int) (lo, hi int) { return i * n / parts, (i + 1) * n / parts }

// block returns the block of task id.
func (p Params) block(id int) block {
	tx, ty := id%p.PX, id/p.PX
	x0, x1 := span(p.NX, p.PX, tx)
	y0, y1 := span(p.NY, p.PY, ty)
	b := block{x0: x0, y0: y0, rows: y1 - y0, cols: x1 - x0, stride: x1 - x0 + 2, dim: p.Dim}
	if p.Dim == 2 {
		b.hy = 1
	}
	return b
}

// neighbour returns the task beside task id in direction d, or -1 at the domain's side.
func (p Params) neighbour(id int, d dir) int {
	dx, dy := d.step()
	x, y := id%p.PX+dx, id/p.PX+dy
	if x < 0 || x >= p.PX || y < 0 || y >= p.PY {
		return -1
	}
	return y*p.PX + x
}

// locations returns the names of the locations every task owns: the edges (slots per side)
// and "out", where a task leaves its final cells and its times for task 0.
func (p Params) locations() []string {
	names := []string{"out"}
	for _, d := range (&block{dim: p.Dim}).dirs() {
		for slot := range slots {
			names = append(names, edgeName(d, slot))
		}
	}
	return names
}

// Run runs the job over the processes that the environment describes (one process when
// nothing started this one as part of a job). It returns the result in the process of task
// 0 and nil in the others.
func Run(ctx context.Context, p Params) (*Result, error) {
	return RunCheckpointed(ctx, p, orwl.Checkpoint{})
}

// RunCheckpointed is Run in a job that takes checkpoints as ck says (none when ck is the
// zero value and ORWL_CHECKPOINT_DIR is not set), and restarts from the newest complete one
// it finds. Each checkpoint holds every task's block (its state, kept with Task.Keep) as it
// enters a step of Steps iterations; its fingerprint names the program "stencil" (unless
// ck.Program says otherwise) and p's dimension, cells, tasks and iterations, so a job of
// another problem refuses it.
func RunCheckpointed(ctx context.Context, p Params, ck orwl.Checkpoint) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if ck.Program == "" {
		ck.Program = "stencil"
	}
	ck.Params = map[string]string{"dim": fmt.Sprint(p.Dim), "n": fmt.Sprintf("%dx%d", p.NX, p.NY),
		"tasks": fmt.Sprintf("%dx%d", p.PX, p.PY), "iters": fmt.Sprint(p.Iters)}
	var result *Result
	err := orwl.Run(ctx, orwl.Config{Tasks: p.Tasks(), Locations: p.locations(), Checkpoint: ck, Trace: p.Trace},
		func(ctx context.Context, t *orwl.Task) error {
			res, err := runTask(ctx, t, p)
			if res != nil {
				result = res
			}
			return err
		})
	return result, err
}

// Steps is the number of iterations in one step of Task.Iterate: every slot's handles are
// acquired once per step, and the block is back in its first buffer at the start of every
// step (an even number of iterations), which is what a checkpoint keeps.
const Steps = slots

// outExtra is the number of values after the cells in a task's "out": its time, the time
// checkpoints held it up and the number it entered.
const outExtra = 3

// runTask is the program of task t: the iterations, then its part of the result, which
// task 0 gathers and returns.
func runTask(ctx context.Context, t *orwl.Task, p Params) (*Result, error) {
	me := t.ID()
	b := p.block(me)
	t.Scale("out", 0) // sized at the end, so that checkpoints do not carry it
	publish := t.WriteInsertOnce(t.Loc(me, "out"), 0)
	var gather []*orwl.Handle // task 0 reads every part once it is written
	if me == 0 {
		for k := range p.Tasks() {
			gather = append(gather, t.ReadInsertOnce(t.Loc(k, "out"), 1))
		}
	}
	h := newHalo(t, p, &b)
	u, v := b.alloc(func(d dir) bool { return h.nb[d] >= 0 })
	t.Keep("block", orwl.Bytes(u))
	if err := t.Schedule(ctx); err != nil {
		return nil, err
	}
	warm := Warmup(p.Iters)
	start := time.Now()
	if err := t.Iterate(ctx, (p.Iters+Steps-1)/Steps, func(step int) error {
		for k := step * Steps; k < min(p.Iters, (step+1)*Steps); k++ {
			if k == warm {
				start = time.Now()
			}
			if err := h.iteration(ctx, k, &b, u, v); err != nil {
				return err
			}
			u, v = v, u
		}
		return nil
	}); err != nil {
		return nil, err
	}
	held, heldFor := t.CheckpointHold()
	extra := [outExtra]float64{time.Since(start).Seconds(), heldFor.Seconds(), float64(held)}
	if err := publish.Section(ctx, func([]byte) error {
		data, err := publish.Resize(8 * (b.cells() + outExtra))
		out := orwl.Float64s(data)
		for r := range b.rows {
			copy(out[r*b.cols:(r+1)*b.cols], u[b.at(r, 0):])
		}
		copy(out[b.cells():], extra[:])
		return err
	}); err != nil || me != 0 {
		return nil, err
	}
	res := &Result{Cells: make([]float64, p.NX*p.NY), Timed: p.Iters - max(warm, Steps*t.Resumed()), Resumed: Steps * t.Resumed()}
	for k, g := range gather {
		kb := p.block(k)
		if err := g.Section(ctx, func(data []byte) error {
			part := orwl.Float64s(data)
			if len(part) != kb.cells()+outExtra {
				return fmt.Errorf("jacobi: task %d's result has %d values, want %d", k, len(part), kb.cells()+outExtra)
			}
			for r := range kb.rows {
				copy(res.Cells[(kb.y0+r)*p.NX+kb.x0:], part[r*kb.cols:(r+1)*kb.cols])
			}
			extra := part[kb.cells():]
			res.Seconds = math.Max(res.Seconds, extra[0])
			res.HeldSeconds += extra[1]
			res.Checkpoints += int(extra[2])
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// iteration is iteration k of the task's block b, from u into v: it publishes the edges of
// u, computes the interior while they travel, fetches the neighbours' edges into u's ghost
// cells and computes the border.
func (h *halo) iteration(ctx context.Context, k int, b *block, u, v []float64) error {
	if err := h.publish(ctx, k%slots, u); err != nil {
		return err
	}
	b.interior(u, v)
	if err := h.fetch(ctx, k%slots, u); err != nil {
		return err
	}
	b.border(u, v)
	return nil
}

// slots is the number of locations in which a task publishes each edge, in turn: iteration
// k uses slot k % slots. With 2, publishing the edge of iteration k waits for the neighbour
// to have released its read of iteration k-2, and the release message sometimes comes
// later than that; with 3 it never holds a task up. 4, an even number, makes a step of
// Steps iterations leave the block in the buffer it started in.
const slots = 4

// halo is the exchange of one task's edges with its neighbours: in iterations that use
// slot s, pub[d][s] writes the task's edge on side d and get[d][s] reads the neighbour's
// edge that faces it; both are nil on a side of the domain.
type halo struct {
	nb       [4]int                 // neighbour task per side, -1 at the domain's side
	edge     [4]strip               // the cells published on each side
	ghost    [4]strip               // the ghost cells filled from each side
	pub, get [4][slots]*orwl.Handle // by side and slot
}

// newHalo sizes the task's edge locations and declares the handles of its halo exchange. In
// iterations that use slot s the task writes its edges at FIFO position 2*s and reads its
// neighbours' at 2*s+1, so that every edge location cycles through its writer and then its
// reader, and taking the handles in order of position is free of deadlock.
func newHalo(t *orwl.Task, p Params, b *block) *halo {
	h := &halo{nb: [4]int{-1, -1, -1, -1}}
	for _, d := range b.dirs() {
		h.edge[d], h.ghost[d] = b.edge(d), b.ghosts(d)
		for slot := range slots {
			t.Scale(edgeName(d, slot), 8*h.edge[d].n)
		}
		if h.nb[d] = p.neighbour(t.ID(), d); h.nb[d] < 0 {
			continue
		}
		for slot := range slots {
			h.pub[d][slot] = t.WriteInsert(t.Loc(t.ID(), edgeName(d, slot)), 2*slot)
			h.get[d][slot] = t.ReadInsert(t.Loc(h.nb[d], edgeName(d.opposite(), slot)), 2*slot+1)
		}
	}
	return h
}

// publish copies the edges of u into the task's edge locations of slot.
func (h *halo) publish(ctx context.Context, slot int, u []float64) error {
	return sections(ctx, &h.pub, slot, func(d int, out []float64) error {
		h.edge[d].read(out, u)
		return nil
	})
}

// fetch copies the neighbours' edges of slot into the ghost cells of u, releasing each
// location as soon as it is copied.
func (h *halo) fetch(ctx context.Context, slot int, u []float64) error {
	return sections(ctx, &h.get, slot, func(d int, in []float64) error {
		if len(in) != h.ghost[d].n {
			return errors.New("jacobi: a neighbour's edge has the wrong size")
		}
		h.ghost[d].write(u, in)
		return nil
	})
}

// sections calls fn in a section of every handle of slot, side after side.
func sections(ctx context.Context, hs *[4][slots]*orwl.Handle, slot int, fn func(d int, data []float64) error) error {
	for d, hd := range hs {
		if hd[slot] == nil {
			continue
		}
		if err := hd[slot].Section(ctx, func(data []byte) error { return fn(d, orwl.Float64s(data)) }); err != nil {
			return err
		}
	}
	return nil
}

// Sequential computes the same job as Run with one block and no ORWL: the reference that
// Run's result must equal bit for bit.
func Sequential(p Params) []float64 {
	one := p
	one.PX, one.PY = 1, 1
	b := one.block(0)
	u, v := b.alloc(func(dir) bool { return false })
	for range p.Iters {
		b.interior(u, v)
		b.border(u, v)
		u, v = v, u
	}
	cells := make([]float64, 0, b.cells())
	for r := range b.rows {
		cells = append(cells, u[b.at(r, 0):b.at(r, b.cols)]...)
	}
	return cells
}

// Checksum is the FNV-1a hash of the cells' bytes (little-endian float64s, row after row):
// equal checksums mean bit-identical results. The C MPI reference computes the same.
func Checksum(cells []float64) uint64 {
	h := fnv.New64a()
	h.Write(orwl.Bytes(cells))
	return h.Sum64()
}
