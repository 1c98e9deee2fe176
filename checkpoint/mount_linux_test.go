package checkpoint

import (
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs with options (read-only if asked) on a new directory, unmounted
// at the test's end (after the cleanups registered later); the test skips where mounting is
// not permitted.
func mountTmpfs(t *testing.T, readOnly bool, options string) string {
	t.Helper()
	dir := t.TempDir()
	var flags uintptr
	if readOnly {
		flags = syscall.MS_RDONLY
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, options); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): needs root", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
