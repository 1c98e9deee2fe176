// Package hostcpu counts the host's cores, as the kernel's load figures count them: all the
// online CPUs, whatever this process may run on (runtime.NumCPU counts those only, one
// where a launcher bound the process to a core).
package hostcpu

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Online returns the number of the host's online CPUs (/sys/devices/system/cpu/online),
// or runtime.NumCPU() where that cannot be read. It reads the file once.
var Online = sync.OnceValue(func() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if n := count(string(b)); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
})

// count returns the number of CPUs of a kernel CPU list such as "0-3,8,10-11", or 0 when it
// is not one.
func count(list string) int {
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if isRange && err == nil {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return 0
		}
		n += b - a + 1
	}
	return n
}
