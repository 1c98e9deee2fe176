package fluid

import (
	"fmt"
	"math"
)

// This file is the physics, shared by Sequential and the tasks of Run: the canonical
// order, the density phase and the force phase with the integration. Every product that
// feeds an addition or a subtraction is written float64(a*b) so that no compiler fuses it
// into a multiply-add (the Go specification: an explicit conversion rounds), whatever
// GOAMD64 or GOARCH: the results are those of the problem's exact build.

// particles is a set of particles as arrays, one per coordinate.
type particles struct {
	id                  []int32
	x, y, z, vx, vy, vz []float64
}

func (p *particles) len() int { return len(p.id) }

// resize sets the number of particles to n, keeping the first ones; memory is reused
// once it has grown, so a steady state allocates nothing.
func (p *particles) resize(n int) {
	p.id = grow(p.id, n)
	for _, a := range p.floats() {
		*a = grow(*a, n)
	}
}

// floats returns the coordinate arrays, in the order of the locations' formats.
func (p *particles) floats() [6]*[]float64 {
	return [6]*[]float64{&p.x, &p.y, &p.z, &p.vx, &p.vy, &p.vz}
}

// set copies particle j of q into particle i of p.
func (p *particles) set(i int, q *particles, j int) {
	p.id[i], p.x[i], p.y[i], p.z[i] = q.id[j], q.x[j], q.y[j], q.z[j]
	p.vx[i], p.vy[i], p.vz[i] = q.vx[j], q.vy[j], q.vz[j]
}

// grow returns s with length n, its prefix kept, reallocated with a margin when its
// capacity is too small.
func grow[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return append(s[:cap(s)], make([]T, n+n/4-cap(s))...)[:n]
}

// order is the canonical order of a set of particles that lie in the cells [c0, c1): cell
// by cell, ascending id within a cell.
type order struct {
	c0, c1 int
	cell   []int32 // the cell of each particle
	perm   []int32 // the particles' indexes in canonical order
	first  []int32 // first[c-c0]: where cell c begins in perm; len c1-c0+1
}

// sort computes the canonical order of p. A particle outside [c0, c1) is an error naming
// it.
func (o *order) sort(k *consts, p *particles, c0, c1 int) error {
	n := p.len()
	o.c0, o.c1 = c0, c1
	o.cell, o.perm = grow(o.cell, n), grow(o.perm, n)
	o.first = grow(o.first, c1-c0+1)
	clear(o.first)
	for i := range n {
		c := k.cellOf(p.x[i], p.y[i], p.z[i])
		if c < c0 || c >= c1 {
			return fmt.Errorf("particle %d at (%v, %v, %v) is in cell %d, outside cells [%d, %d)", p.id[i], p.x[i], p.y[i], p.z[i], c, c0, c1)
		}
		o.cell[i] = int32(c - c0)
		o.first[c-c0+1]++
	}
	for c := range c1 - c0 {
		o.first[c+1] += o.first[c]
	}
	next := o.first[:c1-c0] // filled in place, then shifted back
	for i := range n {
		c := o.cell[i]
		o.perm[next[c]] = int32(i)
		next[c]++
	}
	copy(o.first[1:], next)
	o.first[0] = 0
	for c := range c1 - c0 {
		cell := o.perm[o.first[c]:o.first[c+1]]
		for a := 1; a < len(cell); a++ { // insertion: the cells are small and mostly in order
			for b := a; b > 0 && p.id[cell[b]] < p.id[cell[b-1]]; b-- {
				cell[b], cell[b-1] = cell[b-1], cell[b]
			}
		}
	}
	return nil
}

// span returns the range of perm of the cells [a, b).
func (o *order) span(a, b int) []int32 { return o.perm[o.first[a-o.c0]:o.first[b-o.c0]] }

// window is what one task computes with: the particles of the cells [w0, w1) in canonical
// order, of which those of the cells [c0, c1), indexes [o0, o1), are its own, and the
// others its halo. It computes the density and the forces of its own particles.
type window struct {
	k              *consts
	w0, w1, c0, c1 int
	o0, o1         int
	start          []int32 // start[c-w0]: the index of the first particle of cell c
	cells          int     // cells appended so far

	x, y, z []float64 // the positions, an array each: the density phase scans them
	b       []body    // the same particles as the force phase reads them
	id      []int32   // ids of the own particles, id[i-o0]

	nbFirst  []int     // the neighbours of own particle i are nb[nbFirst[i-o0]:nbFirst[i-o0+1]]
	nb       []int32   // in canonical neighbour order
	nbF      []float64 // F(r) = W'(r)/r of each neighbour, nb's twin
	r2       []float64 // the squared distances of one particle's neighbour candidates
	cellWork []int64   // neighbour count of every own cell's particles
}

// body is a particle as the force phase reads it: everything it needs of a neighbour in
// one 64-byte record, a single cache line when aligned (as Go aligns large arrays), and
// one bounds check.
type body struct {
	x, y, z, vx, vy, vz, rho, pt float64
}

// reset begins a window of the cells [w0, w1) whose own cells are [c0, c1).
func (w *window) reset(k *consts, w0, c0, c1, w1 int) {
	w.k, w.w0, w.c0, w.c1, w.w1 = k, w0, c0, c1, w1
	w.start = grow(w.start, w1-w0+1)
	w.start[0] = 0
	w.cells = 0
	w.resize(0)
}

func (w *window) n() int { return int(w.start[w.cells]) }

func (w *window) resize(n int) {
	w.x, w.y, w.z, w.b = grow(w.x, n), grow(w.y, n), grow(w.z, n), grow(w.b, n)
}

// addBand appends the cells of a halo band, count[i] particles in its i-th cell, with their
// positions and velocities q (x, y, z, vx, vy, vz).
func (w *window) addBand(count []float64, q [6][]float64) error {
	n := w.n()
	if w.cells+len(count) > w.w1-w.w0 {
		return fmt.Errorf("a band of %d cells after %d overflows the window [%d, %d)", len(count), w.cells, w.w0, w.w1)
	}
	total := n
	for _, c := range count {
		total += int(c)
		w.cells++
		w.start[w.cells] = int32(total)
	}
	if total-n != len(q[0]) {
		return fmt.Errorf("a band's cells count %d particles, its data has %d", total-n, len(q[0]))
	}
	w.resize(total)
	copy(w.x[n:], q[0])
	copy(w.y[n:], q[1])
	copy(w.z[n:], q[2])
	b := w.b[n:total]
	for i := range b {
		b[i] = body{x: q[0][i], y: q[1][i], z: q[2][i], vx: q[3][i], vy: q[4][i], vz: q[5][i]}
	}
	return nil
}

// addOwn appends the own cells: the particles p in the canonical order o.
func (w *window) addOwn(p *particles, o *order) {
	n := w.n()
	w.o0 = n
	for c := o.c0; c < o.c1; c++ {
		w.cells++
		w.start[w.cells] = int32(n) + o.first[c+1-o.c0]
	}
	w.o1 = w.n()
	w.resize(w.o1)
	w.id = grow(w.id, w.o1-w.o0)
	x, y, z, b := w.x[n:w.o1], w.y[n:w.o1], w.z[n:w.o1], w.b[n:w.o1]
	id := w.id[:len(x)]
	for i, j := range o.perm[:len(x)] {
		id[i], x[i], y[i], z[i] = p.id[j], p.x[j], p.y[j], p.z[j]
		b[i] = body{x: p.x[j], y: p.y[j], z: p.z[j], vx: p.vx[j], vy: p.vy[j], vz: p.vz[j]}
	}
}

// complete checks that every cell of the window was appended.
func (w *window) complete() error {
	if w.cells != w.w1-w.w0 {
		return fmt.Errorf("the window [%d, %d) has %d cells, want %d", w.w0, w.w1, w.cells, w.w1-w.w0)
	}
	return nil
}

// span is a run of a window's particles, the indexes [lo, hi).
type span struct{ lo, hi int32 }

// ranges returns the particle spans of the neighbour cells of cell c in the canonical
// visiting order: for each (dz, dy), the run of up to three cells along x, contiguous in
// cell order, so one span each.
func (w *window) ranges(c int, sp *[9]span) []span {
	nc := w.k.nc
	cx, cy, cz := c%nc, c/nc%nc, c/(nc*nc)
	nr := 0
	for dz := -1; dz <= 1; dz++ {
		if cz+dz < 0 || cz+dz >= nc {
			continue
		}
		for dy := -1; dy <= 1; dy++ {
			if cy+dy < 0 || cy+dy >= nc {
				continue
			}
			a := c + nc*(dy+nc*dz) - w.w0
			b := a + 1
			if cx > 0 {
				a--
			}
			if cx < nc-1 {
				b++
			}
			sp[nr] = span{w.start[a], w.start[b]}
			nr++
		}
	}
	return sp[:nr]
}

// around returns the spans of particle i's candidates: the spans rs of its cell's
// neighbourhood, the one that holds i cut in two around it.
func around(dst *[10]span, rs []span, i int32) []span {
	n := 0
	for _, s := range rs {
		if s.lo <= i && i < s.hi {
			dst[n], dst[n+1] = span{s.lo, i}, span{i + 1, s.hi}
			n += 2
		} else {
			dst[n] = s
			n++
		}
	}
	return dst[:n]
}

// density computes rho and pt of the own particles, their neighbour lists and the work
// of every own cell (its particles' neighbour counts), and returns the total work.
func (w *window) density() int64 {
	k := w.k
	own := w.o1 - w.o0
	w.nbFirst = grow(w.nbFirst, own+1)
	w.cellWork = grow(w.cellWork, w.c1-w.c0)
	nb := w.nb[:cap(w.nb)]
	used := 0
	var total int64
	var near [9]span
	var cand [10]span
	for c := w.c0; c < w.c1; c++ {
		rs := w.ranges(c, &near)
		room := filterSlack // filter's room for the candidates of a particle of c
		for _, s := range rs {
			room += int(s.hi - s.lo)
		}
		if len(w.r2) < room {
			w.r2 = grow(w.r2, room)
		}
		first := used
		for i := w.start[c-w.w0]; i < w.start[c-w.w0+1]; i++ {
			w.nbFirst[int(i)-w.o0] = used
			if len(nb)-used < room { // doubled: the lists of a step grow from nothing once
				nb = grow(nb[:used], max(used+room, 2*len(nb)))
				nb = nb[:cap(nb)]
			}
			found := filter(nb[used:], w.r2, around(&cand, rs, i), w.x, w.y, w.z, w.x[i], w.y[i], w.z[i], k.H2)
			if len(w.nbF) < used+found {
				w.nbF = grow(w.nbF, max(used+found, 2*len(w.nbF)))
				w.nbF = w.nbF[:cap(w.nbF)]
			}
			rho := k.m * kernelSum(w.r2[:found], w.nbF[used:used+found], k)
			used += found
			w.b[i].rho, w.b[i].pt = rho, rho/(rho*rho)
		}
		w.cellWork[c-w.c0] = int64(used - first)
		total += int64(used - first)
	}
	w.nbFirst[own] = used
	w.nb = nb[:used]
	return total
}

// filterSlack is the room that filter needs past the candidates: the vector kernel
// stores four at a time.
const filterSlack = 3

// filter writes to dst the indexes j of the particles (x[j], y[j], z[j]) of the spans
// closer to (xi, yi, zi) than the support (r² < H2), in order, and their r² to r2 at the
// same places; it returns how many. dst and r2 must have room for all the candidates and
// filterSlack more: past the neighbours they receive scratch values. The vector kernel
// (filterVec) does it where it exists, filterScalar elsewhere, with the same result.
func filter(dst []int32, r2 []float64, spans []span, x, y, z []float64, xi, yi, zi, H2 float64) int {
	if n, ok := filterVec(dst, r2, spans, x, y, z, xi, yi, zi, H2); ok {
		return n
	}
	return filterScalar(dst, r2, spans, x, y, z, xi, yi, zi, H2)
}

// filterScalar is filter one candidate at a time. It writes every candidate and advances
// only past the neighbours, without a branch.
func filterScalar(dst []int32, r2 []float64, spans []span, x, y, z []float64, xi, yi, zi, H2 float64) int {
	n := 0
	for _, s := range spans {
		xs, ys, zs := x[s.lo:s.hi], y[s.lo:s.hi], z[s.lo:s.hi]
		js, ds := dst[n:][:len(xs)], r2[n:][:len(xs)]
		m := 0
		for j, xj := range xs {
			dx, dy, dz := xj-xi, ys[j]-yi, zs[j]-zi // the squares of -(xi-xj), ...: the same
			d := float64(float64(dx*dx)+float64(dy*dy)) + float64(dz*dz)
			js[m], ds[m] = s.lo+int32(j), d
			m += int(math.Float64bits(d-H2) >> 63) // the sign of d-H2: 1 when d < H2 (d == H2 gives +0)
		}
		n += m
	}
	return n
}

// kernelSum returns W(0) + Σ W(r) over the squared distances r2, in order, and writes
// F(r) = W'(r)/r of each to f, for the force phase: the vector kernel (kernelSumVec) does
// a prefix where it exists, kernelSumScalar the rest, with the same bits.
func kernelSum(r2, f []float64, k *consts) float64 {
	f = f[:len(r2)]
	acc, done := kernelSumVec(k.sigma, r2, f, k)
	return kernelSumScalar(acc, r2[done:], f[done:], k)
}

// kernelSumScalar returns acc + Σ W(r) over r2, in order, one at a time, and writes F(r) of
// each to f. It computes both pieces of W and F and keeps those of q < 1 or of q >= 1
// with a mask: the branch would be taken at random.
func kernelSumScalar(acc float64, r2, f []float64, k *consts) float64 {
	f = f[:len(r2)]
	for i, d := range r2 {
		r := math.Sqrt(d)
		q := r * k.hinv
		t := 2.0 - q
		w0 := k.sigma * (1.0 + float64(float64(q*q)*(float64(0.75*q)-1.5)))
		f0 := k.c1 * (float64(2.25*q) - 3.0)
		w1 := ((k.sig4 * t) * t) * t
		f1 := (-((k.c2 * t) * t)) / r
		var inner uint64
		if q < 1.0 {
			inner = ^uint64(0)
		}
		w := math.Float64frombits(math.Float64bits(w0)&inner | math.Float64bits(w1)&^inner)
		f[i] = math.Float64frombits(math.Float64bits(f0)&inner | math.Float64bits(f1)&^inner)
		acc += w
	}
	return acc
}

// forces computes the acceleration of the own particles of the cells [a, b) from their
// neighbours and integrates it: density must have run, and rho and pt be known of every
// neighbour (those of the halo are needed only within a band of cells of the window's
// ends). out, which must hold as many particles as the window owns, receives their ids and
// new positions and velocities, walls applied, at their indexes in canonical order.
func (w *window) forces(out *particles, a, b int) {
	k := w.k
	for i := int(w.start[a-w.w0]); i < int(w.start[b-w.w0]); i++ {
		bi := &w.b[i]
		nb := w.nb[w.nbFirst[i-w.o0]:w.nbFirst[i-w.o0+1]]
		fs := w.nbF[w.nbFirst[i-w.o0]:][:len(nb)]
		var s [3]float64
		done := forceSumVec(&s, bi, w.b, nb, fs, k)
		forceSumScalar(&s, *bi, w.b, nb[done:], fs[done:], k)
		o := i - w.o0
		out.id[o] = w.id[o]
		out.x[o], out.vx[o] = integrate(bi.x, bi.vx, -s[0], k.dt)
		out.y[o], out.vy[o] = integrate(bi.y, bi.vy, -s[1], k.dt)
		out.z[o], out.vz[o] = integrate(bi.z, bi.vz, -s[2], k.dt)
	}
}

// forceSumScalar adds to s, one neighbour at a time in order, the terms
// m (pt_i + pt_j + Π_ij) F(r_ij) (x_i − x_j) of body bi's neighbours nb (indexes in
// bodies), whose F(r) are fs: each component of s is a sum in neighbour order. The
// vector kernel (forceSumVec) does a prefix of the neighbours where it exists, with the
// same bits.
func forceSumScalar(s *[3]float64, bi body, bodies []body, nb []int32, fs []float64, k *consts) {
	sx, sy, sz := s[0], s[1], s[2]
	fs = fs[:len(nb)]
	for n, j := range nb {
		bj := &bodies[j]
		dx, dy, dz := bi.x-bj.x, bi.y-bj.y, bi.z-bj.z
		vdotr := float64(float64((bi.vx-bj.vx)*dx)+float64((bi.vy-bj.vy)*dy)) + float64((bi.vz-bj.vz)*dz)
		// The viscosity, computed always and kept when vdotr < 0 with a mask (+0
		// otherwise, as 0.0), rather than a branch taken at random.
		r2 := float64(float64(dx*dx)+float64(dy*dy)) + float64(dz*dz)
		mu := (k.h * vdotr) / (r2 + k.epsh2)
		visc := (float64((2.0*mu)*mu) - mu) / (0.5 * (bi.rho + bj.rho))
		var keep uint64
		if vdotr < 0.0 {
			keep = ^uint64(0)
		}
		visc = math.Float64frombits(math.Float64bits(visc) & keep)
		g := (k.m * ((bi.pt + bj.pt) + visc)) * fs[n]
		sx += float64(g * dx)
		sy += float64(g * dy)
		sz += float64(g * dz)
	}
	s[0], s[1], s[2] = sx, sy, sz
}

// integrate is one component of the symplectic Euler step and the walls' reflection.
func integrate(x, v, a, dt float64) (float64, float64) {
	v += float64(dt * a)
	x += float64(dt * v)
	if x < 0.0 {
		x, v = -x, -v
	} else if x > 1.0 {
		x, v = 2.0-x, -v
	}
	return x, v
}

// scatter copies the particles p into s, each at its id.
func (p *particles) scatter(s *State) {
	for i, id := range p.id {
		s.X[id], s.Y[id], s.Z[id] = p.x[i], p.y[i], p.z[i]
		s.VX[id], s.VY[id], s.VZ[id] = p.vx[i], p.vy[i], p.vz[i]
	}
}

// densities writes rho then pt of the window's particles [a, b) to v, which holds 2(b-a)
// values.
func (w *window) densities(v []float64, a, b int) {
	rho, pt := v[:b-a], v[b-a:2*(b-a)]
	for i, p := range w.b[a:b] {
		rho[i], pt[i] = p.rho, p.pt
	}
}

// setDensities sets rho and pt of the window's particles [a, b) from v as densities
// writes it.
func (w *window) setDensities(v []float64, a, b int) {
	rho, pt := v[:b-a], v[b-a:2*(b-a)]
	for i := range w.b[a:b] {
		w.b[a+i].rho, w.b[a+i].pt = rho[i], pt[i]
	}
}
