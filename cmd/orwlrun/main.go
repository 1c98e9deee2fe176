// Command orwlrun starts N local processes of a program as one ORWL job,
// like mpirun -np N:
//
//	orwlrun -np N [-host 127.0.0.1] [-port 0] [-wait 4s] [-grace 5s] [-label=false] [-restarts 0] PROGRAM [ARGS...]
//
// -n N is the same as -np N, as mpiexec and srun spell it. Each process gets ORWL_RANK,
// ORWL_SIZE, ORWL_COORD (rank 0's coordinator address) and ORWL_SECRET (fresh and random
// for every job). orwlrun itself opens the coordinator's listening socket (an ephemeral
// port unless -port is given) and hands it to rank 0 as an inherited file descriptor named
// by ORWL_COORD_FD, so no other job can take the port in between: two jobs on one machine
// never collide.
//
// Every line the processes print is prefixed with "[rank] ", as srun -l (--label) and
// mpiexec -l do; -label=false passes their output on as it is. SIGINT and SIGTERM are
// forwarded to every process.
//
// When a process fails, the others get -wait to end by themselves: a process of the job
// learns of the failure within its peer timeout and returns its own error from orwl.Run,
// so the program's error path runs (the default is that timeout, ORWL_PEER_TIMEOUT or 3s,
// plus a second). Those still running then get SIGTERM, which makes orwl.Run return an
// error wrapping context.Canceled, then SIGKILL after -grace. orwlrun names the process
// whose failure is the cause, not merely the first to exit (a process whose error says
// "orwl: rank R failed: " or "process rank R lost" failed because of another), and exits
// with its status (128+signal for a process killed by a signal).
//
// With -restarts N, a job in which a process failed (a non-zero status, a signal) is
// started again, whole, once the others are stopped, up to N times: each attempt gets a
// fresh secret and coordinator, so no process of an earlier attempt can join it, and
// ORWL_ATTEMPT=0, 1, ... says which attempt it is. orwlrun prints one line per restart
// naming the attempt, the failed rank and its status, and exits with the last attempt's
// status. A program that writes checkpoints (package checkpoint) then resumes from the
// newest one instead of starting over. A job stopped by SIGINT or SIGTERM is not restarted.
//
// orwlrun starts processes on this machine only; it must not be needed by a program
// (mpirun or srun work too, see internal/jobenv). It is a command-line front end over
// internal/launch, which does the launching (tests and examples use it directly);
// -wait 0 stops the others at once, -grace 0 kills at once.
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
	label := true
	fs.IntVar(&o.Procs, "np", 1, "number of processes")
	fs.IntVar(&o.Procs, "n", 1, "same as -np")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "address the coordinator and the processes listen on")
	fs.IntVar(&o.Port, "port", 0, "coordinator port (0: an ephemeral port)")
	fs.DurationVar(&o.Wait, "wait", launch.WaitFor(os.Environ()),
		"time the others get to end by themselves after a process fails, before SIGTERM (0: at once);\ntheir peer timeout (ORWL_PEER_TIMEOUT, else 3s) plus 1s by default")
	fs.DurationVar(&o.Grace, "grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when stopping the others")
	fs.BoolVar(&label, "label", true, `prefix every output line with "[rank] " (srun -l, mpiexec -l); -label=false: output as it is`)
	fs.IntVar(&o.Restarts, "restarts", 0, "times to start the whole job again after a process fails")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orwlrun -np N [flags] PROGRAM [ARGS...]  (-n N as well)")
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
	if o.Wait == 0 {
		o.Wait = -1 // -wait 0: SIGTERM at once
	}
	o.PlainStdout, o.PlainStderr = !label, !label
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
