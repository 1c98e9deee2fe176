// Package selfjob holds what the examples that start themselves as a job of local
// processes share: starting this program as several processes of one ORWL job, as
// `orwlrun -np N` would, and keeping an error on the one line a command prints.
//
// It is example code: it must not grow anything the examples do not share.
package selfjob

import (
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/orwl-go/orwl/orwl"
)

// Start runs this program with args as procs processes of one job on this machine and
// returns the exit status of the first that failed, or 0. Standard output is passed on
// without the "[rank] " prefix (only the process of task 0 should print there); standard
// error keeps it. SIGINT and SIGTERM are forwarded to every process while they run.
func Start(procs int, args []string, stdout, stderr io.Writer) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return orwl.Launch{
		Procs:       procs,
		Argv:        append([]string{exe}, args...),
		Stdout:      stdout,
		PlainStdout: true,
		Stderr:      stderr,
		Signals:     sigs,
	}.Run(), nil
}

// OneLine returns s with every run of white space, new lines included, made one space.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
