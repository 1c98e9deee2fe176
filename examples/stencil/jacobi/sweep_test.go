package jacobi

import (
	"math"
	"math/rand/v2"
	"testing"
)

// plainSweep is the stencil written as directly as possible, one cell at a time over the
// whole block: the reference that the optimised kernels (line3, plane5, and the split of a
// sweep into interior and border) must equal bit for bit.
func plainSweep(b *block, u, v []float64) {
	for r := range b.rows {
		for c := range b.cols {
			i := b.at(r, c)
			if b.dim == 1 {
				v[i] = (u[i-1] + u[i] + u[i+1]) / 3
			} else {
				v[i] = (u[i-b.stride] + u[i-1] + u[i] + u[i+1] + u[i+b.stride]) / 5
			}
		}
	}
}

// randomValues returns n values of random signs and magnitudes (over many binades, so that
// any change in the order of the additions changes some results), a few of them zero.
func randomValues(rng *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		if rng.IntN(16) > 0 {
			x[i] = math.Ldexp(rng.Float64()-0.5, rng.IntN(40)-20)
		}
	}
	return x
}

// sameBits reports the first index where got and want differ in their bits, or -1.
func sameBits(got, want []float64) int {
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			return i
		}
	}
	return -1
}

// TestKernelsAreThePlainStencil checks the kernels against plainSweep, bit for bit, on
// blocks of random shapes (rows and columns from 1, odd and even) and random values: the
// interior and border of a block together, and line3 and plane5 alone on rows of every
// length from 0, each writing nothing outside its row.
func TestKernelsAreThePlainStencil(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	for trial := range 300 {
		dim := 1 + trial%2
		b := block{rows: 1, cols: 1 + rng.IntN(70), dim: dim}
		if dim == 2 {
			b.rows, b.hy = 1+rng.IntN(12), 1
		}
		b.stride = b.cols + 2
		u := randomValues(rng, (b.rows+2*b.hy)*b.stride)
		got, want := randomValues(rng, len(u)), make([]float64, len(u))
		copy(want, got) // the frame keeps its values in both
		b.interior(u, got)
		b.border(u, got)
		plainSweep(&b, u, want)
		if i := sameBits(got, want); i >= 0 {
			t.Fatalf("%d-D block of %dx%d cells: value %d is %v, the plain stencil's %v", dim, b.rows, b.cols, i, got[i], want[i])
		}
	}
	for n := range 40 {
		row, up, down := randomValues(rng, n+2), randomValues(rng, n), randomValues(rng, n)
		for _, k := range []struct {
			name string
			run  func(out []float64)
			cell func(i int) float64
		}{
			{"line3", func(out []float64) { line3(out, row) }, func(i int) float64 { return (row[i] + row[i+1] + row[i+2]) / 3 }},
			{"plane5", func(out []float64) { plane5(out, up, row, down) }, func(i int) float64 {
				return (up[i] + row[i] + row[i+1] + row[i+2] + down[i]) / 5
			}},
		} {
			buf := randomValues(rng, n+2) // one guard value on each side of out
			guard := []float64{buf[0], buf[n+1]}
			k.run(buf[1 : n+1])
			for i := range n {
				if want := k.cell(i); math.Float64bits(buf[1+i]) != math.Float64bits(want) {
					t.Fatalf("%s over %d cells: cell %d is %v, the plain stencil's %v", k.name, n, i, buf[1+i], want)
				}
			}
			if buf[0] != guard[0] || buf[n+1] != guard[1] {
				t.Fatalf("%s over %d cells wrote outside its row", k.name, n)
			}
		}
	}
}
