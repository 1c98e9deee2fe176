package orwl

// SetRestartChunk sets the most bytes of a piece one message carries at a restart, for a
// test that is not run in parallel with others; it returns what sets it back.
func SetRestartChunk(n int) (restore func()) {
	old := restartChunk
	restartChunk = n
	return func() { restartChunk = old }
}
