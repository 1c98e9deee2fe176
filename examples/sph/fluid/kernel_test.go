package fluid

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector kernels (kernel_amd64.s, where the machine has AVX2) must give the bits of the
// scalar loops of kernel.go: filter, kernelSum and the force sum against the scalar loops
// alone, on random particles and on the edge cases, for every length from 0 to 40 (the
// vector kernels take groups of four).

// TestFilterIsScalar: the same neighbours, indexes and r², for spans of every length
// from 0 to 40 (and up to ten of them, the last ones ending at the end of the arrays), with
// candidates at exactly the support (d == H2: not a neighbour) and at d = 0.
func TestFilterIsScalar(t *testing.T) {
	k := newConsts(100000)
	rng := rand.New(rand.NewPCG(1, 2))
	// xi ± 2h is exact: d == H2 there; and a lane loaded as zeros would be a neighbour.
	xi, yi, zi := 0.0, 0.0, 0.0
	const particles = 200
	x, y, z := make([]float64, particles), make([]float64, particles), make([]float64, particles)
	for trial := range 400 {
		for j := range particles {
			// Within 1.5 supports in each coordinate: about half are neighbours.
			x[j] = xi + (rng.Float64()-0.5)*3*math.Sqrt(k.H2)
			y[j] = yi + (rng.Float64()-0.5)*3*math.Sqrt(k.H2)
			z[j] = zi + (rng.Float64()-0.5)*3*math.Sqrt(k.H2)
			switch rng.IntN(8) {
			case 0:
				x[j], y[j], z[j] = xi+float64(1-2*rng.IntN(2))*2*k.h, yi, zi
				if d := (x[j] - xi) * (x[j] - xi); d != k.H2 {
					t.Fatalf("the edge case is not d == H2: %v, %v", d, k.H2)
				}
			case 1:
				x[j], y[j], z[j] = xi, yi, zi
			}
		}
		spans := make([]span, 1+trial%10)
		for i := range spans {
			n := trial % 41 // every length, then random ones
			if i > 0 {
				n = rng.IntN(20)
			}
			lo := rng.IntN(particles - n + 1)
			if i >= len(spans)-2 {
				lo = particles - n
			}
			spans[i] = span{int32(lo), int32(lo + n)}
		}
		room := filterSlack
		for _, s := range spans {
			room += int(s.hi - s.lo)
		}
		dst, r2 := make([]int32, room), make([]float64, room)
		wantDst, wantR2 := make([]int32, room), make([]float64, room)
		got := filter(dst, r2, spans, x, y, z, xi, yi, zi, k.H2)
		want := filterScalar(wantDst, wantR2, spans, x, y, z, xi, yi, zi, k.H2)
		if got != want {
			t.Fatalf("spans %v: %d neighbours, scalar %d", spans, got, want)
		}
		for j := range want {
			if dst[j] != wantDst[j] || math.Float64bits(r2[j]) != math.Float64bits(wantR2[j]) {
				t.Fatalf("spans %v: neighbour %d is %d at r² %v, scalar %d at %v", spans, j, dst[j], r2[j], wantDst[j], wantR2[j])
			}
		}
	}
}

// TestKernelSumIsScalar: the same sum and F(r), with distances at exactly q = 1, on
// either side of it, and 0.
func TestKernelSumIsScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, particles := range []int{1000, 20000, 100000, 1000000} {
		k := newConsts(particles)
		// one: a squared distance whose q is exactly 1.
		one := k.h * k.h
		for math.Sqrt(one)*k.hinv < 1.0 {
			one = math.Nextafter(one, math.Inf(1))
		}
		for math.Sqrt(one)*k.hinv > 1.0 {
			one = math.Nextafter(one, 0)
		}
		if math.Sqrt(one)*k.hinv != 1.0 {
			t.Fatalf("N=%d: no squared distance has q = 1 near %v", particles, one)
		}
		for n := range 41 {
			for range 20 {
				r2 := make([]float64, n)
				for i := range r2 {
					switch rng.IntN(8) {
					case 0:
						r2[i] = one
					case 1:
						r2[i] = math.Nextafter(one, 0)
					case 2:
						r2[i] = math.Nextafter(one, 1)
					case 3:
						r2[i] = 0
					default:
						r2[i] = rng.Float64() * k.H2
					}
				}
				f, wantF := make([]float64, n), make([]float64, n)
				got, want := kernelSum(r2, f, k), kernelSumScalar(k.sigma, r2, wantF, k)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("N=%d, r² %v: sum %v, scalar %v", particles, r2, got, want)
				}
				for i := range f {
					if math.Float64bits(f[i]) != math.Float64bits(wantF[i]) {
						t.Fatalf("N=%d, r² %v: F %v, scalar %v", particles, r2[i], f[i], wantF[i])
					}
				}
			}
		}
	}
}

// TestForceSumIsScalar: the same sums, with neighbours approaching and receding (the
// viscosity kept or not), at rest relative to i (v·r = 0), and repeated.
func TestForceSumIsScalar(t *testing.T) {
	k := newConsts(100000)
	rng := rand.New(rand.NewPCG(5, 6))
	bodies := make([]body, 64)
	for j := range bodies {
		bodies[j] = body{x: rng.Float64(), y: rng.Float64(), z: rng.Float64(),
			vx: rng.NormFloat64(), vy: rng.NormFloat64(), vz: rng.NormFloat64(),
			rho: 0.5 + rng.Float64(), pt: 0.5 + rng.Float64()}
	}
	bodies[1].vx, bodies[1].vy, bodies[1].vz = bodies[0].vx, bodies[0].vy, bodies[0].vz
	for n := range 41 {
		for range 20 {
			nb, fs := make([]int32, n), make([]float64, n)
			for j := range nb {
				nb[j] = int32(1 + rng.IntN(len(bodies)-1))
				fs[j] = -rng.Float64() * k.c1
			}
			bi := &bodies[0]
			start := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			got, want := start, start
			done := forceSumVec(&got, bi, bodies, nb, fs, k)
			forceSumScalar(&got, *bi, bodies, nb[done:], fs[done:], k)
			forceSumScalar(&want, *bi, bodies, nb, fs, k)
			for c := range got {
				if math.Float64bits(got[c]) != math.Float64bits(want[c]) {
					t.Fatalf("neighbours %v: sums %v, scalar %v", nb, got, want)
				}
			}
		}
	}
}
