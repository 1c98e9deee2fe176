package launch

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const helperEnv = "LAUNCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	goleak.VerifyTestMain(m)
}

// block waits for a signal that never comes, until the process is killed.
func block() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR2)
	<-c
}

// helper is the program the tests launch (this test binary).
func helper(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv("ORWL_RANK"))
	size, _ := strconv.Atoi(os.Getenv("ORWL_SIZE"))
	switch mode {
	case "hello":
		return hello(rank, size)
	case "procs":
		fmt.Printf("rank %d GOMAXPROCS=%s\n", rank, os.Getenv("GOMAXPROCS"))
		return 0
	case "fail":
		// Rank 2 ignores SIGTERM (it needs the SIGKILL); rank 1 fails once rank 2 is
		// ready, which the FIFO tells it.
		fifo := os.Getenv("LAUNCH_TEST_FIFO")
		if rank == 1 {
			f, err := os.OpenFile(fifo, os.O_RDONLY, 0)
			if err == nil {
				f.Close()
			}
			fmt.Println("failing")
			return 3
		}
		if rank == 2 {
			signal.Ignore(syscall.SIGTERM)
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
		}
		fmt.Println("waiting")
		block()
		return 0
	case "attempt":
		// Attempt 0 fails: rank 1 is killed while rank 0 waits to be stopped. Later
		// attempts succeed, and say which secret they had.
		if os.Getenv("ORWL_ATTEMPT") == "0" {
			if rank == 1 {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			block()
		}
		fmt.Printf("attempt %s secret %s\n", os.Getenv("ORWL_ATTEMPT"), os.Getenv("ORWL_SECRET"))
		return 0
	case "blame":
		// Rank 0 fails as a process does that lost a peer; rank 1, the peer, is killed a
		// moment after rank 0 has exited (the FIFO's end tells it).
		fifo := os.Getenv("LAUNCH_TEST_FIFO")
		if rank == 0 {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				defer f.Close()
			}
			fmt.Println("lost rank 1")
			return 1
		}
		if f, err := os.OpenFile(fifo, os.O_RDONLY, 0); err == nil {
			f.Read(make([]byte, 1)) // the end of rank 0
		}
		time.Sleep(5 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		block()
		return 0
	case "survivor":
		// Rank 1 fails once rank 0 is ready; rank 0 learns of it when rank 1 is gone (the
		// FIFO's end), a moment later reports it as Run would, and fails in turn.
		fifo := os.Getenv("LAUNCH_TEST_FIFO")
		if rank == 1 {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				defer f.Close()
			}
			fmt.Println("boom")
			return 3
		}
		if f, err := os.OpenFile(fifo, os.O_RDONLY, 0); err == nil {
			f.Read(make([]byte, 1)) // the end of rank 1
		}
		time.Sleep(200 * time.Millisecond) // as a process finds a lost peer: not at once
		fmt.Fprintln(os.Stderr, "orwl: rank 1 failed: boom")
		return 1
	case "relay":
		// Rank 0 finds the job's failure; rank 1 relays it and exits first (rank 0 ends
		// once rank 1 is gone: the FIFO's end).
		fifo := os.Getenv("LAUNCH_TEST_FIFO")
		if rank == 1 {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				defer f.Close()
			}
			fmt.Fprintln(os.Stderr, "error: orwl: rank 0 failed: orwl: deadlock: ...")
			return 1
		}
		fmt.Fprintln(os.Stderr, "error: orwl: deadlock: ...")
		if f, err := os.OpenFile(fifo, os.O_RDONLY, 0); err == nil {
			f.Read(make([]byte, 1))
		}
		return 1
	case "always":
		fmt.Printf("attempt %s failing\n", os.Getenv("ORWL_ATTEMPT"))
		return 5
	case "signal":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("terminated cleanly")
		return 0
	}
	return 2
}

// hello checks the job's environment, connects to rank 0 through the coordinator's socket,
// and says hello on both streams.
func hello(rank, size int) int {
	if len(os.Getenv("ORWL_SECRET")) != 64 {
		fmt.Println("bad secret")
		return 1
	}
	// The coordinator socket reaches rank 0 as fd 3; the others connect.
	if rank == 0 {
		if os.Getenv("ORWL_COORD_FD") != "3" {
			fmt.Println("no ORWL_COORD_FD")
			return 1
		}
		ln, err := net.FileListener(os.NewFile(3, "coord"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		for i := 1; i < size; i++ {
			c, err := ln.Accept()
			if err != nil {
				fmt.Println(err)
				return 1
			}
			c.Close()
		}
	} else {
		c, err := net.Dial("tcp", os.Getenv("ORWL_COORD"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		c.Close()
	}
	fmt.Printf("hello from %d of %d (%s)\n", rank, size, os.Getenv("LAUNCH_TEST_EXTRA"))
	fmt.Fprintf(os.Stderr, "to stderr %d", rank) // no final newline
	return 0
}

// syncBuffer is an io.Writer that can be waited on: seen is closed once want was
// written n times.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	n    int
	seen chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.seen != nil && strings.Count(s.b.String(), s.want) >= s.n {
		close(s.seen)
		s.seen = nil
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runWithFIFO runs procs processes of the helper in mode, which share a FIFO
// (LAUNCH_TEST_FIFO) to order their steps, given wait to end by themselves after a failure
// (Options.Wait), then killed at once when stopped (Grace -1).
func runWithFIFO(t *testing.T, mode string, procs int, wait time.Duration) (status int, out, errOut *syncBuffer) {
	t.Setenv(helperEnv, mode)
	fifo := t.TempDir() + "/fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAUNCH_TEST_FIFO", fifo)
	out, errOut = &syncBuffer{}, &syncBuffer{}
	status = Run(Options{Procs: procs, Argv: []string{os.Args[0]}, Wait: wait, Grace: -1, Name: "tester",
		Stdout: out, Stderr: errOut})
	return status, out, errOut
}

// Every line gets its rank's prefix, on the stream it was printed to, a line without a
// final newline included; every process gets the job's environment and Env.
func TestPrefixesAndEnv(t *testing.T) {
	t.Setenv(helperEnv, "hello")
	var out, errOut syncBuffer
	status := Run(Options{Procs: 3, Argv: []string{os.Args[0]}, Env: []string{"LAUNCH_TEST_EXTRA=extra"},
		Stdout: &out, Stderr: &errOut})
	if status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	for r := 0; r < 3; r++ {
		if want := fmt.Sprintf("[%d] hello from %d of 3 (extra)\n", r, r); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
		if want := fmt.Sprintf("[%d] to stderr %d\n", r, r); !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}

// One writer for both streams, as tests pass it, gets whole lines (-race checks that the
// launcher's own messages do not race with the processes' lines).
// TestPlainStdoutAndShareOfCores: stdout without prefixes on request, and the processes
// share the cores unless GOMAXPROCS is given.
func TestPlainStdoutAndShareOfCores(t *testing.T) {
	t.Setenv(helperEnv, "procs")
	t.Setenv("GOMAXPROCS", "") // restored after the test
	os.Unsetenv("GOMAXPROCS")
	var out syncBuffer
	if status := Run(Options{Procs: 2, Argv: []string{os.Args[0]}, Stdout: &out, PlainStdout: true}); status != 0 {
		t.Fatalf("status %d", status)
	}
	share := strconv.Itoa(max(1, runtime.NumCPU()/2))
	for r := range 2 {
		if want := fmt.Sprintf("rank %d GOMAXPROCS=%s\n", r, share); !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out = syncBuffer{}
	if status := Run(Options{Procs: 2, Argv: []string{os.Args[0]}, Env: []string{"GOMAXPROCS=7"}, Stdout: &out}); status != 0 {
		t.Fatalf("status %d", status)
	}
	if !strings.Contains(out.String(), "[1] rank 1 GOMAXPROCS=7\n") {
		t.Errorf("a given GOMAXPROCS was not kept:\n%s", out.String())
	}
}

func TestSharedWriterWholeLines(t *testing.T) {
	t.Setenv(helperEnv, "hello")
	var out bytes.Buffer // not safe for concurrent use: Run must serialise
	if status := Run(Options{Procs: 4, Argv: []string{os.Args[0]}, Stdout: &out, Stderr: &out}); status != 0 {
		t.Fatalf("status %d\n%s", status, out.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d lines, want 8:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "[") || strings.Count(l, "[") != 1 {
			t.Errorf("line not whole: %q", l)
		}
	}
}

// When one process fails and Wait is negative, the others get SIGTERM at once, and SIGKILL
// after the grace period; the status is the failed process's, and the messages carry Name.
func TestFailureStopsOthers(t *testing.T) {
	status, out, errOut := runWithFIFO(t, "fail", 3, -1)
	if status != 3 {
		t.Fatalf("status %d, want 3\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	for _, want := range []string{"tester: rank 1 failed (exit status 3); stopping the others\n",
		"tester: grace period 0s over; killing the remaining processes\n"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if !strings.Contains(out.String(), "[1] failing\n") {
		t.Errorf("stdout:\n%s", out.String())
	}
}

// The others get Options.Wait to end by themselves after a process failed, so that they
// report their own error before anything stops them.
func TestSurvivorsReportFirst(t *testing.T) {
	status, _, errOut := runWithFIFO(t, "survivor", 2, 0) // WaitFor: 4s
	if status != 3 {
		t.Errorf("status %d, want rank 1's 3", status)
	}
	if want := "[0] orwl: rank 1 failed: boom\ntester: rank 1 failed (exit status 3)\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
}

// The cause of a job's failure is named, with its status: not the process that exited
// first, when that one's output says that it failed because of another.
func TestCauseNamed(t *testing.T) {
	status, _, errOut := runWithFIFO(t, "relay", 2, 0)
	if want := "tester: rank 0 failed (exit status 1)\n"; status != 1 || !strings.HasSuffix(errOut.String(), want) ||
		strings.Count(errOut.String(), "tester:") != 1 {
		t.Errorf("status %d, stderr:\n%s\nwant status 1, ending with %q alone", status, errOut.String(), want)
	}
}

// WaitFor: the processes' peer timeout and a second, or DefaultWait.
func TestWaitFor(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, DefaultWait},
		{[]string{"ORWL_PEER_TIMEOUT=10s"}, 11 * time.Second},
		{[]string{"ORWL_PEER_TIMEOUT=10s", "ORWL_PEER_TIMEOUT=500ms"}, 1500 * time.Millisecond},
		{[]string{"ORWL_PEER_TIMEOUT=soon"}, DefaultWait},
	} {
		if got := WaitFor(c.env); got != c.want {
			t.Errorf("WaitFor(%q) = %v, want %v", c.env, got, c.want)
		}
	}
}

// A process killed by a signal is named as the job's failure even when another process, which
// failed because it lost it, has exited a moment earlier.
func TestKilledProcessIsBlamed(t *testing.T) {
	status, _, errOut := runWithFIFO(t, "blame", 2, 0)
	want := "tester: rank 1 failed (signal: killed, status 137)\n"
	if status != 137 || errOut.String() != want {
		t.Errorf("status %d, stderr %q; want 137, %q", status, errOut.String(), want)
	}
}

// Signals are forwarded to every process; the status says which signal stopped the job,
// which is not restarted.
func TestSignalForwarded(t *testing.T) {
	t.Setenv(helperEnv, "signal")
	out := &syncBuffer{want: "ready", n: 2, seen: make(chan struct{})}
	seen := out.seen
	var errOut syncBuffer
	sigs := make(chan os.Signal, 1)
	go func() {
		<-seen
		sigs <- syscall.SIGTERM
	}()
	status := Run(Options{Procs: 2, Argv: []string{os.Args[0]}, Stdout: out, Stderr: &errOut, Signals: sigs, Restarts: 2})
	if status != 128+int(syscall.SIGTERM) || strings.Contains(errOut.String(), "restarting") {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	for r := 0; r < 2; r++ {
		if want := fmt.Sprintf("[%d] terminated cleanly\n", r); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
}

// The launcher's own errors: their status and their message, prefixed with Name
// ("launch" by default).
func TestOwnErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		o      Options
		status int
		msg    string
	}{
		{Options{Procs: 0, Argv: []string{"true"}}, 2, "launch: 0 processes: need at least one\n"},
		{Options{Procs: 1}, 2, "launch: no program given\n"},
		{Options{Procs: 1, Argv: []string{"true"}, Port: port, Name: "x"}, 1, "x: coordinator listen: "},
		{Options{Procs: 2, Argv: []string{"/nonexistent/program"}}, 127, "launch: starting rank 0: "},
		{Options{Procs: 1, Argv: []string{"true"}, Restarts: -1}, 2, "launch: -1 restarts: cannot be negative\n"},
		{Options{Procs: 2, Argv: []string{"/nonexistent/program"}, Restarts: 3}, 127, "launch: starting rank 0: "}, // not restarted
	} {
		var errOut syncBuffer
		c.o.Stderr = &errOut
		if status := Run(c.o); status != c.status || !strings.HasPrefix(errOut.String(), c.msg) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%+v: status %d, stderr %q; want %d, one line %q", c.o, status, errOut.String(), c.status, c.msg)
		}
	}
}

// A job in which a process dies is started again, whole, as a new attempt with a new
// secret; the restart is said in one line naming the attempt, the rank and its status.
func TestRestartAfterFailure(t *testing.T) {
	t.Setenv(helperEnv, "attempt")
	var out, errOut syncBuffer
	status := Run(Options{Procs: 2, Argv: []string{os.Args[0]}, Wait: -1, Grace: -1, Restarts: 3, Name: "tester",
		Stdout: &out, Stderr: &errOut})
	if status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	want := "tester: attempt 0: rank 1 failed (signal: killed, status 137); restarting the job as attempt 1 (restart 1 of 3)\n"
	if strings.Count(errOut.String(), "restarting") != 1 || !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q once:\n%s", want, errOut.String())
	}
	secrets := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rank, attempt int
		var secret string
		if _, err := fmt.Sscanf(line, "[%d] attempt %d secret %s", &rank, &attempt, &secret); err != nil || attempt != 1 {
			t.Errorf("unexpected line %q", line)
		}
		secrets[secret] = true
	}
	if len(secrets) != 1 {
		t.Errorf("attempt 1's processes had %d secrets, want 1:\n%s", len(secrets), out.String())
	}
	if _, old := secrets[os.Getenv("ORWL_SECRET")]; old {
		t.Errorf("the secret leaked from the environment")
	}
}

// A job that always fails is restarted Restarts times, then Run returns its status.
func TestRestartsExhausted(t *testing.T) {
	t.Setenv(helperEnv, "always")
	var out, errOut syncBuffer
	status := Run(Options{Procs: 1, Argv: []string{os.Args[0]}, Restarts: 2, Stdout: &out, Stderr: &errOut})
	if status != 5 {
		t.Fatalf("status %d, want 5\nstderr:\n%s", status, errOut.String())
	}
	for a := range 3 {
		if want := fmt.Sprintf("[0] attempt %d failing\n", a); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if got := strings.Count(errOut.String(), "restarting the job"); got != 2 ||
		!strings.Contains(errOut.String(), "launch: attempt 1: rank 0 failed (exit status 5); restarting the job as attempt 2 (restart 2 of 2)\n") {
		t.Errorf("%d restart lines, want 2:\n%s", got, errOut.String())
	}
}
