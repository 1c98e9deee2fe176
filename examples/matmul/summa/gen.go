package summa

// Streams of generated values: A, B and the Freivalds vector x are independent.
const (
	streamA uint64 = 1
	streamB uint64 = 2
	streamX uint64 = 3
)

// mix is a 64-bit finaliser (splitmix64's output function): consecutive inputs give
// unrelated outputs.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Element returns entry (i, j) of the n x n matrix of stream under seed, uniform in
// [-1, 1). Every task computes the entries it owns, so nothing is sent to set up A and B.
func Element(seed, stream uint64, n, i, j int) float64 {
	key := mix(seed^stream<<56) + uint64(i)*uint64(n) + uint64(j)
	return float64(mix(key)>>11)*(2.0/(1<<53)) - 1
}

// MatrixA returns entry (i, j) of A for the job's seed and size.
func MatrixA(seed uint64, n, i, j int) float64 { return Element(seed, streamA, n, i, j) }

// MatrixB returns entry (i, j) of B for the job's seed and size.
func MatrixB(seed uint64, n, i, j int) float64 { return Element(seed, streamB, n, i, j) }

// vectorX returns entry j of the Freivalds test vector.
func vectorX(seed uint64, j int) float64 { return Element(seed, streamX, 1, 0, j) }
