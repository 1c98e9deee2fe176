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

// fdLimitError names the limit of open files as the cause of err, met during the start of a
// job of size processes: waiting does not help, every process of such a job holds a
// connection in each direction to every other one.
func fdLimitError(size int, err error) error {
	return fmt.Errorf("this process has reached its limit of open files (RLIMIT_NOFILE: ulimit -n), and a process of a job of %d holds %d connections and more: raise the limit: %w",
		size, 2*(size-1), err)
}
