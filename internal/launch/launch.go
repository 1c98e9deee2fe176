// Package launch starts N local processes of a program as one ORWL job, the way orwlrun
// does (orwlrun, examples that start themselves, and multi-process tests share it).
//
// Every process gets ORWL_RANK, ORWL_SIZE, ORWL_COORD and a fresh ORWL_SECRET; rank 0
// inherits the coordinator's already open listening socket (ORWL_COORD_FD), so two jobs on
// one machine never race for a port. The processes share this machine's cores: unless
// GOMAXPROCS is set, each gets GOMAXPROCS = cores / processes (at least 1), so that their
// goroutines hand work to each other on the same core instead of waking idle ones. Output
// lines are prefixed with "[rank] ". When one process fails, the others get a while to end
// by themselves (a process of an ORWL job learns of the failure and returns its own error),
// then SIGTERM, then SIGKILL after a grace period; with Options.Restarts the whole job is
// then started again as a new attempt (ORWL_ATTEMPT), with a new secret and coordinator.
//
// It starts processes on this machine only. It reads what they print only to tell which
// failure is the cause of the others: a line that says "orwl: rank R failed: " or
// "process rank R lost" (how Run's error reads in a process that failed because another
// one did) marks its process's failure as relayed, not the cause.
package launch

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultGrace is the grace period between SIGTERM and SIGKILL when Options.Grace is 0.
const DefaultGrace = 5 * time.Second

// DefaultWait is the time the others get to end by themselves after a process failed, when
// Options.Wait is 0 and ORWL_PEER_TIMEOUT is not set: the default peer timeout of an ORWL
// job (3s), within which its processes learn of a failure or a loss, and a second more.
const DefaultWait = 4 * time.Second

// waitMargin is what the wait adds to the processes' peer timeout.
const waitMargin = time.Second

// WaitFor returns the default of Options.Wait for processes with the environment env (in
// the form of os.Environ; the last setting wins): their peer timeout (ORWL_PEER_TIMEOUT,
// when it is a positive duration) and a second more, else DefaultWait.
func WaitFor(env []string) time.Duration {
	wait := DefaultWait
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "ORWL_PEER_TIMEOUT="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				wait = d + waitMargin
			}
		}
	}
	return wait
}

// Options describe a job of local processes.
type Options struct {
	Procs int      // number of processes, at least 1
	Argv  []string // the program and its arguments
	Env   []string // added to this process's environment for every process
	Host  string   // coordinator and listen address; default 127.0.0.1
	Port  int      // coordinator port; 0 for an ephemeral one
	// Wait is how long the others get, after a process failed, to end by themselves before
	// they are sent SIGTERM, so that they report their own error: 0 means WaitFor(the
	// processes' environment), a negative value stops them at once.
	Wait time.Duration
	// Grace is the time between SIGTERM and SIGKILL when the others are stopped, or after
	// a forwarded signal: 0 means DefaultGrace, a negative value kills at once.
	Grace time.Duration
	// Stdout and Stderr receive the processes' lines, prefixed with "[rank] "; nil
	// discards them. Stderr also receives the launcher's own messages. Lines are written
	// whole, one Write each, never two at once (one writer may serve as both).
	Stdout, Stderr io.Writer
	// PlainStdout passes the processes' standard output on without the prefix, for
	// programs in which one process prints the results; PlainStderr does the same for
	// their standard error.
	PlainStdout, PlainStderr bool
	// Signals, when not nil, are forwarded to every process.
	Signals <-chan os.Signal
	// Name prefixes the launcher's own messages ("Name: rank 1 failed ..."); default
	// "launch". orwlrun sets "orwlrun".
	Name string
	// Restarts is how many times a job in which a process failed (a non-zero status, a
	// signal) is started again, whole, once every process of the failed attempt is gone
	// (the others stopped as above). Each attempt has a fresh secret and coordinator, so a
	// process of an earlier attempt can never join a later one; ORWL_ATTEMPT tells a
	// process its attempt (0, 1, ...). A job stopped by a forwarded signal, or whose
	// processes cannot start, is not restarted.
	Restarts int
}

// Run starts the job, waits for every process, and returns the exit status of the process
// whose failure caused the job's (see failed), or 0: 128+signal for one killed by a
// signal, and also when a forwarded signal stops a job that had not failed. It names that
// process on Stderr. With Restarts, a job in which a process
// failed is started again, whole, up to Restarts times, and Run returns the last
// attempt's status. Errors of its own are reported on Stderr with a status: 2 for invalid
// Options, 127 for a process that cannot start, 1 for the rest (a port that cannot be
// listened on).
func Run(o Options) int {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.Wait == 0 {
		o.Wait = WaitFor(append(os.Environ(), o.Env...))
	}
	if o.Name == "" {
		o.Name = "launch"
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	l := &launcher{o: o}
	switch {
	case len(o.Argv) == 0:
		l.say("no program given")
		return 2
	case o.Procs < 1:
		l.say("%d processes: need at least one", o.Procs)
		return 2
	case o.Restarts < 0:
		l.say("%d restarts: cannot be negative", o.Restarts)
		return 2
	}
	for a := 0; ; a++ {
		out := l.attempt(a)
		if out.failed == nil || out.stopped || a == o.Restarts || l.signalled() {
			return out.status
		}
		l.say("attempt %d: rank %d failed (%s); restarting the job as attempt %d (restart %d of %d)",
			a, out.failed.rank, describe(out.failed.err), a+1, a+1, o.Restarts)
	}
}

// outcome is how one attempt ended.
type outcome struct {
	status  int
	failed  *proc // the process whose failure is the cause (see cause); nil when none failed
	stopped bool  // a forwarded signal stopped the job
}

// attempt runs the job once, as attempt a, with a secret and a coordinator of its own.
func (l *launcher) attempt(a int) outcome {
	o := l.o
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		l.say("%v", err)
		return outcome{status: 1}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		l.say("coordinator listen: %v", err)
		return outcome{status: 1}
	}
	lnFile, err := ln.(*net.TCPListener).File()
	ln.Close() // lnFile holds a duplicate of the socket
	if err != nil {
		l.say("%v", err)
		return outcome{status: 1}
	}
	base := append(os.Environ(), o.Env...)
	base = append(base,
		"ORWL_SIZE="+strconv.Itoa(o.Procs),
		"ORWL_COORD="+ln.Addr().String(),
		"ORWL_SECRET="+hex.EncodeToString(secret[:]),
		"ORWL_ATTEMPT="+strconv.Itoa(a),
	)
	if o.Host != "127.0.0.1" && o.Host != "localhost" && o.Host != "::1" {
		base = append(base, "ORWL_LISTEN="+o.Host)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && !slices.ContainsFunc(o.Env, func(v string) bool {
		return strings.HasPrefix(v, "GOMAXPROCS=")
	}) {
		base = append(base, "GOMAXPROCS="+strconv.Itoa(max(1, runtime.NumCPU()/o.Procs)))
	}
	procs, exited, ok := l.start(base, lnFile)
	if !ok {
		return outcome{status: 127}
	}
	return l.supervise(procs, exited)
}

// start starts every process with the environment base, rank 0 inheriting the
// coordinator's socket lnFile (which start closes). Each process is sent on exited when
// it has exited and its output is drained. When a process cannot start, start kills those
// already started, waits for them and returns false.
func (l *launcher) start(base []string, lnFile *os.File) ([]*proc, <-chan *proc, bool) {
	o := l.o
	procs := make([]*proc, 0, o.Procs)
	exited := make(chan *proc, o.Procs)
	for r := 0; r < o.Procs; r++ {
		cmd := exec.Command(o.Argv[0], o.Argv[1:]...)
		cmd.Env = append(base[:len(base):len(base)], "ORWL_RANK="+strconv.Itoa(r))
		if r == 0 {
			cmd.ExtraFiles = []*os.File{lnFile}
			cmd.Env = append(cmd.Env, "ORWL_COORD_FD=3")
		}
		setProcAttr(cmd)
		outR, err1 := cmd.StdoutPipe()
		errR, err2 := cmd.StderrPipe()
		err := errors.Join(err1, err2)
		if err == nil {
			err = cmd.Start()
		}
		if r == 0 {
			lnFile.Close()
		}
		if err != nil {
			l.say("starting rank %d: %v", r, err)
			for _, p := range procs {
				p.cmd.Process.Kill()
			}
			for range procs {
				<-exited
			}
			return nil, nil, false
		}
		p := &proc{rank: r, cmd: cmd, done: make(chan struct{})}
		procs = append(procs, p)
		prefix := "[" + strconv.Itoa(r) + "] "
		outPrefix, errPrefix := prefix, prefix
		if o.PlainStdout {
			outPrefix = ""
		}
		if o.PlainStderr {
			errPrefix = ""
		}
		var copiers sync.WaitGroup
		copiers.Go(func() { l.copyLines(p, o.Stdout, outPrefix, outR) })
		copiers.Go(func() { l.copyLines(p, o.Stderr, errPrefix, errR) })
		go func() {
			copiers.Wait() // wait only after the output is drained (exec's rule for pipes)
			p.err = cmd.Wait()
			close(p.done)
			exited <- p
		}()
	}
	return procs, exited, true
}

// signalled reports whether a signal waits to be forwarded: the job is then not
// restarted.
func (l *launcher) signalled() bool {
	select {
	case <-l.o.Signals:
		return true
	default:
		return false
	}
}

// describe says how a process ended: its Wait error, with the status for a signal.
func describe(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && !ee.Exited() {
		return fmt.Sprintf("%v, status %d", err, exitCode(err))
	}
	return err.Error()
}

// launcher is one Run: its options and the lock that keeps output lines whole.
type launcher struct {
	o  Options
	mu sync.Mutex // serialises every write to Stdout and Stderr
}

// say writes one message of the launcher's own to Stderr, prefixed with its Name.
func (l *launcher) say(format string, args ...any) {
	msg := l.o.Name + ": " + fmt.Sprintf(format, args...) + "\n"
	l.mu.Lock()
	io.WriteString(l.o.Stderr, msg)
	l.mu.Unlock()
}

// supervise waits for every process. When one fails, the others get Options.Wait to end by
// themselves, then SIGTERM, then SIGKILL after Options.Grace. It names the cause of the
// failure (see cause), unless it named it already when it stopped the others.
func (l *launcher) supervise(procs []*proc, exited <-chan *proc) outcome {
	var out outcome
	grace := max(l.o.Grace, 0) // a negative Grace kills at once
	var failed []*proc         // in the order they ended
	var named *proc            // the failed process named when the others were stopped
	stopping := false
	var term, kill <-chan time.Time
	signalAll := func(sig os.Signal) {
		// Every process still running is marked before any is signalled: one that the
		// first signal's process takes down with it (its failure relayed) may end before
		// the loop reaches it, and is stopped all the same, not a failure of its own.
		var running []*proc
		for _, p := range procs {
			select {
			case <-p.done:
			default:
				p.stopped = true
				running = append(running, p)
			}
		}
		for _, p := range running {
			p.cmd.Process.Signal(sig)
		}
	}
	stop := func() {
		named = cause(failed)
		l.say("rank %d failed (%v); stopping the others", named.rank, named.err)
		stopping = true
		signalAll(syscall.SIGTERM)
		kill = time.After(grace)
	}
	for left := len(procs); left > 0; {
		select {
		case p := <-exited:
			left--
			if exitCode(p.err) == 0 {
				continue
			}
			failed = append(failed, p)
			if len(failed) > 1 || stopping || left == 0 {
				continue
			}
			if l.o.Wait < 0 {
				stop()
			} else {
				term = time.After(l.o.Wait)
			}
		case <-term:
			term = nil
			if !stopping {
				stop()
			}
		case sig := <-l.o.Signals:
			signalAll(sig)
			out.stopped = true
			if s, ok := sig.(syscall.Signal); ok {
				out.status = 128 + int(s)
			} else {
				out.status = 1
			}
			if !stopping {
				stopping = true
				kill = time.After(grace)
			}
		case <-kill:
			l.say("grace period %v over; killing the remaining processes", grace)
			signalAll(syscall.SIGKILL)
			kill = nil
		}
	}
	if len(failed) == 0 {
		return out
	}
	out.failed = cause(failed)
	if out.stopped && out.failed.stopped {
		return out // the forwarded signal stopped them: no failure of their own
	}
	out.status = exitCode(out.failed.err)
	if out.failed != named {
		l.say("rank %d failed (%s)", out.failed.rank, describe(out.failed.err))
	}
	return out
}

// cause returns the process whose failure caused the others', among failed (in the order
// they ended): the first that ended on its own, not stopped by the launcher, whose output
// did not say that it failed because of another process, preferring one killed by a signal
// (the others then fail because they lost it, and may be reaped before it); else the first
// that ended on its own; else the first.
func cause(failed []*proc) *proc {
	for _, ok := range []func(p *proc) bool{
		func(p *proc) bool { _, sig := signalled(p.err); return !p.stopped && !p.relayed.Load() && sig },
		func(p *proc) bool { return !p.stopped && !p.relayed.Load() },
		func(p *proc) bool { return !p.stopped },
	} {
		for _, p := range failed {
			if ok(p) {
				return p
			}
		}
	}
	return failed[0]
}

// relayedFailure matches how Run's error reads in a process whose job failed because of
// another process: that process's failure, or its loss.
var relayedFailure = regexp.MustCompile(`orwl: rank \d+ failed: |process rank \d+ lost`)

// copyLines copies lines from one stream of process p to out with a prefix, each line whole
// in one Write under the launcher's lock, and notes in p a line that relays another
// process's failure.
func (l *launcher) copyLines(p *proc, out io.Writer, prefix string, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	line := []byte(prefix)
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(line) > len(prefix) {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			if !p.relayed.Load() && relayedFailure.Match(line[len(prefix):]) {
				p.relayed.Store(true)
			}
			l.mu.Lock()
			out.Write(line)
			l.mu.Unlock()
		}
		line = line[:len(prefix)]
		if err != nil {
			return
		}
	}
}

// proc is one process of an attempt. stopped is supervise's own; relayed is set by the
// copiers of its output, which end before done is closed.
type proc struct {
	rank    int
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	stopped bool        // the launcher sent it a signal
	relayed atomic.Bool // its output relayed another process's failure (relayedFailure)
}

// signalled returns the signal that ended the process whose Wait returned err, if one did.
func signalled(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal(), true
		}
	}
	return 0, false
}

// exitCode turns a process's Wait error into an exit status.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if sig, ok := signalled(err); ok {
		return 128 + int(sig)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if c := ee.ExitCode(); c > 0 {
			return c
		}
	}
	return 1
}
