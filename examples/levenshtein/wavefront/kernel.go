package wavefront

// The inner loop. D is the matrix of partial distances: D[i][j] is the edit distance of the
// first i characters of A and the first j of B, so D[0][j] = j, D[i][0] = i and
//
//	D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1, D[i-1][j-1] + (A[i-1] != B[j-1]))
//
// A row of D is computed left to right in place over the previous one (row), keeping
// D[i-1][j-1] (diag) and D[i][j-1] (left) in registers. Only left carries from one cell to
// the next, so the two terms that do not need it are taken first: the chain from cell to
// cell is one add, one compare and one conditional move. The compiler removes the bounds
// checks (row is resliced to len(b)) and turns every min and the mismatch test into
// branch-free instructions.

// ne is 1 when x != y, else 0, without a branch (SETNE).
func ne(x, y byte) uint32 {
	var d uint32
	if x != y {
		d = 1
	}
	return d
}

// oneRow turns row, D[i-1][c+1..c+len(b)] for the columns of b, into D[i][...] for the
// character a = A[i-1]; diag is D[i-1][c] and left D[i][c]. It returns D[i][c+len(b)]
// (left when b is empty).
func oneRow(a byte, b []byte, row []uint32, diag, left uint32) uint32 {
	row = row[:len(b)]
	for j, bj := range b {
		up := row[j]
		t := min(diag+ne(a, bj), up+1)
		left = min(t, left+1)
		row[j] = left
		diag = up
	}
	return left
}

// twoRows computes two rows at once, for a0 = A[i-1] then a1 = A[i], turning row from
// D[i-1][...] into D[i+1][...]: every character of b and every value of row is loaded and
// stored once for both, and the two chains of left values overlap. diag is D[i-1][c],
// left0 D[i][c] and left1 D[i+1][c]; it returns D[i][c+len(b)] and D[i+1][c+len(b)].
func twoRows(a0, a1 byte, b []byte, row []uint32, diag, left0, left1 uint32) (uint32, uint32) {
	row = row[:len(b)]
	diag1 := left0
	for j, bj := range b {
		up := row[j]
		t0 := min(diag+ne(a0, bj), up+1)
		left0 = min(t0, left0+1)
		t1 := min(diag1+ne(a1, bj), left0+1)
		left1 = min(t1, left1+1)
		row[j] = left1
		diag, diag1 = up, left0
	}
	return left0, left1
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
	i := 0
	for ; i+1 < len(a); i += 2 {
		out[i+1], out[i+2] = twoRows(a[i], a[i+1], b, row, in[i], in[i+1], in[i+2])
	}
	if i < len(a) {
		out[i+1] = oneRow(a[i], b, row, in[i], in[i+1])
	}
}
