package transport

import (
	"sync"

	"golang.org/x/sys/unix"
)

// loadavg is a descriptor of /proc/loadavg, opened once for the process: a sample reads it
// again from its start, one system call (a sample took 1.5 µs on a 2-core VM) where
// opening, reading and closing the file took eight (12 µs), paid by the task whose wait
// took the sample, every crowdSample.
var loadavg = sync.OnceValues(func() (int, error) {
	return unix.Open("/proc/loadavg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
})

// readLoadavg reads /proc/loadavg into buf and returns how many bytes it read, 0 when it
// cannot be read. The kernel writes the file anew for every read from its start.
func readLoadavg(buf []byte) int {
	fd, err := loadavg()
	if err != nil {
		return 0
	}
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return 0
	}
	return n
}
