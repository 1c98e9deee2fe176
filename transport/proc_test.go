package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const childEnv = "TRANSPORT_TEST_CHILD"

// childMain runs rank 1 of a two-process job in a re-executed test binary:
// it starts, passes one barrier, says "ready" on stdout and waits to be
// killed (or for stdin to close).
func childMain() {
	rank, _ := strconv.Atoi(os.Getenv(childEnv))
	cfg := Config{
		Rank: rank, Size: 2, Coord: os.Getenv("TRANSPORT_TEST_COORD"), Secret: testSecret,
		Heartbeat: 100 * time.Millisecond, PeerTimeout: time.Second, Logger: quietLogger(),
		NoSharedMemory: os.Getenv("TRANSPORT_TEST_SOCKETS") != "",
	}
	m, err := Start(context.Background(), cfg)
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(1)
	}
	if err := m.Barrier(context.Background()); err != nil {
		fmt.Println("barrier:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	buf := make([]byte, 1)
	os.Stdin.Read(buf)
	m.Close()
	os.Exit(0)
}

// startChild starts rank 1 in a child process and rank 0 here.
func startChild(t *testing.T) (*Mesh, *recorder, *exec.Cmd) {
	t.Helper()
	return startChildOn(t, false)
}

// startChildOn is startChild, the two processes connected through sockets only when
// sockets is set.
func startChildOn(t *testing.T, sockets bool) (*Mesh, *recorder, *exec.Cmd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TRANSPORT_TEST_COORD="+ln.Addr().String())
	if sockets {
		cmd.Env = append(cmd.Env, "TRANSPORT_TEST_SOCKETS=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	r := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Start(ctx, Config{
		Rank: 0, Size: 2, Coord: ln.Addr().String(), Listener: ln, Secret: testSecret, Handler: r,
		Heartbeat: 100 * time.Millisecond, PeerTimeout: time.Second, Logger: quietLogger(),
		NoSharedMemory: sockets,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	return m, r, cmd
}

func waitLost(t *testing.T, r *recorder, what string) error {
	t.Helper()
	start := time.Now()
	select {
	case err := <-r.lost:
		t.Logf("%s: PeerLost after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no PeerLost within 10s", what)
	}
	return nil
}

// A peer process killed with SIGKILL is reported lost within seconds.
func TestPeerProcessKilled(t *testing.T) {
	m, r, cmd := startChild(t)
	cmd.Process.Signal(syscall.SIGKILL)
	err := waitLost(t, r, "SIGKILL")
	var pl *PeerLostError
	if !errors.As(err, &pl) || pl.Rank != 1 || errors.Is(err, ErrPeerClosed) {
		t.Fatalf("got %v", err)
	}
	if err := m.Barrier(context.Background()); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("Barrier after loss: %v", err)
	}
}

// A peer process that stops (SIGSTOP) keeps its sockets open; the heartbeat
// timeout reports it lost.
func TestPeerProcessStoppedHeartbeatTimeout(t *testing.T) {
	m, r, cmd := startChild(t)
	cmd.Process.Signal(syscall.SIGSTOP)
	err := waitLost(t, r, "SIGSTOP")
	if !errors.Is(err, ErrPeerLost) || !errorContains(err, "peer timeout") {
		t.Fatalf("got %v", err)
	}
	if err := m.Send(1, Owner, Header{Type: TypeUser}, nil); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("Send after loss: %v", err)
	}
}

// A process that closes its mesh while a peer is quiet (stopped, or cut off) and a write to
// that peer is stuck on a full socket does not wait for the write: its Close returns within a
// heartbeat or two, where it took closeWait (a process cut off by a partition ended a second
// after it found the loss).
func TestCloseDoesNotWaitForAQuietPeer(t *testing.T) {
	m, _, cmd := startChildOn(t, true)
	cmd.Process.Signal(syscall.SIGSTOP)
	defer cmd.Process.Signal(syscall.SIGCONT)
	big := make([]byte, 8<<20) // more than the socket's buffers: the writer waits for the peer
	for range 4 {
		if err := m.send(1, Requester, outMsg{h: Header{Type: TypeUser}, p: big}, queued); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * m.cfg.Heartbeat) // quiet for more than two heartbeats, less than the peer timeout
	start := time.Now()
	m.Close()
	if d := time.Since(start); d >= closeWait/2 {
		t.Errorf("Close took %v with a quiet peer (closeWait %v)", d, closeWait)
	}
}

func errorContains(err error, s string) bool {
	return err != nil && len(err.Error()) >= len(s) && contains(err.Error(), s)
}

func contains(a, b string) bool {
	for i := 0; i+len(b) <= len(a); i++ {
		if a[i:i+len(b)] == b {
			return true
		}
	}
	return false
}
