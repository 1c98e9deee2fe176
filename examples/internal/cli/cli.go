// Package cli holds what the command lines of the examples that start themselves as a job
// of local processes share: parsing flags with one-line errors, starting this program as
// several processes of one ORWL job (as `orwlrun -np N` would), and the exit statuses.
//
// It is example code: it must not grow anything the examples do not share.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/orwl-go/orwl/orwl"
)

// Exit statuses of the examples.
const (
	ExitFailed = 1 // the job failed
	ExitUsage  = 2 // bad flags
)

// Parse parses args into fs. With -h it prints usage and the flags on stderr and returns
// flag.ErrHelp; a mistake, or an argument left over, is returned as an error of one line
// and prints nothing.
func Parse(fs *flag.FlagSet, args []string, usage string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
		return err
	case err != nil:
		return err
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// Config is a parsed command line.
type Config interface {
	// Start returns how many processes of the job to start on this machine: 1 to run the
	// job (or, under a launcher, this process's part of it) in this process.
	Start() int
}

// Where is the part of a configuration that says where the job runs; a configuration that
// embeds it is a Config.
type Where struct {
	InJob bool // started by a launcher: run this process's part of the job, start nothing
	Procs int  // processes of the job
}

// Start returns Procs, or 1 under a launcher.
func (w Where) Start() int {
	if w.InJob {
		return 1
	}
	return w.Procs
}

// Run is the body of the main function of an example called name, with the command line
// args: it parses them with parse, and returns 0 when parse returned flag.ErrHelp,
// ExitUsage after printing parse's error in one line ("name: ..."), the status of the
// processes when the configuration starts more than one, and otherwise compute's status.
func Run[C Config](name string, args []string, stdout, stderr io.Writer,
	parse func(args []string, stderr io.Writer) (C, error), compute func(c C, stdout, stderr io.Writer) int) int {
	c, err := parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, name+":", OneLine(err.Error()))
		return ExitUsage
	case c.Start() > 1:
		status, err := Start(c.Start(), args, stdout, stderr)
		if err != nil {
			fmt.Fprintln(stderr, name+":", err)
			return ExitFailed
		}
		return status
	}
	return compute(c, stdout, stderr)
}

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
