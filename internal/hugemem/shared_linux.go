package hugemem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// selfPID is this process's id, which names its shared buffers to other processes.
var selfPID = os.Getpid()

// mapShared maps n bytes, rounded up to whole huge pages, from a range of this process's
// file of shared memory that no buffer used before, at an address aligned to a huge page,
// with the advice (see mapHuge). It returns the address, the mapped length and the range's
// offset in the file, or nil when the system refuses the file or the mapping.
func mapShared(n uintptr, advice string) (unsafe.Pointer, uintptr, int64) {
	f := &sharedFile
	f.Lock()
	defer f.Unlock()
	if !f.made {
		f.made = true
		fd, err := unix.MemfdCreate("orwl-data", unix.MFD_CLOEXEC)
		if err != nil {
			fd = -1
		}
		f.fd = fd
	}
	if f.fd < 0 {
		return nil, 0, 0
	}
	length := (n + hugePage - 1) &^ (hugePage - 1)
	off := f.end
	if unix.Ftruncate(f.fd, off+int64(length)) != nil {
		return nil, 0, 0
	}
	aligned := reserveAligned(length)
	if aligned == nil {
		return nil, 0, 0
	}
	if _, err := unix.MmapPtr(f.fd, off, aligned, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		unix.MunmapPtr(aligned, length)
		return nil, 0, 0
	}
	f.end = off + int64(length)
	adviseHuge(aligned, length, advice)
	return aligned, length, off
}

// remapShared maps the range at off of this process's file of shared memory at p, in place
// of what p mapped (length bytes), with ORWL_HUGEPAGES's advice, and reports whether the
// system did.
func remapShared(p unsafe.Pointer, length uintptr, off int64) bool {
	if _, err := unix.MmapPtr(sharedFile.fd, off, p, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		return false
	}
	adviseHuge(p, length, advice())
	return true
}

// punch frees the memory of the range of length bytes at off of this process's file of
// shared memory, whose buffer was unmapped or retired: the range reads zero afterwards.
func punch(off int64, length uintptr) {
	unix.Fallocate(sharedFile.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, int64(length))
}

// mapView maps the buffer s names, read-only unless writable, and returns its address and
// mapped length. The file is open only while it maps: the mapping keeps what it shows.
func mapView(s Share, writable bool) (unsafe.Pointer, uintptr, error) {
	proc := "/proc/" + strconv.Itoa(int(s.PID))
	flag, prot := os.O_RDONLY, unix.PROT_READ
	if writable {
		flag, prot = os.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	f, err := os.OpenFile(proc+"/fd/"+strconv.Itoa(int(s.FD)), flag, 0)
	if err != nil {
		if _, gone := os.Stat(proc); errors.Is(gone, fs.ErrNotExist) {
			return nil, 0, fmt.Errorf("%w (process %d)", ErrGone, s.PID)
		}
		return nil, 0, fmt.Errorf("hugemem: opening process %d's shared memory: %w", s.PID, err)
	}
	defer f.Close()
	page := uintptr(unix.Getpagesize())
	length := (uintptr(s.Len) + page - 1) &^ (page - 1)
	p, err := unix.MmapPtr(int(f.Fd()), s.Off, nil, length, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, 0, fmt.Errorf("hugemem: mapping %d bytes of process %d's shared memory: %w", s.Len, s.PID, err)
	}
	return p, length, nil
}
