package exampleutil

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// The main function of an example command: parsing its flags with one-line errors, starting
// it as several processes of one job or running its part, and its exit statuses.

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
		return StartProcesses(name, c.Start(), args, stdout, stderr)
	}
	return compute(c, stdout, stderr)
}
