package jacobi

import "slices"

// block is the part of the domain one task computes, stored with a frame of ghost cells: a
// ghost column on the west and east of every row, and in 2-D a ghost row above and below.
// Ghost cells hold the neighbours' edges (refreshed every iteration) or the boundary values
// (set once). Inner cell (r, c), 0 <= r < rows, 0 <= c < cols, is at index
// (r+hy)*stride + c + 1 of a buffer of (rows+2*hy)*stride values.
type block struct {
	x0, y0     int // global coordinates of inner cell (0, 0)
	rows, cols int
	hy         int // ghost rows above and below: 0 on a line, 1 on a plane
	stride     int // cols + 2
	dim        int
}

// at returns the index of inner cell (r, c); r and c may be -1, rows or cols for ghosts.
func (b *block) at(r, c int) int { return (r+b.hy)*b.stride + c + 1 }

// cells returns the number of inner cells.
func (b *block) cells() int { return b.rows * b.cols }

// alloc returns two buffers of the block, both holding the initial values and the boundary
// values in the ghost cells of the sides that have no neighbour (hasNeighbour(d) false).
func (b *block) alloc(hasNeighbour func(dir) bool) (u, v []float64) {
	n := (b.rows + 2*b.hy) * b.stride
	u, v = make([]float64, n), make([]float64, n)
	for r := range b.rows {
		for c := range b.cols {
			u[b.at(r, c)] = Initial(b.x0+c, b.y0+r)
		}
	}
	for _, d := range b.dirs() {
		if g := b.ghosts(d); !hasNeighbour(d) {
			g.write(u, slices.Repeat([]float64{d.boundary()}, g.n))
		}
	}
	copy(v, u)
	return u, v
}

// dirs returns the directions in which a block of this dimension has neighbours.
func (b *block) dirs() []dir {
	if b.dim == 1 {
		return []dir{west, east}
	}
	return []dir{west, east, north, south}
}

// strip is n cells of a block's buffer, at start, start+step, start+2*step...: a row of
// the block (step 1) or a column (step stride).
type strip struct{ start, step, n int }

// read copies the strip's cells of buf into dst, len(dst) = s.n.
func (s strip) read(dst, buf []float64) {
	if s.step == 1 {
		copy(dst, buf[s.start:s.start+s.n])
		return
	}
	for k := range dst {
		dst[k] = buf[s.start+k*s.step]
	}
}

// write copies src into the strip's cells of buf, len(src) = s.n.
func (s strip) write(buf, src []float64) {
	if s.step == 1 {
		copy(buf[s.start:s.start+s.n], src)
		return
	}
	for k, x := range src {
		buf[s.start+k*s.step] = x
	}
}

// edge returns the inner cells on side d, which the neighbour in direction d needs: a column
// for west and east, a row for north and south.
func (b *block) edge(d dir) strip { return b.side(d, 0) }

// ghosts returns the ghost cells on side d, in the order of edge.
func (b *block) ghosts(d dir) strip { return b.side(d, 1) }

// side returns the cells along side d: the outermost inner ones (out 0) or the ghosts
// beyond them (out 1).
func (b *block) side(d dir, out int) strip {
	switch d {
	case west:
		return strip{start: b.at(0, -out), step: b.stride, n: b.rows}
	case east:
		return strip{start: b.at(0, b.cols-1+out), step: b.stride, n: b.rows}
	case north:
		return strip{start: b.at(-out, 0), step: 1, n: b.cols}
	default:
		return strip{start: b.at(b.rows-1+out, 0), step: 1, n: b.cols}
	}
}

// interior computes the new values of the cells whose stencil reads no ghost cell.
func (b *block) interior(u, v []float64) {
	if b.rows-b.hy > b.hy && b.cols > 2 {
		b.sweep(u, v, b.hy, b.rows-b.hy, 1, b.cols-1)
	}
}

// border computes the new values of the cells that interior leaves out: the cells next to
// the ghost frame.
func (b *block) border(u, v []float64) {
	if b.hy == 1 {
		b.sweep(u, v, 0, 1, 0, b.cols)
		if b.rows > 1 {
			b.sweep(u, v, b.rows-1, b.rows, 0, b.cols)
		}
	}
	if lo, hi := b.hy, b.rows-b.hy; hi > lo {
		b.sweep(u, v, lo, hi, 0, 1)
		if b.cols > 1 {
			b.sweep(u, v, lo, hi, b.cols-1, b.cols)
		}
	}
}

// sweep computes v from u on the inner cells of rows [r0, r1) and columns [c0, c1): the mean
// of the cell and its west and east neighbours on a line, of the cell and its four neighbours
// on a plane. The operands are added in one fixed order (north, west, centre, east, south),
// so the result does not depend on how the domain is cut.
func (b *block) sweep(u, v []float64, r0, r1, c0, c1 int) {
	if c1-c0 == 1 { // a column of the border: one cell per row, no slices to set up
		for r := r0; r < r1; r++ {
			i := b.at(r, c0)
			if b.dim == 1 {
				v[i] = (u[i-1] + u[i] + u[i+1]) / 3
			} else {
				v[i] = (u[i-b.stride] + u[i-1] + u[i] + u[i+1] + u[i+b.stride]) / 5
			}
		}
		return
	}
	for r := r0; r < r1; r++ {
		i := b.at(r, c0)
		out := v[i : i+c1-c0]
		row := u[i-1 : i+len(out)+1] // west ghost or neighbour, the cells, east
		if b.dim == 1 {
			line3(out, row)
		} else {
			plane5(out, u[i-b.stride:i-b.stride+len(out)], row, u[i+b.stride:i+b.stride+len(out)])
		}
	}
}

// Line3 is the 1-D kernel (line3), for a program that compares its exchange with this
// package's on the same arithmetic (lab/bench/floor).
func Line3(out, row []float64) { line3(out, row) }

// line3 sets out[i] = (row[i] + row[i+1] + row[i+2]) / 3; len(row) = len(out)+2. Written so
// that the compiler proves every index in bounds (no checks in the loop). The loop is bound
// by the divider (one DIVSD per cell, the instructions of the C reference's loop), and it
// ran 1-4% faster (CPU time per cell) as a function of its own than inlined in sweep: the
// same instructions, placed elsewhere. Hence noinline, on plane5 too; lab bench stencil
// -loops compares the sweep with C's.
//
//go:noinline
func line3(out, row []float64) {
	if len(row) < 2 {
		return
	}
	w, c := row[0], row[1]
	row = row[2:]
	out = out[:len(row)]
	for i, e := range row {
		out[i] = (w + c + e) / 3
		w, c = c, e
	}
}

// plane5 sets out[i] = (up[i] + row[i] + row[i+1] + row[i+2] + down[i]) / 5; len(row) =
// len(out)+2, len(up) = len(down) = len(out). Bounds are proved outside the loop.
//
//go:noinline
func plane5(out, up, row, down []float64) {
	if len(row) < 2 {
		return
	}
	w, c := row[0], row[1]
	row = row[2:]
	out, up, down = out[:len(row)], up[:len(row)], down[:len(row)]
	for i, e := range row {
		out[i] = (up[i] + w + c + e + down[i]) / 5
		w, c = c, e
	}
}
