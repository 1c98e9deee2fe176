// Command orwlrun starts N local processes of a program as one ORWL job,
// like mpirun -np N:
//
//	orwlrun -np N [-host 127.0.0.1] [-port 0] [-grace 5s] [-restarts 0] PROGRAM [ARGS...]
//
// Each process gets ORWL_RANK, ORWL_SIZE, ORWL_COORD (rank 0's coordinator
// address) and ORWL_SECRET (fresh and random for every job). orwlrun itself
// opens the coordinator's listening socket (an ephemeral port unless -port
// is given) and hands it to rank 0 as an inherited file descriptor named by
// ORWL_COORD_FD, so no other job can take the port in between: two jobs on
// one machine never collide. Every line the processes print is prefixed
// with "[rank] ". SIGINT and SIGTERM are forwarded to every process. When a
// process fails, the others get SIGTERM, then SIGKILL after the grace
// period, and orwlrun exits with the failed process's status (128+signal
// for a process killed by a signal). The failed process is the first to
// end by a signal within 50ms of the first failure, if any, since the
// others then fail because they lost it; else the first to fail.
//
// With -restarts N, a job in which a process failed (a non-zero status, a signal) is
// started again, whole, once the others are stopped, up to N times: each attempt gets a
// fresh secret and coordinator, so no process of an earlier attempt can join it, and
// ORWL_ATTEMPT=0, 1, ... says which attempt it is. orwlrun prints one line per restart
// naming the attempt, the failed rank and its status, and exits with the last attempt's
// status. A program that writes checkpoints (package checkpoint) then resumes from the
// newest one instead of starting over. A job stopped by SIGINT or SIGTERM is not restarted.
//
// orwlrun starts processes on this machine only and does not interpret
// their output; it must not be needed by a program (mpirun or srun work
// too, see internal/jobenv). It is a command-line front end over
// internal/launch, which does the launching (tests and examples use it
// directly); -grace 0 kills at once.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/orwl-go/orwl/internal/launch"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// parse turns orwlrun's command line into the launcher's options (without the output
// writers and signals).
func parse(args []string, stderr io.Writer) (launch.Options, error) {
	var o launch.Options
	fs := flag.NewFlagSet("orwlrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Procs, "np", 1, "number of processes")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "address the coordinator and the processes listen on")
	fs.IntVar(&o.Port, "port", 0, "coordinator port (0: an ephemeral port)")
	fs.DurationVar(&o.Grace, "grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when stopping the others")
	fs.IntVar(&o.Restarts, "restarts", 0, "times to start the whole job again after a process fails")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orwlrun -np N [flags] PROGRAM [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Argv = fs.Args()
	if len(o.Argv) == 0 {
		fs.Usage()
		return o, errors.New("orwlrun: no program given")
	}
	if o.Procs < 1 {
		return o, fmt.Errorf("orwlrun: -np %d: need at least one process", o.Procs)
	}
	if o.Restarts < 0 {
		return o, fmt.Errorf("orwlrun: -restarts %d: cannot be negative", o.Restarts)
	}
	if o.Port < 0 || o.Port > 65535 {
		return o, fmt.Errorf("orwlrun: -port %d: not a port", o.Port)
	}
	if o.Grace == 0 {
		o.Grace = -1 // -grace 0: SIGKILL at once (launch reads 0 as its default)
	}
	o.Name = "orwlrun"
	return o, nil
}

// run is orwlrun without process-global state: it returns the exit status.
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	o.Stdout, o.Stderr, o.Signals = stdout, stderr, sigs
	return launch.Run(o)
}
