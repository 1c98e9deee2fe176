package jacobi

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func TestRunIsBitIdenticalToSequential(t *testing.T) {
	for _, p := range []Params{
		{Dim: 1, NX: 257, NY: 1, PX: 1, PY: 1, Iters: 60},
		{Dim: 1, NX: 257, NY: 1, PX: 2, PY: 1, Iters: 60},
		{Dim: 1, NX: 257, NY: 1, PX: 5, PY: 1, Iters: 61},
		{Dim: 1, NX: 8, NY: 1, PX: 8, PY: 1, Iters: 9}, // one cell per task
		{Dim: 2, NX: 23, NY: 17, PX: 1, PY: 1, Iters: 30},
		{Dim: 2, NX: 23, NY: 17, PX: 2, PY: 2, Iters: 30},
		{Dim: 2, NX: 23, NY: 17, PX: 3, PY: 2, Iters: 31},
		{Dim: 2, NX: 23, NY: 17, PX: 1, PY: 4, Iters: 30},
		{Dim: 2, NX: 6, NY: 4, PX: 3, PY: 4, Iters: 7}, // blocks of one row, of two columns
		{Dim: 2, NX: 3, NY: 3, PX: 3, PY: 3, Iters: 5}, // one cell per task
	} {
		want := Sequential(p)
		for run := range 2 {
			res, err := Run(context.Background(), p)
			if err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
			if !slices.Equal(res.Cells, want) {
				t.Fatalf("%+v, run %d: result differs from the sequential sweep", p, run)
			}
			if res.Seconds < 0 || res.Timed != p.Iters-Warmup(p.Iters) || res.PerIteration() < 0 {
				t.Fatalf("%+v: %v seconds over %d timed iterations", p, res.Seconds, res.Timed)
			}
		}
	}
}

// TestSequentialIsTheFormula checks the reference against the stencil written out cell by
// cell on a small plane.
func TestSequentialIsTheFormula(t *testing.T) {
	const nx, ny, iters = 5, 4, 3
	cell := func(g [][]float64, x, y int) float64 {
		switch {
		case x < 0:
			return WestBoundary
		case x >= nx:
			return EastBoundary
		case y < 0:
			return NorthBoundary
		case y >= ny:
			return SouthBoundary
		}
		return g[y][x]
	}
	g := make([][]float64, ny)
	for y := range g {
		g[y] = make([]float64, nx)
		for x := range g[y] {
			g[y][x] = Initial(x, y)
		}
	}
	for range iters {
		next := make([][]float64, ny)
		for y := range next {
			next[y] = make([]float64, nx)
			for x := range next[y] {
				next[y][x] = (cell(g, x, y-1) + cell(g, x-1, y) + cell(g, x, y) + cell(g, x+1, y) + cell(g, x, y+1)) / 5
			}
		}
		g = next
	}
	if got, want := Sequential(Params{Dim: 2, NX: nx, NY: ny, PX: 1, PY: 1, Iters: iters}), slices.Concat(g...); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{
		{Dim: 3, NX: 4, NY: 1, PX: 1, PY: 1},
		{Dim: 1, NX: 4, NY: 2, PX: 1, PY: 1},
		{Dim: 1, NX: 4, NY: 1, PX: 5, PY: 1},
		{Dim: 2, NX: 4, NY: 4, PX: 2, PY: 5},
		{Dim: 2, NX: 4, NY: 4, PX: 0, PY: 1},
		{Dim: 1, NX: 4, NY: 1, PX: 1, PY: 1, Iters: -1},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v: valid", p)
		}
		if _, err := Run(context.Background(), p); err == nil {
			t.Errorf("%+v: Run succeeded", p)
		}
	}
}

func ExampleRun() {
	res, err := Run(context.Background(), Params{Dim: 1, NX: 6, NY: 1, PX: 3, PY: 1, Iters: 2})
	fmt.Printf("%.4f %v\n", res.Cells, err)
	// Output: [0.5556 0.3889 0.5000 0.6111 0.4444 -0.1389] <nil>
}

// A plane of 4 × 2 cells over a 2 × 2 grid of tasks: every task exchanges halos both ways.
func ExampleRun_plane() {
	p := Params{Dim: 2, NX: 4, NY: 2, PX: 2, PY: 2, Iters: 3}
	res, err := Run(context.Background(), p)
	fmt.Printf("%.4f %v %v\n", res.Cells, err, Checksum(res.Cells) == Checksum(Sequential(p)))
	// Output: [0.5700 0.4220 0.3220 -0.0460 0.3160 0.1380 0.0180 -0.2900] <nil> true
}

// BenchmarkSweep times the inner loops, per cell: compare with the C loop of the bench
// harness (go run ./lab/bench stencil -loops).
func BenchmarkSweep(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"line/1k", Params{Dim: 1, NX: 1000, NY: 1, PX: 1, PY: 1}},
		{"line/10k", Params{Dim: 1, NX: 10000, NY: 1, PX: 1, PY: 1}},
		{"line/1M", Params{Dim: 1, NX: 1 << 20, NY: 1, PX: 1, PY: 1}},
		{"plane/32x32", Params{Dim: 2, NX: 32, NY: 32, PX: 1, PY: 1}},
		{"plane/100x100", Params{Dim: 2, NX: 100, NY: 100, PX: 1, PY: 1}},
		{"plane/1024x1024", Params{Dim: 2, NX: 1024, NY: 1024, PX: 1, PY: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			blk := c.p.block(0)
			u, v := blk.alloc(func(dir) bool { return false })
			for b.Loop() {
				blk.interior(u, v)
				blk.border(u, v)
				u, v = v, u
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(blk.cells()), "ns/cell")
		})
	}
}
