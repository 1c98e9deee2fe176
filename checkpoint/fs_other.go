//go:build !unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// syncDir does nothing where directories cannot be synced.
func syncDir(string) error { return nil }

// lockFile does not lock where flock is missing: one process per directory is then the
// caller's duty.
func lockFile(*os.File) (bool, error) { return true, nil }

// isNoSpace reports whether err says that the file system is full.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
