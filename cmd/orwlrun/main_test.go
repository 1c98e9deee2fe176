package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/jobenv"
	"github.com/orwl-go/orwl/internal/launch"
	"github.com/orwl-go/orwl/orwl"
	"github.com/orwl-go/orwl/transport"
	"go.uber.org/goleak"
)

const helperEnv = "ORWLRUN_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	goleak.VerifyTestMain(m)
}

// helper is the PROGRAM orwlrun starts in these tests (this test binary).
// The launching itself (prefixes, stopping the others, signals) is tested in
// internal/launch; here a real job runs end to end.
func helper(mode string) int {
	switch mode {
	case "mesh":
		return meshHelper()
	case "fail":
		fmt.Println("failing")
		return 3
	case "deadlock":
		return deadlockHelper(crossing)
	case "unordered":
		return deadlockHelper(unordered)
	case "sigterm":
		return sigtermHelper()
	case "attempt": // the mesh job, whose rank 1 fails in attempt 0
		if os.Getenv("ORWL_ATTEMPT") == "0" && os.Getenv("ORWL_RANK") == "1" {
			fmt.Println("failing in attempt 0")
			return 4
		}
		return meshHelper()
	}
	return 2
}

// syncBuffer is a concurrency-safe io.Writer; when seen is not nil, it is closed once want
// was written n times.
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

// The flags map onto the launcher's options; -grace 0 kills at once.
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want launch.Options
	}{
		{[]string{"prog"}, launch.Options{Procs: 1, Host: "127.0.0.1", Grace: launch.DefaultGrace, Argv: []string{"prog"}}},
		{[]string{"-np", "4", "-host", "0.0.0.0", "-port", "7000", "-grace", "2s", "prog", "-x", "y"},
			launch.Options{Procs: 4, Host: "0.0.0.0", Port: 7000, Grace: 2 * time.Second, Argv: []string{"prog", "-x", "y"}}},
		{[]string{"-grace", "0", "prog"}, launch.Options{Procs: 1, Host: "127.0.0.1", Grace: -1, Argv: []string{"prog"}}},
		{[]string{"-restarts", "3", "prog"}, launch.Options{Procs: 1, Host: "127.0.0.1", Grace: launch.DefaultGrace, Restarts: 3, Argv: []string{"prog"}}},
		{[]string{"-n", "3", "prog"}, launch.Options{Procs: 3, Host: "127.0.0.1", Grace: launch.DefaultGrace, Argv: []string{"prog"}}},
		{[]string{"-wait", "10s", "prog"}, launch.Options{Procs: 1, Host: "127.0.0.1", Wait: 10 * time.Second, Grace: launch.DefaultGrace, Argv: []string{"prog"}}},
		{[]string{"-wait", "0", "prog"}, launch.Options{Procs: 1, Host: "127.0.0.1", Wait: -1, Grace: launch.DefaultGrace, Argv: []string{"prog"}}},
		{[]string{"-label=false", "prog"}, launch.Options{Procs: 1, Host: "127.0.0.1", Grace: launch.DefaultGrace, Argv: []string{"prog"},
			PlainStdout: true, PlainStderr: true}},
	} {
		var errOut syncBuffer
		o, err := parse(c.args, &errOut)
		c.want.Name = "orwlrun"
		if c.want.Wait == 0 {
			c.want.Wait = launch.DefaultWait
		}
		if err != nil || o.Procs != c.want.Procs || o.Host != c.want.Host || o.Port != c.want.Port || o.Wait != c.want.Wait ||
			o.Grace != c.want.Grace || o.Restarts != c.want.Restarts || o.Name != c.want.Name || !slices.Equal(o.Argv, c.want.Argv) ||
			o.PlainStdout != c.want.PlainStdout || o.PlainStderr != c.want.PlainStderr {
			t.Errorf("parse(%q) = %+v, %v; want %+v", c.args, o, err, c.want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		args   []string
		status int
		msg    string
	}{
		{[]string{}, 2, "orwlrun: no program given\n"},
		{[]string{"-np", "0", "true"}, 2, "orwlrun: -np 0: need at least one process\n"},
		{[]string{"-port", "70000", "true"}, 2, "orwlrun: -port 70000: not a port\n"},
		{[]string{"-nosuchflag", "true"}, 2, "flag provided but not defined: -nosuchflag"},
		{[]string{"-restarts", "-1", "true"}, 2, "orwlrun: -restarts -1: cannot be negative\n"},
		{[]string{"-restarts", "x", "true"}, 2, `invalid value "x" for flag -restarts: parse error`},
		{[]string{"-port", port, "true"}, 1, "orwlrun: coordinator listen: "}, // taken
		{[]string{"-np", "2", "/nonexistent/program"}, 127, "orwlrun: starting rank 0: "},
		{[]string{"-h"}, 0, "usage: orwlrun -np N [flags] PROGRAM [ARGS...]  (-n N as well)\n"},
	} {
		var out, errOut syncBuffer
		if status := run(c.args, &out, &errOut, nil); status != c.status || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("orwlrun %q: status %d, stderr:\n%s\nwant status %d and %q", c.args, status, errOut.String(), c.status, c.msg)
		}
	}
}

// A failed process: orwlrun exits with its status and says so with its own prefix.
func TestFailureStatus(t *testing.T) {
	t.Setenv(helperEnv, "fail")
	var out, errOut syncBuffer
	if status := run([]string{"-np", "1", os.Args[0]}, &out, &errOut, nil); status != 3 {
		t.Fatalf("status %d, want 3\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	if want := "orwlrun: rank 0 failed (exit status 3)\n"; errOut.String() != want {
		t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
	}
	if !strings.Contains(out.String(), "[0] failing\n") {
		t.Errorf("stdout:\n%s", out.String())
	}
}

// -restarts: a real job whose rank 1 fails in its first attempt runs again and
// succeeds; one that always fails exits with its status after the restarts.
func TestRestarts(t *testing.T) {
	t.Setenv(helperEnv, "attempt")
	var out, errOut syncBuffer
	if status := run([]string{"-np", "3", "-restarts", "2", "-wait", "0", os.Args[0]}, &out, &errOut, nil); status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	want := "orwlrun: attempt 0: rank 1 failed (exit status 4); restarting the job as attempt 1 (restart 1 of 2)\n"
	if !strings.Contains(errOut.String(), want) || strings.Count(errOut.String(), "restarting") != 1 {
		t.Errorf("stderr lacks %q once:\n%s", want, errOut.String())
	}
	for r := range 3 {
		if want := fmt.Sprintf("[%d] rank %d (orwlrun): %d says hi\n", r, r, (r+2)%3); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}

	t.Setenv(helperEnv, "fail")
	errOut = syncBuffer{}
	if status := run([]string{"-restarts", "2", os.Args[0]}, &out, &errOut, nil); status != 3 {
		t.Fatalf("always failing: status %d, want 3\nstderr:\n%s", status, errOut.String())
	}
	if got := strings.Count(errOut.String(), "restarting the job"); got != 2 {
		t.Errorf("always failing: %d restarts, want 2:\n%s", got, errOut.String())
	}
}

// ringHandler collects one frame.
type ringHandler struct{ got chan string }

func (h ringHandler) Sink(int, *transport.Header) ([]byte, error) { return nil, nil }
func (h ringHandler) Handle(from int, hd *transport.Header, p []byte) {
	h.got <- fmt.Sprintf("%d says %s", from, p)
}
func (h ringHandler) PeerLost(int, error) {}

// meshHelper is a real job: discovery from orwlrun's environment, the
// inherited coordinator socket, the mesh, a ring exchange and a barrier.
func meshHelper() int {
	job, err := jobenv.FromEnv(jobenv.Explicit{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ln, err := job.CoordListener()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	h := ringHandler{got: make(chan string, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := transport.Start(ctx, transport.Config{
		Rank: job.Rank, Size: job.Size, Coord: job.Coord, Listener: ln, ListenHost: job.Listen,
		Secret: job.Secret, Handler: h, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer m.Close()
	next := (job.Rank + 1) % job.Size
	if err := m.Send(next, transport.Owner, transport.Header{Type: transport.TypeUser}, []byte("hi")); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("rank %d (%s): %s\n", job.Rank, job.Source, <-h.got)
	if err := m.Barrier(ctx); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

func TestMeshJobUnderOrwlrun(t *testing.T) {
	t.Setenv(helperEnv, "mesh")
	var out, errOut syncBuffer
	status := run([]string{"-np", "4", os.Args[0]}, &out, &errOut, nil)
	if status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	for r := 0; r < 4; r++ {
		if want := fmt.Sprintf("[%d] rank %d (orwlrun): %d says hi\n", r, r, (r+3)%4); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
}

// crossing breaks the discipline: each task holds its own block (position 0) and, nested,
// takes the other's (position 1).
func crossing(ctx context.Context, task *orwl.Task) error {
	mine := task.WriteInsert(task.Loc(task.ID(), "block"), 0)
	theirs := task.WriteInsert(task.Loc(1-task.ID(), "block"), 1)
	if err := task.Schedule(ctx); err != nil {
		return err
	}
	return mine.Section(ctx, func([]byte) error {
		return theirs.Section(ctx, func([]byte) error { return nil })
	})
}

// unordered breaks the discipline in the other way: each task takes the other's block
// (position 1) before its own (position 0), one after the other.
func unordered(ctx context.Context, task *orwl.Task) error {
	mine := task.WriteInsert(task.Loc(task.ID(), "block"), 0)
	theirs := task.WriteInsert(task.Loc(1-task.ID(), "block"), 1)
	if err := task.Schedule(ctx); err != nil {
		return err
	}
	if err := theirs.Section(ctx, func([]byte) error { return nil }); err != nil {
		return err
	}
	return mine.Section(ctx, func([]byte) error { return nil })
}

// deadlockHelper is a program whose job of two processes, one task each, deadlocks, and
// which reports Run's error on its own error path.
func deadlockHelper(fn orwl.TaskFunc) int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"block"}}, fn)
	fmt.Fprintf(os.Stderr, "own error path: %v\n", err)
	return 1
}

// sigtermHelper is a program whose tasks wait for the job's end, and which reports Run's
// error on its own error path: it does not wire SIGTERM itself.
func sigtermHelper() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error {
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			fmt.Println("ready")
			<-ctx.Done()
			return ctx.Err()
		})
	fmt.Printf("own error path: canceled=%v err=%v\n", errors.Is(err, context.Canceled), err)
	return 1
}

// TestSurvivorsReportTheirError: in a job whose rank 0 finds a deadlock, every process
// reports its own error (none is stopped before it could), and orwlrun names rank 0, the
// cause, not whichever process exited first. The two ways of breaking the discipline get
// messages that say which rule was broken, across processes too.
func TestSurvivorsReportTheirError(t *testing.T) {
	for _, c := range []struct{ mode, wait, rule string }{
		{"deadlock", `held by task 1 (position 0)`, `broken rule: sections nest only handles of the same position`},
		{"unordered", `granted to task 1 (position 0, not yet acquired)`, `broken rule: a task takes its handles in order of position`},
	} {
		t.Run(c.mode, func(t *testing.T) { survivorsReport(t, c.mode, c.wait, c.rule) })
	}
}

func survivorsReport(t *testing.T, mode string, words ...string) {
	t.Setenv(helperEnv, mode)
	var out, errOut syncBuffer
	if status := run([]string{"-np", "2", os.Args[0]}, &out, &errOut, nil); status != 1 {
		t.Fatalf("status %d, want 1\nstderr:\n%s", status, errOut.String())
	}
	for _, want := range append([]string{
		`[0] own error path: orwl: deadlock: task 0 waits to write task 1 "block" (position 1), `,
		`[1] own error path: orwl: rank 0 failed: orwl: deadlock: task 0 waits`,
		"orwlrun: rank 0 failed (exit status 1)\n",
	}, words...) {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if strings.Count(errOut.String(), "orwlrun:") != 1 {
		t.Errorf("orwlrun said more than the cause:\n%s", errOut.String())
	}
}

// TestSIGTERMCancelsRun: SIGTERM to orwlrun reaches every process, whose Run returns an
// error naming the signal and wrapping context.Canceled, and the program's error path runs.
// A process that hears of another's SIGTERM before its own returns that failure instead.
func TestSIGTERMCancelsRun(t *testing.T) {
	t.Setenv(helperEnv, "sigterm")
	out := &syncBuffer{want: "ready", n: 2, seen: make(chan struct{})}
	seen := out.seen
	var errOut syncBuffer
	sigs := make(chan os.Signal, 1)
	go func() {
		<-seen
		sigs <- syscall.SIGTERM
	}()
	if status := run([]string{"-np", "2", os.Args[0]}, out, &errOut, sigs); status != 128+int(syscall.SIGTERM) {
		t.Errorf("status %d, want %d", status, 128+int(syscall.SIGTERM))
	}
	own := 0
	for r := range 2 {
		mine := fmt.Sprintf("[%d] own error path: canceled=true err=orwl: rank %d stopped by SIGTERM (from its launcher, orwlrun): context canceled", r, r)
		relayed := fmt.Sprintf("[%d] own error path: canceled=false err=orwl: rank %d failed: orwl: rank %d stopped by SIGTERM", r, 1-r, 1-r)
		switch {
		case strings.Contains(out.String(), mine):
			own++
		case !strings.Contains(out.String(), relayed):
			t.Errorf("stdout lacks %q (or %q):\n%s\nstderr:\n%s", mine, relayed, out.String(), errOut.String())
		}
	}
	if own == 0 {
		t.Errorf("no Run returned its own SIGTERM:\n%s", out.String())
	}
}

// -label=false: the processes' lines as they printed them.
func TestUnlabelledOutput(t *testing.T) {
	t.Setenv(helperEnv, "fail")
	var out, errOut syncBuffer
	if status := run([]string{"-n", "2", "-label=false", os.Args[0]}, &out, &errOut, nil); status != 3 {
		t.Fatalf("status %d, want 3\nstderr:\n%s", status, errOut.String())
	}
	if out.String() != "failing\nfailing\n" {
		t.Errorf("stdout %q, want two unprefixed lines", out.String())
	}
}
