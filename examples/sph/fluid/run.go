package fluid

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// The locations every task owns. Their data are float64 values; counts, cells and ids are
// stored as exact float64 integers.
const (
	// locParts holds the task's particles between two steps, the cells it owns next and its
	// work in every step so far: header [c0, c1, n], then the work of each of Steps steps,
	// then n ids, x, y, z, vx, vy, vz. It is the state a checkpoint keeps.
	locParts = "parts"
	// locBand* hold the positions and velocities of the particles of the task's first
	// (L) or last (R) band cells, for its neighbour on that side: header [first cell,
	// cells], the count of each cell, then x, y, z, vx, vy, vz.
	locBandL, locBandR = "bandL", "bandR"
	// locRho* hold the densities of the same particles and what the neighbour needs to move
	// their boundary: header [c0, c1, work, m], the work of the m cells nearest the
	// boundary (the nearest first), then rho and pt of the band's particles.
	locRhoL, locRhoR = "rhoL", "rhoR"
	// locOut* hold the particles that pass to the neighbour on that side after a step:
	// header [n], then n ids, x, y, z, vx, vy, vz.
	locOutL, locOutR = "outL", "outR"
	// locResult holds the task's particles at the end: header [n, seconds], its work in
	// every step, then n ids, x, y, z, vx, vy, vz; task 0 reads every task's.
	locResult = "result"
)

func locations() []string {
	return []string{locParts, locBandL, locBandR, locRhoL, locRhoR, locOutL, locOutR, locResult}
}

// FIFO positions of the iterative handles in a step, in the order a task takes them.
const (
	posIn    = iota // read the neighbours' outR/outL: the particles that came (round k: step k-1's)
	posBand         // write the own bands
	posHalo         // read the neighbours' bands
	posRho          // write the own densities of the bands
	posRhoIn        // read the neighbours'
	posOut          // write the particles that leave, and parts
)

// Result is what Run returns in the process of task 0.
type Result struct {
	State *State
	// Interactions counts the neighbour pairs of the density and the force phases over all
	// steps: twice the neighbour counts.
	Interactions int64
	// Seconds is the time of the steps this run computed (all of them, or those after
	// Resumed), the slowest task's; Computed is the interactions of those steps.
	Seconds  float64
	Computed int64
	// Imbalance is the mean over the steps of the largest work of a task over the mean
	// work of the tasks: 1 is a perfect balance.
	Imbalance float64
	// Resumed is the step the job restarted at from a checkpoint, 0 for a fresh start.
	Resumed int
}

// Run runs the job over the processes that the environment describes (one process when
// nothing started this one as part of a job). It returns the result in the process of task
// 0 and nil in the others.
func Run(ctx context.Context, p Params) (*Result, error) {
	return RunCheckpointed(ctx, p, orwl.Checkpoint{})
}

// RunCheckpointed is Run in a job that takes checkpoints as ck says (none when ck is the
// zero value and ORWL_CHECKPOINT_DIR is not set), and restarts from the newest complete one
// it finds. A checkpoint holds every task's particles, cells and work per step (its
// location parts) and the particles in transit between tasks (outL, outR); its fingerprint
// names the program "sph" (unless ck.Program says otherwise) and p's particles, steps, seed
// and tasks, so that a job of another problem refuses it.
func RunCheckpointed(ctx context.Context, p Params, ck orwl.Checkpoint) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if ck.Program == "" {
		ck.Program = "sph"
	}
	ck.Params = map[string]string{"n": fmt.Sprint(p.N), "steps": fmt.Sprint(p.Steps),
		"seed": fmt.Sprint(p.Seed), "tasks": fmt.Sprint(p.Tasks)}
	var result *Result
	err := orwl.Run(ctx, orwl.Config{Tasks: p.Tasks, Locations: locations(), Checkpoint: ck, Trace: p.Trace},
		func(ctx context.Context, t *orwl.Task) error {
			res, err := runTask(ctx, t, p)
			if res != nil {
				result = res
			}
			return err
		})
	return result, err
}

// task is one task's state and handles.
type task struct {
	t           *orwl.Task
	k           *consts
	p           Params
	me          int
	left, right bool // whether the task has a neighbour on that side
	deg         int
	c0, c1      int // the cells the task owns in the coming step

	own     particles // its particles, in no particular order
	ord     order
	win     window
	next    particles  // its particles after a step, in canonical order
	history []int64    // its work in every step
	leave   [2][]int32 // the indexes in next of the particles that pass to each side

	sideCells  [2][]int64 // the work of its cells along each boundary (side)
	theirCells []int64    // a neighbour's

	in, band, halo, rho, rhoIn, out [2]*orwl.Handle // by side: 0 left, 1 right
	parts                           *orwl.Handle
}

// runTask is the program of task t: the steps, then its part of the result, which task 0
// gathers and returns.
func runTask(ctx context.Context, t *orwl.Task, p Params) (*Result, error) {
	tk := &task{t: t, k: newConsts(p.N), p: p, me: t.ID(), history: make([]int64, p.Steps)}
	tk.left, tk.right = tk.me > 0, tk.me < p.Tasks-1
	tk.deg = tk.degree(tk.me)
	for _, l := range locations() {
		t.Scale(l, 0)
	}
	var restore *orwl.Handle
	if t.Resumed() > 0 {
		restore = t.ReadInsertOnce(t.Loc(tk.me, locParts), 0)
	} else {
		tk.initial()
	}
	tk.insert()
	publish := t.WriteInsertOnce(t.Loc(tk.me, locResult), 0)
	var gather []*orwl.Handle // task 0 reads every task's result once it is written
	if tk.me == 0 {
		for k := range p.Tasks {
			gather = append(gather, t.ReadInsertOnce(t.Loc(k, locResult), 1))
		}
	}
	if err := t.Schedule(ctx); err != nil {
		return nil, err
	}
	if restore != nil {
		if err := restore.Section(ctx, func(data []byte) error { return tk.load(orwl.Float64s(data)) }); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if err := t.Iterate(ctx, p.Steps, func(step int) error {
		err := tk.step(ctx, step)
		if tk.me == 0 && p.Progress != nil {
			p.Progress(step+1, p.Steps)
		}
		return err
	}); err != nil {
		return nil, err
	}
	seconds := time.Since(start).Seconds()
	if err := publish.Section(ctx, func([]byte) error {
		data, err := publish.Resize(8 * (2 + len(tk.history) + 7*tk.own.len()))
		out := orwl.Float64s(data)
		out[0], out[1] = float64(tk.own.len()), seconds
		putInts(out[2:], tk.history)
		packAll(out[2+len(tk.history):], &tk.own)
		return err
	}); err != nil || tk.me != 0 {
		return nil, err
	}
	return tk.gather(ctx, gather)
}

// initial sets the task's cells (the split of the estimated work) and its particles, on a
// fresh start.
func (tk *task) initial() {
	s := Initial(tk.p.N, tk.p.Seed)
	b := split(estimate(tk.k, s), tk.p.Tasks, tk.k.band)
	tk.c0, tk.c1 = b[tk.me], b[tk.me+1]
	for id := range s.X {
		if c := tk.k.cellOf(s.X[id], s.Y[id], s.Z[id]); tk.c0 <= c && c < tk.c1 {
			n := tk.own.len()
			tk.own.resize(n + 1)
			tk.own.id[n] = int32(id)
			tk.own.x[n], tk.own.y[n], tk.own.z[n] = s.X[id], s.Y[id], s.Z[id]
			tk.own.vx[n], tk.own.vy[n], tk.own.vz[n] = s.VX[id], s.VY[id], s.VZ[id]
		}
	}
}

// insert declares the iterative handles of a step (see the pos constants).
func (tk *task) insert() {
	t, me := tk.t, tk.me
	tk.parts = t.WriteInsert(t.Loc(me, locParts), posOut)
	for s, nb := range [2]int{me - 1, me + 1} {
		if nb < 0 || nb >= tk.p.Tasks {
			continue
		}
		mine, theirs := [2]string{locBandL, locBandR}, [2]string{locBandR, locBandL}
		rho, rhoTheirs := [2]string{locRhoL, locRhoR}, [2]string{locRhoR, locRhoL}
		out, outTheirs := [2]string{locOutL, locOutR}, [2]string{locOutR, locOutL}
		tk.in[s] = t.ReadInsert(t.Loc(nb, outTheirs[s]), posIn)
		tk.band[s] = t.WriteInsert(t.Loc(me, mine[s]), posBand)
		tk.halo[s] = t.ReadInsert(t.Loc(nb, theirs[s]), posHalo)
		tk.rho[s] = t.WriteInsert(t.Loc(me, rho[s]), posRho)
		tk.rhoIn[s] = t.ReadInsert(t.Loc(nb, rhoTheirs[s]), posRhoIn)
		tk.out[s] = t.WriteInsert(t.Loc(me, out[s]), posOut)
	}
}

// load restores the task's state from its parts location (a resumed job).
func (tk *task) load(v []float64) error {
	steps := len(tk.history)
	if len(v) < 3+steps {
		return fmt.Errorf("task %d's parts hold %d values, fewer than a header", tk.me, len(v))
	}
	tk.c0, tk.c1 = int(v[0]), int(v[1])
	for k, w := range v[3 : 3+steps] {
		tk.history[k] = int64(w)
	}
	return unpackParticles(&tk.own, v[3+steps:], int(v[2]))
}

// step is step k of the task: the six FIFO positions in order (see the package comment).
func (tk *task) step(ctx context.Context, k int) error {
	if err := tk.arrive(ctx); err != nil {
		return fmt.Errorf("task %d, step %d: %w", tk.me, k, err)
	}
	if err := tk.publishBands(ctx); err != nil {
		return err
	}
	if err := tk.gatherHalo(ctx); err != nil {
		return fmt.Errorf("task %d, step %d: %w", tk.me, k, err)
	}
	work := tk.win.density()
	tk.history[k] = work
	if err := tk.publishDensities(ctx, work); err != nil {
		return err
	}
	// The forces of the particles whose neighbours are all the task's own, while the
	// neighbours finish their density phase; then those along the boundaries.
	lo, hi := tk.c0, tk.c1
	if tk.left {
		lo += tk.k.band
	}
	if tk.right {
		hi -= tk.k.band
	}
	if lo >= hi {
		lo, hi = tk.c0, tk.c0
	}
	tk.next.resize(tk.win.o1 - tk.win.o0)
	tk.win.forces(&tk.next, lo, hi)
	c0, c1, err := tk.gatherDensities(ctx, work)
	if err != nil {
		return fmt.Errorf("task %d, step %d: %w", tk.me, k, err)
	}
	tk.win.forces(&tk.next, tk.c0, lo)
	tk.win.forces(&tk.next, hi, tk.c1)
	tk.c0, tk.c1 = c0, c1
	return tk.depart(ctx, k == len(tk.history)-1)
}

// arrive adds to the task's particles those that its neighbours passed to it after the
// last step (position posIn), and sorts them into canonical order.
func (tk *task) arrive(ctx context.Context) error {
	if err := tk.sides(ctx, tk.in, func(s int, v []float64) error {
		if len(v) == 0 {
			return nil // before the first step
		}
		if err := unpackParticles(&tk.own, v[1:], int(v[0])); err != nil {
			return fmt.Errorf("the particles from task %d: %w", tk.neighbour(s), err)
		}
		return nil
	}); err != nil {
		return err
	}
	return tk.ord.sort(tk.k, &tk.own, tk.c0, tk.c1)
}

// publishBands writes the positions and velocities of the particles of the task's first
// and last band of cells, with the count of each cell, for its neighbours (posBand: halo
// exchange 1).
func (tk *task) publishBands(ctx context.Context) error {
	band := tk.k.band
	cells := [2]int{tk.c0, tk.c1 - band} // the first cell of each band
	return tk.write(ctx, tk.band, func(s int) int {
		return 2 + band + 6*len(tk.ord.span(cells[s], cells[s]+band))
	}, func(s int, v []float64) {
		a := cells[s]
		v[0], v[1] = float64(a), float64(band)
		for c := range band {
			v[2+c] = float64(tk.ord.first[a+c+1-tk.c0] - tk.ord.first[a+c-tk.c0])
		}
		packParticles(v[2+band:], &tk.own, tk.ord.span(a, a+band), false)
	})
}

// gatherHalo lays out the task's window: the band its left neighbour published, its own
// particles in canonical order, the band of its right neighbour (posHalo).
func (tk *task) gatherHalo(ctx context.Context) error {
	band := tk.k.band
	w0, w1 := tk.c0, tk.c1
	if tk.left {
		w0 -= band
	}
	if tk.right {
		w1 += band
	}
	tk.win.reset(tk.k, w0, tk.c0, tk.c1, w1)
	halo := func(s int, v []float64) error {
		want := [2]int{w0, tk.c1}[s]
		if len(v) < 2+band || int(v[0]) != want || int(v[1]) != band || (len(v)-2-band)%6 != 0 {
			return fmt.Errorf("the halo band from task %d does not begin at cell %d with %d cells", tk.neighbour(s), want, band)
		}
		n := (len(v) - 2 - band) / 6
		q := v[2+band:]
		return tk.win.addBand(v[2:2+band], [6][]float64{q[:n], q[n : 2*n], q[2*n : 3*n], q[3*n : 4*n], q[4*n : 5*n], q[5*n : 6*n]})
	}
	if tk.left {
		if err := tk.halo[0].Section(ctx, func(data []byte) error { return halo(0, orwl.Float64s(data)) }); err != nil {
			return err
		}
	}
	tk.win.addOwn(&tk.own, &tk.ord)
	if tk.right {
		if err := tk.halo[1].Section(ctx, func(data []byte) error { return halo(1, orwl.Float64s(data)) }); err != nil {
			return err
		}
	}
	return tk.win.complete()
}

// bandParticles returns the range of the window's indexes of the task's particles in its
// band on side s.
func (tk *task) bandParticles(s int) (a, b int) {
	o, first := tk.win.o0, tk.ord.first
	if s == 0 {
		return o, o + int(first[tk.k.band])
	}
	return o + int(first[tk.c1-tk.c0-tk.k.band]), tk.win.o1
}

// side returns what the task tells the neighbour on side s of its work in the step, work,
// and of the work of its cells along their boundary.
func (tk *task) side(s int, work int64) side {
	m := 0
	if tk.deg > 0 {
		m = movable(tk.c1-tk.c0, tk.k.band)
	}
	cells := tk.sideCells[s][:0]
	for i := range m {
		cells = append(cells, tk.win.cellWork[[2]int{i, tk.c1 - tk.c0 - 1 - i}[s]])
	}
	tk.sideCells[s] = cells
	return side{work: work, deg: tk.deg, cells: cells}
}

// publishDensities writes rho and pt of the particles of the task's bands for its
// neighbours (posRho: halo exchange 2), with what they need to move their boundary with
// it: its cells, its work in the step and the work of its cells along the boundary.
func (tk *task) publishDensities(ctx context.Context, work int64) error {
	return tk.write(ctx, tk.rho, func(s int) int {
		a, b := tk.bandParticles(s)
		return 4 + len(tk.side(s, work).cells) + 2*(b-a)
	}, func(s int, v []float64) {
		mine := tk.side(s, work)
		m := len(mine.cells)
		v[0], v[1], v[2], v[3] = float64(tk.c0), float64(tk.c1), float64(work), float64(m)
		putInts(v[4:], mine.cells)
		a, b := tk.bandParticles(s)
		tk.win.densities(v[4+m:], a, b)
	})
}

// gatherDensities copies the neighbours' densities into the halo of the task's window
// (posRhoIn), and returns the cells the task owns in the next step: each boundary moved as
// the task and its neighbour on that side both compute it.
func (tk *task) gatherDensities(ctx context.Context, work int64) (c0, c1 int, err error) {
	band := tk.k.band
	halos := [2][2]int{{0, tk.win.o0}, {tk.win.o1, tk.win.n()}}
	c0, c1 = tk.c0, tk.c1
	err = tk.sides(ctx, tk.rhoIn, func(s int, v []float64) error {
		nb := tk.neighbour(s)
		if len(v) < 4 {
			return fmt.Errorf("the densities from task %d hold %d values, fewer than a header", nb, len(v))
		}
		nc0, nc1, nm := int(v[0]), int(v[1]), int(v[3])
		a, b := halos[s][0], halos[s][1]
		if [2]int{nc1, nc0}[s] != [2]int{tk.c0, tk.c1}[s] || nm != movable(nc1-nc0, band) || len(v) != 4+nm+2*(b-a) {
			return fmt.Errorf("the densities from task %d (cells [%d, %d), %d values) do not match its halo of %d particles", nb, nc0, nc1, len(v), b-a)
		}
		theirs := side{work: int64(v[2]), deg: tk.degree(nb), cells: tk.theirCells[:0]}
		for _, w := range v[4 : 4+nm] {
			theirs.cells = append(theirs.cells, int64(w))
		}
		tk.theirCells = theirs.cells
		tk.win.setDensities(v[4+nm:], a, b)
		if s == 0 {
			c0 += shift(theirs, tk.side(0, work))
		} else {
			c1 += shift(tk.side(1, work), theirs)
		}
		return nil
	})
	return c0, c1, err
}

// depart passes the particles whose cells belong to a neighbour now to it (posOut), and
// keeps the others in parts with the task's cells and its work so far. After the last
// step the task keeps all its particles: the job's result is in the tasks' parts.
func (tk *task) depart(ctx context.Context, last bool) error {
	tk.leave[0], tk.leave[1] = tk.leave[0][:0], tk.leave[1][:0]
	for i := range tk.next.len() {
		switch c := tk.k.cellOf(tk.next.x[i], tk.next.y[i], tk.next.z[i]); {
		case last:
		case c < tk.c0:
			tk.leave[0] = append(tk.leave[0], int32(i))
		case c >= tk.c1:
			tk.leave[1] = append(tk.leave[1], int32(i))
		}
	}
	if err := tk.write(ctx, tk.out, func(s int) int { return 1 + 7*len(tk.leave[s]) }, func(s int, v []float64) {
		v[0] = float64(len(tk.leave[s]))
		packParticles(v[1:], &tk.next, tk.leave[s], true)
	}); err != nil {
		return err
	}
	tk.own.resize(tk.next.len() - len(tk.leave[0]) - len(tk.leave[1]))
	kept, l, r := 0, tk.leave[0], tk.leave[1]
	for i := range tk.next.len() {
		switch {
		case len(l) > 0 && int(l[0]) == i:
			l = l[1:]
		case len(r) > 0 && int(r[0]) == i:
			r = r[1:]
		default:
			tk.own.set(kept, &tk.next, i)
			kept++
		}
	}
	return tk.parts.Section(ctx, func([]byte) error {
		data, err := tk.parts.Resize(8 * (3 + len(tk.history) + 7*tk.own.len()))
		v := orwl.Float64s(data)
		v[0], v[1], v[2] = float64(tk.c0), float64(tk.c1), float64(tk.own.len())
		putInts(v[3:], tk.history)
		packAll(v[3+len(tk.history):], &tk.own)
		return err
	})
}

// neighbour returns the task on side s (0 left, 1 right).
func (tk *task) neighbour(s int) int { return tk.me + 2*s - 1 }

// degree returns the number of neighbours of task t.
func (tk *task) degree(t int) int { return btoi(t > 0) + btoi(t < tk.p.Tasks-1) }

// sides calls fn in a section of the handle of each side that has one, left first.
func (tk *task) sides(ctx context.Context, hs [2]*orwl.Handle, fn func(s int, v []float64) error) error {
	for s, h := range hs {
		if h == nil {
			continue
		}
		if err := h.Section(ctx, func(data []byte) error { return fn(s, orwl.Float64s(data)) }); err != nil {
			return err
		}
	}
	return nil
}

// write resizes the location of each side's write handle to size(s) values and fills it
// with fill.
func (tk *task) write(ctx context.Context, hs [2]*orwl.Handle, size func(s int) int, fill func(s int, v []float64)) error {
	for s, h := range hs {
		if h == nil {
			continue
		}
		if err := h.Section(ctx, func([]byte) error {
			data, err := h.Resize(8 * size(s))
			if err == nil {
				fill(s, orwl.Float64s(data))
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// packParticles writes the particles idx of p to v: their ids when withID, then x, y, z,
// vx, vy, vz, each an array.
func packParticles(v []float64, p *particles, idx []int32, withID bool) {
	n := len(idx)
	if withID {
		for i, j := range idx {
			v[i] = float64(p.id[j])
		}
		v = v[n:]
	}
	for f, a := range p.floats() {
		dst := v[f*n : (f+1)*n]
		for i, j := range idx {
			dst[i] = (*a)[j]
		}
	}
}

// packAll writes every particle of p to v as packParticles does, with their ids.
func packAll(v []float64, p *particles) {
	n := p.len()
	for i, id := range p.id {
		v[i] = float64(id)
	}
	for f, a := range p.floats() {
		copy(v[(1+f)*n:(2+f)*n], *a)
	}
}

// unpackParticles appends to p the n particles that packParticles wrote to v with their
// ids.
func unpackParticles(p *particles, v []float64, n int) error {
	if n < 0 || len(v) != 7*n {
		return fmt.Errorf("%d values for %d particles", len(v), n)
	}
	m := p.len()
	p.resize(m + n)
	for i := range n {
		p.id[m+i] = int32(v[i])
	}
	for f, a := range p.floats() {
		copy((*a)[m:], v[(1+f)*n:(2+f)*n])
	}
	return nil
}

// putInts writes the integers w to v as float64 values (exact below 2⁵³).
func putInts(v []float64, w []int64) {
	for i, x := range w {
		v[i] = float64(x)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gather reads every task's result (task 0) and returns the job's.
func (tk *task) gather(ctx context.Context, hs []*orwl.Handle) (*Result, error) {
	steps := len(tk.history)
	res := &Result{State: newState(tk.p.N), Resumed: tk.t.Resumed()}
	work := make([][]int64, len(hs))
	seen := make([]bool, tk.p.N)
	var all particles
	for t, h := range hs {
		if err := h.Section(ctx, func(data []byte) error {
			v := orwl.Float64s(data)
			if len(v) < 2+steps {
				return fmt.Errorf("task %d's result holds %d values, fewer than a header", t, len(v))
			}
			res.Seconds = math.Max(res.Seconds, v[1])
			work[t] = make([]int64, steps)
			for k, w := range v[2 : 2+steps] {
				work[t][k] = int64(w)
			}
			all.resize(0)
			if err := unpackParticles(&all, v[2+steps:], int(v[0])); err != nil {
				return fmt.Errorf("task %d's result: %w", t, err)
			}
			for _, id := range all.id {
				if id < 0 || int(id) >= len(seen) || seen[id] {
					return fmt.Errorf("task %d's result holds particle %d, which is not a particle or another task's", t, id)
				}
				seen[id] = true
			}
			all.scatter(res.State)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, fmt.Errorf("no task's result holds particle %d", i)
	}
	for k := range steps {
		var sum, most int64
		for t := range work {
			sum += work[t][k]
			most = max(most, work[t][k])
			if k >= res.Resumed {
				res.Computed += 2 * work[t][k]
			}
		}
		res.Interactions += 2 * sum
		if sum > 0 {
			res.Imbalance += float64(most) * float64(len(work)) / float64(sum)
		} else {
			res.Imbalance++
		}
	}
	if steps > 0 {
		res.Imbalance /= float64(steps)
	} else {
		res.Imbalance = 1 // no work, evenly spread
	}
	return res, nil
}
