package orwl

// SetPieceFault makes the write of every checkpoint piece's file call fault with the
// piece's checkpoint and task first, and fail with the error it returns, for a test that is
// not run in parallel with others; it returns what sets it back.
func SetPieceFault(fault func(k, task int) error) (restore func()) {
	chunkHook = func(p pieceJob, _ []byte) error { return fault(p.k, p.key.Task) }
	return func() { chunkHook = nil }
}
