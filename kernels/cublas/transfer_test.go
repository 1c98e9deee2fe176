package cublas

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// Transfer benchmarks: they show what bounds host-to-host Dgemm on Go
// slices (staging copies, pinning cost) against pinned memory.

const benchElems = 8192 * 8192 // 512 MiB

func benchKernel(b *testing.B) *Kernel {
	if err := Load(); err != nil {
		b.Skipf("cublas unavailable: %v", err)
	}
	g, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// BenchmarkPack measures the parallel host copy into pinned staging memory.
func BenchmarkPack(b *testing.B) {
	benchKernel(b)
	src := make([]float64, benchElems)
	clear(src)
	dst, err := AllocHost(benchElems)
	if err != nil {
		b.Fatal(err)
	}
	defer FreeHost(dst)
	b.SetBytes(benchElems * 8)
	for b.Loop() {
		packRows(dst, hostMat{src, 8192, 8192, 8192})
	}
}

// BenchmarkRegister measures pinning and unpinning a Go slice.
func BenchmarkRegister(b *testing.B) {
	benchKernel(b)
	s := make([]float64, benchElems)
	clear(s)
	b.SetBytes(benchElems * 8)
	for b.Loop() {
		if err := RegisterHost(s); err != nil {
			b.Fatal(err)
		}
		if err := UnregisterHost(s); err != nil {
			b.Fatal(err)
		}
	}
}

func benchUpload(b *testing.B, src []float64) {
	g := benchKernel(b)
	m, err := g.NewMatrix(8192, 8192)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchElems * 8)
	for b.Loop() {
		if err := m.Upload(src, 8192); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUploadPageable uploads a Go slice (staged).
func BenchmarkUploadPageable(b *testing.B) {
	s := make([]float64, benchElems)
	clear(s)
	benchUpload(b, s)
}

// BenchmarkUploadPinned uploads AllocHost memory (direct DMA).
func BenchmarkUploadPinned(b *testing.B) {
	benchKernel(b)
	s, err := AllocHost(benchElems)
	if err != nil {
		b.Fatal(err)
	}
	defer FreeHost(s)
	benchUpload(b, s)
}

// BenchmarkDgemm8192 runs host-slice Dgemm at N=8192 on Go slices and on
// pinned slices, with B uploaded whole before the products or in blocks
// overlapping the products of the first panel.
func BenchmarkDgemm8192(b *testing.B) {
	g := benchKernel(b)
	const n = 8192
	for _, pinned := range []bool{false, true} {
		var s [3][]float64
		for i := range s {
			if pinned {
				var err error
				if s[i], err = AllocHost(n * n); err != nil {
					b.Fatal(err)
				}
				defer FreeHost(s[i])
			} else {
				s[i] = make([]float64, n*n)
			}
			for j := range s[i] {
				s[i][j] = float64(j%13) - 6
			}
		}
		for _, blocks := range []int{1, maxPanels} {
			name := fmt.Sprintf("pinned=%v/blocks=%d", pinned, blocks)
			b.Run(name, func(b *testing.B) {
				defer func(old int) { maxBlocks = old }(maxBlocks)
				maxBlocks = blocks
				for b.Loop() {
					g.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, s[0], n, s[1], n, 0, s[2], n)
				}
				b.ReportMetric(2*n*n*n/1e9*float64(b.N)/b.Elapsed().Seconds(), "GFLOP/s")
			})
		}
	}
}
