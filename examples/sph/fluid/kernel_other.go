//go:build !amd64 || purego

package fluid

// Without the vector kernels (another architecture, or the purego build tag), the scalar
// ones do all the work: filterVec declines, the others do a prefix of none.

func filterVec(dst []int32, r2 []float64, spans []span, x, y, z []float64, xi, yi, zi, H2 float64) (int, bool) {
	return 0, false
}

func kernelSumVec(acc float64, r2, f []float64, k *consts) (float64, int) { return acc, 0 }

func forceSumVec(s *[3]float64, bi *body, bodies []body, nb []int32, fs []float64, k *consts) int {
	return 0
}
