package fluid

import (
	"fmt"
	"testing"
)

// TestSequentialIsTheExactBuild: the reference reproduces the problem's validation run
// (N = 20000, 20 steps, seed 1) of the C build without fused multiply-adds, bit for bit.
// Under the race detector it would take ten times longer: it skips, and examples/sph's
// TestExactBuild checks the same values with the command built without it.
func TestSequentialIsTheExactBuild(t *testing.T) {
	if raceEnabled {
		t.Skip("20000 particles for 20 steps take tens of seconds under the race detector: examples/sph's TestExactBuild checks them")
	}
	s, interactions, _, err := Sequential(Params{N: 20000, Steps: 20, Seed: 1, Tasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("kinetic=%.17g checksum=%016x interactions=%d", s.Kinetic(), s.Checksum(), interactions)
	if want := "kinetic=0.054524002614179487 checksum=7b4e5c70b7cba47c interactions=45525300"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestInitial checks the start against the problem's definition: a quarter of the
// particles in the dense octant, the others outside it, all at rest, and the first draws
// of splitmix64 from seed 1.
func TestInitial(t *testing.T) {
	const n = 1001
	s := Initial(n, 1)
	for id := range n {
		inside := s.X[id] < 0.5 && s.Y[id] < 0.5 && s.Z[id] < 0.5
		if inside != (id < n/4) || s.VX[id] != 0 || s.VY[id] != 0 || s.VZ[id] != 0 {
			t.Fatalf("particle %d at (%v, %v, %v), velocity (%v, %v, %v)", id, s.X[id], s.Y[id], s.Z[id], s.VX[id], s.VY[id], s.VZ[id])
		}
	}
	r := splitmix{1}
	// splitmix64(1)'s first output is 0x910a2dec89025cc1.
	if got, want := r.next(), float64(uint64(0x910a2dec89025cc1)>>11)*0x1p-53; got != want {
		t.Fatalf("first draw %v, want %v", got, want)
	}
}

func TestConsts(t *testing.T) {
	for _, c := range []struct{ n, nc int }{{1, 1}, {7, 1}, {8, 1}, {2000, 5}, {20000, 11}, {100000, 19}} {
		if k := newConsts(c.n); k.nc != c.nc || k.band != k.nc*k.nc+k.nc+1 || k.cells != c.nc*c.nc*c.nc {
			t.Errorf("N=%d: nc %d, want %d", c.n, k.nc, c.nc)
		}
	}
}

// BenchmarkSequential times the kernels on one core, in interactions per second: compare
// with the C reference's (go run ./lab/bench sph).
func BenchmarkSequential(b *testing.B) {
	p := Params{N: 20000, Steps: 5, Seed: 1, Tasks: 1}
	var interactions int64
	for b.Loop() {
		_, n, _, err := Sequential(p)
		if err != nil {
			b.Fatal(err)
		}
		interactions += n
	}
	b.ReportMetric(float64(interactions)/b.Elapsed().Seconds(), "interactions/s")
}
