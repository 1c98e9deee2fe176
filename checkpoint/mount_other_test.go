//go:build !linux

package checkpoint

import "testing"

// mountTmpfs skips the test: mounting a tmpfs is Linux's.
func mountTmpfs(t *testing.T, readOnly bool, options string) string {
	t.Helper()
	t.Skip("mounting a tmpfs needs Linux")
	return ""
}
