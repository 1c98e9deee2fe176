//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// memory returns the most bytes this process can hold: the host's memory (MemTotal of
// /proc/meminfo), or the limit of its control group (cgroup v2 memory.max, v1
// memory.limit_in_bytes) when lower; 0 when it cannot tell (no /proc).
func memory() int64 {
	var limit int64
	lower := func(n int64) {
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if kb, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
				lower(n << 10)
			}
		}
	}
	b, _ := os.ReadFile("/proc/self/cgroup") // lines "0::/path" (v2), "4:memory:/path" (v1)
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		switch {
		case len(f) < 3:
		case f[0] == "0" && f[1] == "":
			lower(readInt(filepath.Join("/sys/fs/cgroup", f[2], "memory.max"))) // "max": none
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			lower(readInt(filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.limit_in_bytes")))
		}
	}
	return limit
}

// readInt returns the decimal number file path holds, or 0.
func readInt(path string) int64 {
	b, _ := os.ReadFile(path)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}
