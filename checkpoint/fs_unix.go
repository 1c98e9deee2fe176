//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// syncDir makes the entries of directory dir (names created, renamed, removed) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// lockFile takes an exclusive lock on f without waiting; false when another open file
// holds it. The kernel drops the lock when the process dies.
func lockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// isNoSpace reports whether err says that the file system is full (or the user's quota).
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// openFlags are added to the flags of every open of a file of a checkpoint's directory: a
// symbolic link is not followed, and a named pipe or a device does not block the open.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// links returns the number of names (hard links) of the file fi describes.
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
