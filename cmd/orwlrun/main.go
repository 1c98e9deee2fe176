// Command orwlrun starts N local processes of a program as one ORWL job,
// like mpirun -np N:
//
//	orwlrun -np N [-host 127.0.0.1] [-port 0] [-grace 5s] PROGRAM [ARGS...]
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
// for a process killed by a signal).
//
// orwlrun starts processes on this machine only and does not interpret
// their output; it must not be needed by a program (mpirun or srun work
// too, see internal/jobenv).
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// options of one orwlrun invocation.
type options struct {
	np    int
	host  string
	port  int
	grace time.Duration
	argv  []string
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("orwlrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.np, "np", 1, "number of processes")
	fs.StringVar(&o.host, "host", "127.0.0.1", "address the coordinator and the processes listen on")
	fs.IntVar(&o.port, "port", 0, "coordinator port (0: an ephemeral port)")
	fs.DurationVar(&o.grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when stopping the others")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orwlrun -np N [flags] PROGRAM [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.argv = fs.Args()
	if len(o.argv) == 0 {
		fs.Usage()
		return o, errors.New("orwlrun: no program given")
	}
	if o.np < 1 {
		return o, fmt.Errorf("orwlrun: -np %d: need at least one process", o.np)
	}
	if o.port < 0 || o.port > 65535 {
		return o, fmt.Errorf("orwlrun: -port %d: not a port", o.port)
	}
	return o, nil
}

// copyLines copies lines from one process stream to out with a prefix;
// mu keeps lines of different processes whole.
func copyLines(mu *sync.Mutex, out io.Writer, prefix string, r io.Reader) {
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
			mu.Lock()
			out.Write(line)
			mu.Unlock()
		}
		line = line[:len(prefix)]
		if err != nil {
			return
		}
	}
}

type proc struct {
	rank int
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// exitCode turns a process's Wait error into an exit status.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		if c := ee.ExitCode(); c > 0 {
			return c
		}
	}
	return 1
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
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		fmt.Fprintln(stderr, "orwlrun:", err)
		return 1
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		fmt.Fprintf(stderr, "orwlrun: coordinator listen: %v\n", err)
		return 1
	}
	lnFile, err := ln.(*net.TCPListener).File()
	ln.Close() // lnFile holds a duplicate of the socket
	if err != nil {
		fmt.Fprintf(stderr, "orwlrun: %v\n", err)
		return 1
	}
	coord := ln.Addr().String()
	base := append(os.Environ(),
		"ORWL_SIZE="+strconv.Itoa(o.np),
		"ORWL_COORD="+coord,
		"ORWL_SECRET="+hex.EncodeToString(secret[:]),
	)
	if o.host != "127.0.0.1" && o.host != "localhost" && o.host != "::1" {
		base = append(base, "ORWL_LISTEN="+o.host)
	}

	var outMu sync.Mutex
	procs := make([]*proc, 0, o.np)
	exited := make(chan *proc, o.np)
	for r := 0; r < o.np; r++ {
		cmd := exec.Command(o.argv[0], o.argv[1:]...)
		cmd.Env = append(base[:len(base):len(base)], "ORWL_RANK="+strconv.Itoa(r))
		if r == 0 {
			cmd.ExtraFiles = []*os.File{lnFile}
			cmd.Env = append(cmd.Env, "ORWL_COORD_FD=3")
		}
		cmd.Stdin = nil
		setProcAttr(cmd)
		outR, err1 := cmd.StdoutPipe()
		errR, err2 := cmd.StderrPipe()
		if err = errors.Join(err1, err2); err == nil {
			err = cmd.Start()
		}
		if r == 0 {
			lnFile.Close()
		}
		if err != nil {
			fmt.Fprintf(stderr, "orwlrun: starting rank %d: %v\n", r, err)
			for _, p := range procs {
				p.cmd.Process.Kill()
			}
			for range procs {
				<-exited
			}
			return 127
		}
		p := &proc{rank: r, cmd: cmd, done: make(chan struct{})}
		procs = append(procs, p)
		prefix := "[" + strconv.Itoa(r) + "] "
		var copiers sync.WaitGroup
		copiers.Add(2)
		go func() { defer copiers.Done(); copyLines(&outMu, stdout, prefix, outR) }()
		go func() { defer copiers.Done(); copyLines(&outMu, stderr, prefix, errR) }()
		go func() {
			// Wait only after the output is drained (exec's rule for pipes).
			copiers.Wait()
			p.err = cmd.Wait()
			close(p.done)
			exited <- p
		}()
	}

	status := 0
	stopping := false
	var kill <-chan time.Time
	signalAll := func(sig os.Signal) {
		for _, p := range procs {
			select {
			case <-p.done:
			default:
				p.cmd.Process.Signal(sig)
			}
		}
	}
	stopOthers := func() {
		if !stopping {
			stopping = true
			signalAll(syscall.SIGTERM)
			kill = time.After(o.grace)
		}
	}
	for left := len(procs); left > 0; {
		select {
		case p := <-exited:
			left--
			if c := exitCode(p.err); c != 0 && status == 0 {
				status = c
				fmt.Fprintf(stderr, "orwlrun: rank %d failed (%v); stopping the others\n", p.rank, p.err)
				stopOthers()
			}
		case sig := <-sigs:
			signalAll(sig)
			if status == 0 {
				if s, ok := sig.(syscall.Signal); ok {
					status = 128 + int(s)
				} else {
					status = 1
				}
			}
			if !stopping {
				stopping = true
				kill = time.After(o.grace)
			}
		case <-kill:
			fmt.Fprintf(stderr, "orwlrun: grace period %v over; killing the remaining processes\n", o.grace)
			signalAll(syscall.SIGKILL)
			kill = nil
		}
	}
	return status
}
