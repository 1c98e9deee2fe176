package transport

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// startAll starts an n-process job in this test process, like startMeshes, and returns
// every rank's result and how long its Start took; tweak may leave ranks out (nil Config).
func startAll(t *testing.T, n int, tweak func(rank int, c *Config) bool) ([]*Mesh, []error, []time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	meshes := make([]*Mesh, n)
	errs := make([]error, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := Config{Rank: i, Size: n, Coord: ln.Addr().String(), Secret: testSecret, Logger: quietLogger(),
			StartTimeout: 30 * time.Second, PeerTimeout: time.Second, Heartbeat: 100 * time.Millisecond}
		if i == 0 {
			cfg.Listener = ln
		}
		if tweak != nil && !tweak(i, &cfg) {
			if i == 0 {
				ln.Close()
			}
			continue
		}
		wg.Go(func() {
			start := time.Now()
			meshes[i], errs[i] = Start(context.Background(), cfg)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	t.Cleanup(func() { closeAll(meshes) })
	return meshes, errs, took
}

// Processes that describe their job differently fail to start, every one with an error that
// names the rank and both descriptions.
func TestJobSpecMismatch(t *testing.T) {
	_, errs, _ := startAll(t, 3, func(rank int, c *Config) bool {
		c.JobSpec = "tasks=4 locations=[a b]"
		if rank == 2 {
			c.JobSpec = "tasks=5 locations=[a b]"
		}
		return true
	})
	for rank, err := range errs {
		if err == nil || !strings.Contains(err.Error(), `rank 2 has "tasks=5 locations=[a b]", rank 0 has "tasks=4 locations=[a b]"`) {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
}

// fakeRank registers with the coordinator at coord as rank of a job of size, waits for the
// address book, then closes its control connection: a process that dies during the start.
func fakeRank(t *testing.T, coord string, rank, size int) {
	t.Helper()
	m := &Mesh{rank: rank, size: size, cfg: Config{Secret: testSecret, PeerTimeout: 5 * time.Second}, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := m.dial(ctx, coord, 0, purposeRegister)
	if err != nil {
		t.Error(err)
		return
	}
	defer w.nc.Close()
	if err := w.writeMsg(Header{Type: TypeRegister}, encodeStrings([]string{"127.0.0.1:1", ""})); err != nil {
		t.Error(err)
	}
	for { // heartbeats, then the book
		h, _, err := w.readAny(1 << 16)
		if err != nil || h.Type == TypeAddrBook {
			return
		}
	}
}

// A process that dies after registering fails the start of every other one at once, naming
// its rank, long before the start timeout.
func TestStartFailsFastWhenARankDies(t *testing.T) {
	var coord string
	_, errs, took := startAll(t, 3, func(rank int, c *Config) bool {
		if rank == 2 {
			coord = c.Coord
			go fakeRank(t, coord, 2, 3)
			return false
		}
		return true
	})
	for rank, err := range errs[:2] {
		if err == nil || !strings.Contains(err.Error(), "rank 2 lost during the start") {
			t.Errorf("rank %d: %v", rank, err)
		}
		if took[rank] > 10*time.Second {
			t.Errorf("rank %d took %v to fail", rank, took[rank])
		}
	}
}

// A coordinator that dies during the start fails every other process, naming rank 0.
func TestStartFailsWhenTheCoordinatorDies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m0 := &Mesh{rank: 0, size: 2, cfg: Config{Secret: testSecret}, log: quietLogger()}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// rank 0: authenticates a registration, reads it, and dies
		ws, err := upgrader.Upgrade(rw, r, nil)
		if err != nil {
			return
		}
		w := newWire(ws.NetConn(), false)
		if _, _, err := m0.serverAuth(w, time.Now().Add(handshakeTimeout)); err == nil {
			w.readMsg(TypeRegister, 1<<16)
		}
		w.nc.Close()
	})}
	go srv.Serve(ln)
	defer srv.Close()
	start := time.Now()
	_, err = Start(context.Background(), Config{Rank: 1, Size: 2, Coord: ln.Addr().String(), Secret: testSecret,
		Logger: quietLogger(), PeerTimeout: time.Second, StartTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "the coordinator, rank 0, was lost during the start") {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to fail", d)
	}
}

// Connections that do not authenticate are held at most maxPreauth at a time; the others
// are closed at once, and the job still starts.
func TestUnauthenticatedConnectionsAreCapped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	type result struct {
		m   *Mesh
		err error
	}
	done0 := make(chan result, 1)
	go func() {
		m, err := Start(context.Background(), Config{Rank: 0, Size: 2, Listener: ln, Coord: addr, Secret: testSecret, Logger: quietLogger()})
		done0 <- result{m, err}
	}()
	const junk = 200
	conns := make([]net.Conn, 0, junk)
	for range junk {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	open := 0
	for _, c := range conns { // a closed connection reads EOF at once; a held one times out
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			open++
		}
	}
	if open > maxPreauth {
		t.Errorf("%d of %d unauthenticated connections held open, at most %d allowed", open, junk, maxPreauth)
	}
	m1, err := Start(context.Background(), Config{Rank: 1, Size: 2, Coord: addr, Secret: testSecret, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	res := <-done0
	closeAll([]*Mesh{res.m, m1})
	if res.err != nil {
		t.Fatal(res.err)
	}
	d := websocket.Dialer{}
	if _, _, err := d.Dial("ws://"+addr+wsPath, nil); err == nil {
		t.Fatal("the coordinator accepts connections after the start")
	}
}

// A coordinator that does not answer (a partition, a stopped process: here a socket whose
// connections are never accepted) is named within the peer timeout, not after the start
// timeout.
func TestStartFailsFastWhenTheCoordinatorDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel queues, nobody answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	_, err = Start(context.Background(), Config{Rank: 1, Size: 2, Coord: ln.Addr().String(), Secret: testSecret,
		Logger: quietLogger(), PeerTimeout: 500 * time.Millisecond, StartTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "the coordinator, rank 0 at "+ln.Addr().String()+", does not answer") {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to fail", d)
	}
}

// A rank that can never reach the coordinator (pointed at a socket that never answers)
// gives up within the peer timeout, and every other process fails as soon, naming it:
// registrations stopped while it was missing; nobody waits for the start timeout.
func TestStartNamesARankThatNeverRegisters(t *testing.T) {
	nowhere, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel queues, nobody answers
	if err != nil {
		t.Fatal(err)
	}
	defer nowhere.Close()
	_, errs, took := startAll(t, 4, func(rank int, c *Config) bool {
		if rank == 3 {
			c.Coord = nowhere.Addr().String()
		}
		return true
	})
	if err := errs[3]; err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("rank 3: %v", err)
	}
	for rank, err := range errs[:3] {
		if err == nil || !strings.Contains(err.Error(), "ranks [3] did not register with the coordinator within the peer timeout 1s after the last rank that did (2 of 3 registered)") {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
	for rank, d := range took {
		if d > 10*time.Second {
			t.Errorf("rank %d took %v to fail (start timeout 30s)", rank, d)
		}
	}
}

// A process pointed at a job whose start is over is told so at once by the coordinator,
// which answers every later connection.
func TestJoiningAJobThatHasStarted(t *testing.T) {
	meshes, errs, _ := startAll(t, 2, nil)
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}
	coord := meshes[1].cfg.Coord
	start := time.Now()
	_, err := Start(context.Background(), Config{Rank: 1, Size: 2, Coord: coord, Secret: testSecret,
		Logger: quietLogger(), PeerTimeout: time.Second, StartTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "the job's start is over") {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to fail", d)
	}
}

// A request that is not a websocket upgrade gets its error and its connection closed: it
// does not stay open, kept alive, until the mesh is up.
func TestRefusedRequestsCloseTheirConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { // rank 0 of a job whose rank 1 never comes
		_, err := Start(ctx, Config{Rank: 0, Size: 2, Listener: ln, Secret: testSecret,
			Logger: quietLogger(), StartTimeout: 30 * time.Second})
		done <- err
	}()
	for _, path := range []string{"/elsewhere", wsPath} { // 404, then 400 (no upgrade)
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a failure, not a wait
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: orwl\r\n\r\n")
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 4") {
			t.Errorf("GET %s: the connection stays open after %q: %v", path, b, err)
		}
	}
	cancel()
	<-done
}

// tcpWires returns both ends of a loopback TCP connection as the wires of a client and of
// a server.
func tcpWires(t *testing.T) (client, server *wire) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return newWire(cc, true), newWire(sc, false)
}

// A handshake whose time ends at the server (a client too busy to answer in time, as in a
// start of hundreds of processes) is no refusal: the client learns that it may try again,
// and dial does; a client without the secret is refused, and learns that it is.
func TestHandshakeTimeoutIsNoRefusal(t *testing.T) {
	server := &Mesh{rank: 0, size: 2, cfg: Config{Secret: testSecret}}
	for _, c := range []struct {
		name    string
		secret  []byte
		refused bool
	}{{"a busy client", testSecret, false}, {"a client without the secret", []byte("another"), true}} {
		cw, sw := tcpWires(t)
		client := &Mesh{rank: 1, size: 2, cfg: Config{Secret: c.secret}}
		deadline := time.Now().Add(50 * time.Millisecond)
		var serr, cerr error
		if c.refused {
			done := make(chan error, 1)
			go func() { done <- client.clientAuth(time.Time{}, cw, 0, purposeMesh) }()
			_, _, serr = server.serverAuth(sw, deadline)
			endHandshake(sw, serr)
			cerr = <-done
		} else { // the client, too busy to send its hello, reads what the server answers
			_, _, serr = server.serverAuth(sw, deadline)
			endHandshake(sw, serr)
			_, _, cerr = cw.readMsg(TypeAuthChallenge, nonceSize+sha256.Size)
		}
		if errors.Is(serr, ErrAuth) != c.refused || errors.Is(serr, errHandshakeTimeout) == c.refused {
			t.Errorf("%s: the server's error %v", c.name, serr)
		}
		if errors.Is(cerr, ErrAuth) != c.refused || errors.Is(cerr, errHandshakeTimeout) == c.refused {
			t.Errorf("%s: the client's error %v", c.name, cerr)
		}
		t.Logf("%s: server: %v; client: %v", c.name, serr, cerr)
	}
}

// A job of many processes on few cores starts, however long its connections take in all
// (here 64 processes of one test process): no fixed window fails a start that makes
// progress, and the start connects each process with its neighbours in the job's tree
// only (at most 3 peers, where it used to connect with all 63: 8064 connections in all).
func TestStartOfManyProcesses(t *testing.T) {
	const n = 64
	start := time.Now()
	meshes, errs, _ := startAll(t, n, func(_ int, c *Config) bool {
		c.PeerTimeout, c.Heartbeat = 3*time.Second, 300*time.Millisecond // liveness itself not at stake
		return true
	})
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}
	t.Logf("%d processes started in %v (peer timeout 3s)", n, time.Since(start).Round(time.Millisecond))
	for rank, m := range meshes {
		if got, want := m.Connected(), len(m.treeNeighbours()); got != want {
			t.Errorf("rank %d: connected with %d peers after the start, want its %d neighbours in the tree", rank, got, want)
		}
	}
}

// A dial whose peer stops answering during the handshake (a process stopped, as by SIGSTOP,
// while a lazy connection was being made) ends when the dial's context does, rather than at
// the handshake's timeout: a mesh that closes, or that learns the peer lost, does not wait
// for it (Close waits for its dialers).
func TestDialEndsWithItsContextDuringTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	defer close(quit)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(rw, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		<-quit // upgraded, and silent from then on
	})}
	go srv.Serve(ln)
	defer srv.Close()
	m := &Mesh{rank: 0, size: 2, cfg: Config{Secret: testSecret, PeerTimeout: time.Second}, log: quietLogger()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // as dialPeer's
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel) // the peer lost meanwhile
	start := time.Now()
	w, err := m.dial(ctx, ln.Addr().String(), 1, purposeMesh)
	if err == nil {
		w.nc.Close()
		t.Fatal("a dial to a silent peer succeeded")
	}
	if d := time.Since(start); d >= handshakeTimeout/2 {
		t.Errorf("the dial ended %v after it began, its context cancelled at 200ms: %v", d, err)
	}
}
