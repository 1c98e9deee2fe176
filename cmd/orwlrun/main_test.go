package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/jobenv"
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
func helper(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv("ORWL_RANK"))
	size, _ := strconv.Atoi(os.Getenv("ORWL_SIZE"))
	switch mode {
	case "hello":
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
		fmt.Printf("hello from %d of %d\n", rank, size)
		fmt.Fprintf(os.Stderr, "to stderr %d", rank) // no final newline
		return 0
	case "fail":
		// Rank 2 ignores SIGTERM (it needs the SIGKILL); rank 1 fails once
		// rank 2 is ready, which the FIFO tells it.
		fifo := os.Getenv("ORWLRUN_TEST_FIFO")
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
		time.Sleep(time.Hour)
		return 0
	case "mesh":
		return meshHelper()
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

// syncBuffer is an io.Writer that can be waited on.
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

func TestHelloPrefixesAndEnv(t *testing.T) {
	t.Setenv(helperEnv, "hello")
	var out, errOut syncBuffer
	status := run([]string{"-np", "3", os.Args[0]}, &out, &errOut, nil)
	if status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	for r := 0; r < 3; r++ {
		if want := fmt.Sprintf("[%d] hello from %d of 3\n", r, r); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
		if want := fmt.Sprintf("[%d] to stderr %d\n", r, r); !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}

func TestFailureStopsOthers(t *testing.T) {
	t.Setenv(helperEnv, "fail")
	fifo := t.TempDir() + "/ready"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ORWLRUN_TEST_FIFO", fifo)
	var out, errOut syncBuffer
	start := time.Now()
	status := run([]string{"-np", "3", "-grace", "300ms", os.Args[0]}, &out, &errOut, nil)
	if status != 3 {
		t.Fatalf("status %d, want 3\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "rank 1 failed") || !strings.Contains(errOut.String(), "killing the remaining") {
		t.Fatalf("stderr:\n%s", errOut.String())
	}
	t.Logf("job stopped after %v", time.Since(start).Round(time.Millisecond))
}

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
	status := run([]string{"-np", "2", os.Args[0]}, out, &errOut, sigs)
	if status != 128+int(syscall.SIGTERM) {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, out.String(), errOut.String())
	}
	for r := 0; r < 2; r++ {
		if want := fmt.Sprintf("[%d] terminated cleanly\n", r); !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
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
	for _, args := range [][]string{
		{},
		{"-np", "0", "true"},
		{"-port", "70000", "true"},
		{"-port", port, "true"}, // taken
	} {
		var out, errOut syncBuffer
		if status := run(args, &out, &errOut, nil); status == 0 {
			t.Errorf("orwlrun %q succeeded", args)
		}
	}
	var out, errOut syncBuffer
	if status := run([]string{"-np", "2", "/nonexistent/program"}, &out, &errOut, nil); status != 127 {
		t.Errorf("missing program: status %d, %s", status, errOut.String())
	}
}

// ringHandler collects one frame.
type ringHandler struct{ got chan string }

func (h ringHandler) Sink(int, *transport.Header) []byte { return nil }
func (h ringHandler) Handle(from int, hd *transport.Header, p []byte) {
	h.got <- fmt.Sprintf("%d says %s", from, p)
}
func (h ringHandler) FrameError(int, error) {}
func (h ringHandler) PeerLost(int, error)   {}

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
