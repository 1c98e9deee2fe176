package summa

import "syscall"

// pageFaults returns the page faults of this process so far (minor and major), or 0 when
// the system does not say.
func pageFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt) + int64(ru.Majflt)
}
