package orwl

// SetPartSize sets the most bytes of a piece one message carries (at a restart, and in a
// partner copy), for a test that is not run in parallel with others; it returns what sets it
// back.
func SetPartSize(n int) (restore func()) {
	old := partSize
	partSize = n
	return func() { partSize = old }
}
