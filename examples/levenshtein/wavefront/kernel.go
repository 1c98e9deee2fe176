package wavefront

// The inner loop. D is the matrix of partial distances: D[i][j] is the edit distance of the
// first i characters of A and the first j of B, so D[0][j] = j, D[i][0] = i and
//
//	D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1, D[i-1][j-1] + (A[i-1] != B[j-1]))
//
// Every cell is computed by that recurrence, in registers, after a change of variable:
// H[i][j] = D[i][j] - i - j (plus a constant per pass over the row, which cancels out)
// turns it into
//
//	H[i][j] = min(H[i-1][j], H[i][j-1], H[i-1][j-1] + cost[A[i-1]][B[j-1]])
//
// with cost -2 on a match and -1 otherwise: the two +1 of the textbook vanish, and the
// character test becomes one load from a table of 256 costs per row, indexed by B's
// character. H is held in an int, of 64 bits wherever MaxLen compiles, so that neither
// D - j nor the offsets can overflow. A pass computes three rows over the row array (D of the row above on entry,
// of the last row on return, uint32 as the edges), so that each character of B and each
// value of the array is loaded, converted and stored once for three cells; the chain from
// one column to the next is one compare and one conditional move per row, into the
// register that holds the row's H (min's first operand), with no move. The compiler
// removes the bounds checks (the row is resliced to len(b), the tables are indexed by a
// byte) and turns every min into branch-free instructions.

// Costs of the diagonal term of H: a table of costs holds mismatch for every character but
// the row's own, which holds match.
const (
	match    = -2
	mismatch = -1
)

// costs is the cost table of one row for every character of B.
type costs = [256]int

// oneRow turns row, D[i-1][c+1..c+len(b)] for the columns of b, into D[i][...] for the row
// whose table is m. diag is D[i-1][c] + 1 and left D[i][c] (H of the column left of b, its
// index taken as -1). It returns D[i][c+len(b)] - len(b) (left when b is empty).
func oneRow(m *costs, b []byte, row []uint32, diag, left int) int {
	row = row[:len(b)]
	for j, bj := range b {
		up := int(row[j]) - j
		left = min(left, min(diag+m[bj], up))
		diag = up
		row[j] = uint32(left + j + 1)
	}
	return left
}

// threeRows does three rows at once, for the tables m[0], m[1], m[2] of A[i-1], A[i] and
// A[i+1], turning row from D[i-1][...] into D[i+2][...]. On entry diag is D[i-1][c] + 1 and
// h0, h1, h2 are D[i][c], D[i+1][c] - 1 and D[i+2][c] - 2; it returns D[i+k][c+len(b)] -
// len(b) - k for k = 0, 1, 2. Row k's H in column j is D - j - (k+1), that of the row above
// D - j: the same offset from i + j for all of them.
func threeRows(m *[3]costs, b []byte, row []uint32, diag, h0, h1, h2 int) (int, int, int) {
	row = row[:len(b)]
	_ = m[0] // m's nil check, here rather than in every column
	for j, bj := range b {
		up := int(row[j]) - j
		t0, t1, t2 := diag+m[0][bj], h0+m[1][bj], h1+m[2][bj]
		diag = up
		h0 = min(h0, min(t0, up))
		h1 = min(h1, min(t1, h0))
		h2 = min(h2, min(t2, h1))
		row[j] = uint32(h2 + j + 3)
	}
	return h0, h1, h2
}

// tile computes the rows of the characters a over the columns of b: row holds the row of D
// above them on entry and their last row on return. in holds D[i0..i0+len(a)][c], the
// column left of b from the row above a (in[0], the corner) down; out, of the same length,
// receives D[i0..i0+len(a)][c+len(b)], the column at b's right end (in when b is empty).
func tile(a, b []byte, row, in, out []uint32) {
	in, out = in[:len(a)+1], out[:len(a)+1]
	out[0] = in[0]
	if len(b) > 0 {
		out[0] = row[len(b)-1]
	}
	var m [3]costs
	for k := range m {
		for c := range m[k] {
			m[k][c] = mismatch
		}
	}
	w := len(b)
	i := 0
	for ; i+2 < len(a); i += 3 {
		m[0][a[i]], m[1][a[i+1]], m[2][a[i+2]] = match, match, match
		h0, h1, h2 := threeRows(&m, b, row, int(in[i])+1, int(in[i+1]), int(in[i+2])-1, int(in[i+3])-2)
		out[i+1], out[i+2], out[i+3] = uint32(h0+w), uint32(h1+w+1), uint32(h2+w+2)
		m[0][a[i]], m[1][a[i+1]], m[2][a[i+2]] = mismatch, mismatch, mismatch
	}
	for ; i < len(a); i++ {
		m[0][a[i]] = match
		out[i+1] = uint32(oneRow(&m[0], b, row, int(in[i])+1, int(in[i+1])) + w)
		m[0][a[i]] = mismatch
	}
}
