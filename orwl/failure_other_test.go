//go:build !linux

package orwl_test

import "testing"

// awaitExit skips the test: waiting for a process's end without reaping it (waitid's
// WNOWAIT) is Linux's here.
func (p *ringProcs) awaitExit(t *testing.T, rank int) {
	t.Helper()
	t.Skip("waitid with WNOWAIT needs Linux")
}
