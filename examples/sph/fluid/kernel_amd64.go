//go:build !purego

package fluid

import "golang.org/x/sys/cpu"

// avx2 says whether the vector kernels of kernel_amd64.s can run: they use AVX2 (four
// doubles per instruction) and POPCNT. They do the same IEEE operations in the same order
// as the scalar kernels of kernel.go, four particles or neighbours at a time, and add the
// lanes of a sum one after another in index order, so the bits are the same.
var avx2 = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT

// filterVec does filter with filterAVX2, and says so, where the machine can.
func filterVec(dst []int32, r2 []float64, spans []span, x, y, z []float64, xi, yi, zi, H2 float64) (int, bool) {
	if !avx2 {
		return 0, false
	}
	room := filterSlack
	for _, s := range spans { // the kernel reads the spans unchecked
		_, _, _ = x[s.lo:s.hi], y[s.lo:s.hi], z[s.lo:s.hi]
		room += int(s.hi - s.lo)
	}
	if room == filterSlack {
		return 0, true
	}
	_, _ = dst[room-1], r2[room-1]
	return filterAVX2(&dst[0], &r2[0], &spans[0], len(spans), &x[0], &y[0], &z[0], xi, yi, zi, H2), true
}

// kernelSumVec does kernelSumScalar(acc, r2, f, k) for a prefix of r2 in groups of four:
// it returns the sum and the length of the prefix. f is as long as r2.
func kernelSumVec(acc float64, r2, f []float64, k *consts) (float64, int) {
	done := len(r2) &^ 3
	if !avx2 || done == 0 {
		return acc, 0
	}
	return kernelSumAVX2(&r2[0], &f[0], done, acc, k.hinv, k.sigma, k.sig4, k.c1, k.c2), done
}

// forceSumVec does forceSumScalar(s, *bi, bodies, nb, fs, k) for a prefix of nb in groups of
// four, and returns its length. fs is as long as nb, and every index of nb is in bodies.
func forceSumVec(s *[3]float64, bi *body, bodies []body, nb []int32, fs []float64, k *consts) int {
	done := len(nb) &^ 3
	if !avx2 || done == 0 {
		return 0
	}
	forceSumAVX2(s, bi, &bodies[0], &nb[0], &fs[0], done, k.h, k.epsh2, k.m)
	return done
}

// filterAVX2 is filterScalar over the ns spans at spans, four candidates at a time (the
// last ones of a span masked): it stores four indexes and four r² each time, those of the
// neighbours first, so dst and r2 need filterSlack more room than the candidates.
//
//go:noescape
func filterAVX2(dst *int32, r2 *float64, spans *span, ns int, x, y, z *float64, xi, yi, zi, H2 float64) int

// kernelSumAVX2 is kernelSumScalar over the first n (a multiple of 4) squared distances.
//
//go:noescape
func kernelSumAVX2(r2, f *float64, n int, acc, hinv, sigma, sig4, c1, c2 float64) float64

// forceSumAVX2 is forceSumScalar over the first n (a multiple of 4) neighbours.
//
//go:noescape
func forceSumAVX2(s *[3]float64, bi, bodies *body, nb *int32, fs *float64, n int, h, epsh2, m float64)
