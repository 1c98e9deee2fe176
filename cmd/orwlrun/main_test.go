package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/jobenv"
	"github.com/orwl-go/orwl/internal/launch"
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
	case "attempt": // the mesh job, whose rank 1 fails in attempt 0
		if os.Getenv("ORWL_ATTEMPT") == "0" && os.Getenv("ORWL_RANK") == "1" {
			fmt.Println("failing in attempt 0")
			return 4
		}
		return meshHelper()
	}
	return 2
}

// syncBuffer is a concurrency-safe io.Writer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
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
	} {
		var errOut syncBuffer
		o, err := parse(c.args, &errOut)
		c.want.Name = "orwlrun"
		if err != nil || o.Procs != c.want.Procs || o.Host != c.want.Host || o.Port != c.want.Port ||
			o.Grace != c.want.Grace || o.Restarts != c.want.Restarts || o.Name != c.want.Name || !slices.Equal(o.Argv, c.want.Argv) {
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
		{[]string{"-h"}, 0, "usage: orwlrun -np N [flags] PROGRAM [ARGS...]\n"},
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
	if want := "orwlrun: rank 0 failed (exit status 3); stopping the others\n"; !strings.Contains(errOut.String(), want) {
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
	if status := run([]string{"-np", "3", "-restarts", "2", os.Args[0]}, &out, &errOut, nil); status != 0 {
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
