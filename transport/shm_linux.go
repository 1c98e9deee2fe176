package transport

import (
	"encoding/hex"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// newSegment makes a segment in a memfd and returns it mapped, with the offer that names it
// (this process, the descriptor, the token) and a function to call once the acceptor has
// answered; nil when it cannot.
func newSegment() (seg, offer []byte, done func()) {
	fd, err := unix.MemfdCreate("orwl-shm", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, nil
	}
	if err = unix.Ftruncate(fd, int64(segmentSize)); err == nil {
		seg, err = unix.Mmap(fd, 0, segmentSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		unix.Close(fd)
		return nil, nil, nil
	}
	token := newToken()
	copy(seg, token)
	offer = encodeStrings([]string{strconv.Itoa(os.Getpid()), strconv.Itoa(fd), hex.EncodeToString(token)})
	return seg, offer, func() { unix.Close(fd) }
}

// openSegment maps the segment an offer names, or returns nil when it is not this process's
// to map: another host, another user, another network namespace (an emulated host), a
// hardened /proc, or a wrong token.
func openSegment(offer []byte) []byte {
	strs, err := decodeStrings(offer, 3)
	if err != nil {
		return nil
	}
	token, err := hex.DecodeString(strs[2])
	if err != nil || len(token) != tokenSize || !sameNetwork(strs[0]) {
		return nil
	}
	f, err := os.OpenFile("/proc/"+strs[0]+"/fd/"+strs[1], os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	seg, err := unix.Mmap(int(f.Fd()), 0, segmentSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	if string(seg[:tokenSize]) != string(token) {
		unix.Munmap(seg)
		return nil
	}
	return seg
}

// sameNetwork reports whether process pid is in this process's network namespace.
func sameNetwork(pid string) bool {
	var mine, theirs syscall.Stat_t
	return syscall.Stat("/proc/self/ns/net", &mine) == nil && syscall.Stat("/proc/"+pid+"/ns/net", &theirs) == nil &&
		mine.Ino == theirs.Ino && mine.Dev == theirs.Dev
}

// unmap unmaps a segment (nil does nothing).
func unmap(seg []byte) {
	if seg != nil {
		unix.Munmap(seg)
	}
}

// yieldCore lets the other threads of the host run first: what a task that polls a crowded
// host does between two looks, after it let the other goroutines of its process run.
//
// The system call is raw: the runtime does not count the thread as in a system call, since
// on a crowded host the kernel may well run other threads for longer than the runtime waits
// before it hands a thread's processor to another thread (starting one when none is idle):
// with a plain call, a job of N processes had about 2N threads in each.
func yieldCore() {
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
