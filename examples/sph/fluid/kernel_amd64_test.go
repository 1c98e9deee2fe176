//go:build !purego

package fluid

import "testing"

// TestSequentialWithoutAVX2: the scalar kernels alone (as on a machine without AVX2, or
// another architecture) end a run with the bits of the vector kernels.
func TestSequentialWithoutAVX2(t *testing.T) {
	if !avx2 {
		t.Skip("this machine has no AVX2: the scalar kernels are the only ones")
	}
	p := Params{N: 5000, Steps: 5, Seed: 1, Tasks: 1}
	vec, vecInteractions, _, err := Sequential(p)
	if err != nil {
		t.Fatal(err)
	}
	avx2 = false
	defer func() { avx2 = true }()
	scalar, scalarInteractions, _, err := Sequential(p)
	if err != nil {
		t.Fatal(err)
	}
	if vec.Checksum() != scalar.Checksum() || vecInteractions != scalarInteractions {
		t.Fatalf("AVX2: checksum %016x, %d interactions; scalar: %016x, %d", vec.Checksum(), vecInteractions, scalar.Checksum(), scalarInteractions)
	}
}
