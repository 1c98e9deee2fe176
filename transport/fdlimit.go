package transport

import (
	"errors"
	"fmt"
	"syscall"
)

// tooManyFiles reports whether err is the limit of open files, the process's or the system's.
func tooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fdLimitError names the limit of open files as the cause of err, met by a process of a job
// of size processes: waiting does not help, a process holds two connections with each
// process it exchanges messages with, up to 2(size-1).
func fdLimitError(size int, err error) error {
	return fmt.Errorf("this process has reached its limit of open files (RLIMIT_NOFILE: ulimit -n), and a process of a job of %d holds two connections with each process it exchanges messages with, up to %d: raise the limit: %w",
		size, 2*(size-1), err)
}
