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

// openFlags are added to the flags of every open of a file of a checkpoint's directory:
// none where O_NOFOLLOW is missing (openFile checks the file's kind before opening it).
const openFlags = 0

// links returns 1: the number of names of a file is not known here.
func links(os.FileInfo) uint64 { return 1 }

// memory returns 0: how much this process can hold is not known here.
func memory() int64 { return 0 }
