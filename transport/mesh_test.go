package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childMain()
		return
	}
	goleak.VerifyTestMain(m)
}

var testSecret = []byte("test secret")

// received is one frame seen by a recorder.
type received struct {
	from int
	h    Header
	p    []byte
}

// recorder is a Handler that records everything into channels.
type recorder struct {
	frames chan received
	lost   chan error
	onRecv func(from int, h *Header, p []byte) // optional, replaces recording
}

func newRecorder() *recorder {
	return &recorder{frames: make(chan received, 4096), lost: make(chan error, 64)}
}

func (r *recorder) Sink(int, *Header) ([]byte, error) { return nil, nil }
func (r *recorder) Handle(from int, h *Header, p []byte) {
	if r.onRecv != nil {
		r.onRecv(from, h, p)
		return
	}
	r.frames <- received{from, *h, bytes.Clone(p)}
}
func (r *recorder) PeerLost(rank int, err error) { r.lost <- err }

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startMeshes starts an n-process job inside this test process, over
// loopback sockets, and closes it at cleanup.
func startMeshes(t testing.TB, n int, tweak func(rank int, c *Config)) ([]*Mesh, []*recorder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	meshes := make([]*Mesh, n)
	recs := make([]*recorder, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		recs[i] = newRecorder()
		cfg := Config{Rank: i, Size: n, Coord: ln.Addr().String(), Secret: testSecret, Handler: recs[i], Logger: quietLogger()}
		if i == 0 {
			cfg.Listener = ln
		}
		if tweak != nil {
			tweak(i, &cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := New(cfg)
			if err == nil {
				m.readers.crowd.runnable = quietHost // polling, when Spin asks for it, whatever the load
				err = m.Start(ctx)
			}
			if err == nil {
				meshes[i] = m
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	t.Cleanup(func() { closeAll(meshes) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: Start: %v", i, err)
		}
	}
	return meshes, recs
}

func closeAll(meshes []*Mesh) {
	var wg sync.WaitGroup
	for _, m := range meshes {
		if m != nil {
			wg.Add(1)
			go func() { defer wg.Done(); m.Close() }()
		}
	}
	wg.Wait()
}

func TestSingleProcess(t *testing.T) {
	m, err := Start(context.Background(), Config{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Send(0, Owner, Header{Type: TypeUser}, nil); err == nil {
		t.Fatal("Send to self succeeded")
	}
	m.Close()
}

func TestStartValidation(t *testing.T) {
	for _, cfg := range []Config{
		{Rank: 2, Size: 2},
		{Rank: -1, Size: 2},
		{Rank: 0, Size: 0},
		{Rank: 0, Size: 2, Coord: "127.0.0.1:0"}, // no secret
	} {
		if _, err := Start(context.Background(), cfg); err == nil {
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

// Every process sends to every other on both roles; frames arrive intact,
// from the right rank, in order per connection.
func TestMeshSendBothRoles(t *testing.T) {
	const n, count = 3, 50
	meshes, recs := startMeshes(t, n, nil)
	for i, m := range meshes {
		for j := 0; j < n; j++ {
			if j == i {
				continue
			}
			for k := 0; k < count; k++ {
				for _, role := range []Role{Requester, Owner} {
					p := []byte(fmt.Sprintf("%d->%d #%d %s", i, j, k, role))
					h := Header{Type: TypeUser + uint8(role), Key: uint32(i), ID: uint64(j), Arg: int64(k), Seq: uint64(k) * 3}
					if err := m.Send(j, role, h, p); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for j, r := range recs {
		next := map[[2]int]int64{}
		for range 2 * count * (n - 1) {
			f := <-r.frames
			role := Role(f.h.Type - TypeUser)
			want := fmt.Sprintf("%d->%d #%d %s", f.from, j, f.h.Arg, role)
			if string(f.p) != want || f.h.Len != uint64(len(want)) || int(f.h.Key) != f.from || f.h.Seq != uint64(f.h.Arg)*3 {
				t.Fatalf("rank %d got %+v %q, want %q", j, f.h, f.p, want)
			}
			key := [2]int{f.from, int(role)}
			if f.h.Arg != next[key] {
				t.Fatalf("rank %d: from %d %s: got #%d, want #%d", j, f.from, role, f.h.Arg, next[key])
			}
			next[key]++
		}
	}
	for _, r := range recs {
		select {
		case err := <-r.lost:
			t.Fatalf("peer lost: %v", err)
		default:
		}
	}
}

func TestBarrierOrdersRequesterMessages(t *testing.T) {
	const n, rounds, per = 3, 5, 100
	var counts [n][n]atomic.Int64 // counts[to][from]
	meshes, recs := startMeshes(t, n, nil)
	for to, r := range recs {
		r.onRecv = func(from int, h *Header, p []byte) { counts[to][from].Add(1) }
	}
	var wg sync.WaitGroup
	errs := make(chan error, n*rounds)
	for i, m := range meshes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; round <= rounds; round++ {
				for j := 0; j < n; j++ {
					for k := 0; k < per && j != i; k++ {
						if err := m.Send(j, Requester, Header{Type: TypeUser}, make([]byte, 100)); err != nil {
							errs <- err
							return
						}
					}
				}
				if err := m.Barrier(context.Background()); err != nil {
					errs <- err
					return
				}
				for from := 0; from < n; from++ {
					if from == i {
						continue
					}
					if got := counts[i][from].Load(); got < int64(round*per) {
						errs <- fmt.Errorf("rank %d after barrier %d: %d messages from %d, want >= %d", i, round, got, from, round*per)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// logBuffer is a concurrency-safe log sink that also hands every record
// to lines (when not nil).
type logBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	lines chan string
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines != nil {
		select {
		case l.lines <- string(p):
		default:
		}
	}
	return l.b.Write(p)
}

// waitLog waits for a log record containing s.
func (l *logBuffer) waitLog(t *testing.T, s string) {
	t.Helper()
	for line := range l.lines {
		if strings.Contains(line, s) {
			return
		}
	}
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// injectRaw writes one websocket frame holding raw, as the writer of mesh m's connection to
// peer with role would, straight to the socket (the test keeps the writer idle).
func injectRaw(m *Mesh, peer int, role Role, op byte, fin bool, raw []byte) error {
	c := m.peers[peer].conns[role].Load()
	w := &wire{nc: c.w.nc, masks: c.w.masks, wbuf: make([]byte, 0, maxWSHeader+len(raw))} // one write
	if err := w.writeFrame(op, fin, len(raw), nil, false, raw); err != nil {
		return err
	}
	return w.flush()
}

// A message that breaks the framing rules ends its connection: the peer is lost with a
// *FrameError that names the sender and the reason, and nothing of it reaches the sink.
func TestBadMessagesLoseThePeer(t *testing.T) {
	hdr := func(h Header) []byte { return appendHeader(nil, &h) }
	type frame struct {
		op  byte
		fin bool
		raw []byte
	}
	one := func(raw []byte) []frame { return []frame{{opBinary, true, raw}} }
	cases := []struct {
		name   string
		frames []frame
		want   error
	}{
		{"truncated", one(append(hdr(Header{Type: TypeUser, Len: 64}), make([]byte, 10)...)), ErrFrameTruncated},
		{"trailing", one(append(hdr(Header{Type: TypeUser, Len: 64}), make([]byte, 70)...)), ErrTrailingBytes},
		{"oversized frame", one(append(hdr(Header{Type: TypeUser, Len: 2 * maxFrame}), make([]byte, maxFrame)...)), ErrFrameTooLarge},
		{"no destination for a huge payload", []frame{{opBinary, false, hdr(Header{Type: TypeUser + 1, Len: maxScratch + 1})}}, ErrFrameTooLarge},
		{"fragment longer than announced", []frame{
			{opBinary, false, append(hdr(Header{Type: TypeUser, Len: 64}), make([]byte, 32)...)},
			{opContinuation, true, make([]byte, 40)}}, ErrTrailingBytes},
		{"last fragment short", []frame{
			{opBinary, false, append(hdr(Header{Type: TypeUser, Len: 64}), make([]byte, 32)...)},
			{opContinuation, true, make([]byte, 8)}}, ErrFrameTruncated},
		{"new message inside a message", []frame{
			{opBinary, false, append(hdr(Header{Type: TypeUser, Len: 64}), make([]byte, 32)...)},
			{opBinary, true, make([]byte, 32)}}, ErrFragment},
		{"unknown mesh type", one(hdr(Header{Type: TypeInvalid})), ErrUnknownType},
		{"auth type after handshake", one(hdr(Header{Type: TypeAuthHello})), ErrUnknownType},
		{"mesh type with payload", one(append(hdr(Header{Type: TypeHeartbeat, Len: 1}), 0)), ErrTrailingBytes},
		{"malformed header", one([]byte("hello, world")), ErrBadHeader},
		{"empty message", one(nil), ErrBadHeader},
		{"text message", []frame{{0x1, true, hdr(Header{Type: TypeUser})}}, ErrNotBinary},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sh := &sinkHandler{recorder: *newRecorder(), mirror: bytes.Repeat([]byte{0xaa}, 64)}
			meshes, recs := startMeshes(t, 2, func(rank int, c *Config) {
				c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour // writers stay idle
				if rank == 1 {
					c.Handler = sh
				}
			})
			for _, f := range tc.frames {
				// The receiver may close as soon as it has seen enough: a write that fails
				// then is part of the test, its verdict below is what counts.
				injectRaw(meshes[0], 1, Owner, f.op, f.fin, f.raw)
			}
			err := <-sh.lost
			var fe *FrameError
			var pl *PeerLostError
			if !errors.Is(err, tc.want) || !errors.As(err, &fe) || fe.Rank != 0 || !errors.As(err, &pl) || pl.Rank != 0 {
				t.Errorf("lost with %v, want a FrameError from rank 0 wrapping %v", err, tc.want)
			}
			// A message rejected on its first frame never touches the sink (one rejected
			// on a later fragment ends the connection mid-payload).
			if len(tc.frames) == 1 && !bytes.Equal(sh.mirror, bytes.Repeat([]byte{0xaa}, 64)) {
				t.Error("a rejected message wrote into the sink")
			}
			if err := <-recs[0].lost; !errors.Is(err, ErrPeerLost) {
				t.Errorf("rank 0: %v", err)
			}
		})
	}
	meshes, _ := startMeshes(t, 2, nil)
	if err := meshes[0].Send(1, Owner, Header{Type: 3}, nil); err == nil {
		t.Error("Send of a reserved type succeeded")
	}
}

// sinkHandler reads payloads into a fixed mirror buffer, or refuses those of type
// TypeUser+1.
type sinkHandler struct {
	recorder
	mirror []byte
}

func (s *sinkHandler) Sink(from int, h *Header) ([]byte, error) {
	if h.Type == TypeUser+1 {
		return nil, nil
	}
	if uint64(len(s.mirror)) < h.Len {
		return nil, fmt.Errorf("a message of %d bytes for a mirror of %d", h.Len, len(s.mirror))
	}
	return s.mirror, nil
}

func TestSinkReceivesPayload(t *testing.T) {
	const big = 3*fragmentSize + 5
	sh := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, big)}
	got := make(chan []byte, 1)
	sh.onRecv = func(from int, h *Header, p []byte) { got <- p }
	meshes, recs := startMeshes(t, 2, func(rank int, c *Config) {
		if rank == 1 {
			c.Handler = sh
		}
	})
	for _, size := range []int{1, 8, headerSize, 1000, fragmentSize - headerSize, fragmentSize, fragmentSize + 1, big} {
		p := make([]byte, size)
		for i := range p {
			p[i] = byte(i*7 + size)
		}
		role := []Role{Owner, Requester}[size%2] // unmasked and masked
		if err := meshes[0].Send(1, role, Header{Type: TypeUser}, p); err != nil {
			t.Fatal(err)
		}
		q := <-got
		if &q[0] != &sh.mirror[0] || !bytes.Equal(q, p) {
			t.Fatalf("size %d, %s role: payload not delivered into the sink intact", size, role)
		}
		// Rank 1 is done with its mirror: it says so, as a real receiver
		// does, before rank 0 sends into it again (the happens-before edge
		// of Send's contract, which the race detector sees).
		if err := meshes[1].Send(0, Requester, Header{Type: TypeUser}, nil); err != nil {
			t.Fatal(err)
		}
		<-recs[0].frames
	}
}

// A peer whose sockets vanish without a goodbye is reported lost; Send and
// Barrier then fail with a PeerLostError naming it.
func TestPeerLostOnConnectionLoss(t *testing.T) {
	meshes, recs := startMeshes(t, 3, nil)
	crash(meshes[2])
	for _, r := range recs[:2] {
		err := <-r.lost
		var pl *PeerLostError
		if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pl) || pl.Rank != 2 || errors.Is(err, ErrPeerClosed) {
			t.Fatalf("PeerLost error %v", err)
		}
	}
	if err := meshes[0].Send(2, Requester, Header{Type: TypeUser}, nil); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("Send to lost peer: %v", err)
	}
	if err := meshes[1].Barrier(context.Background()); !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 2") {
		t.Fatalf("Barrier: %v", err)
	}
	for _, r := range recs[:2] {
		select {
		case err := <-r.lost:
			t.Fatalf("second PeerLost: %v", err)
		default:
		}
	}
}

// crash simulates a process that disappears: sockets closed, no goodbye,
// no callbacks on its side.
func crash(m *Mesh) {
	m.closing.Store(true)
	m.eachConn((*conn).shutdown)
}

// A clean Close is seen by the others as ErrPeerClosed; closing everything
// leaves no goroutine behind (TestMain checks).
func TestCloseAfterBarrier(t *testing.T) {
	meshes, recs := startMeshes(t, 3, nil)
	var wg sync.WaitGroup
	for _, m := range meshes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Barrier(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	meshes[2].Close()
	for _, r := range recs[:2] {
		if err := <-r.lost; !errors.Is(err, ErrPeerClosed) || !errors.Is(err, ErrPeerLost) {
			t.Fatalf("after clean close: %v", err)
		}
	}
	closeAll(meshes[:2])
	if err := meshes[0].Send(1, Owner, Header{Type: TypeUser}, nil); err == nil {
		t.Fatal("Send after Close succeeded")
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	sh := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, 1<<20)}
	got := make(chan struct{}, 1)
	sh.onRecv = func(from int, h *Header, p []byte) { got <- struct{}{} }
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Heartbeat = time.Hour
		c.PeerTimeout = 2 * time.Hour
		if rank == 1 {
			c.Handler = sh
		}
	})
	for _, size := range []int{8, 1 << 20} {
		for _, role := range []Role{Requester, Owner} {
			p := make([]byte, size)
			h := Header{Type: TypeUser, Key: 1}
			allocs := testing.AllocsPerRun(max(20, 4<<20/(size+1<<14)), func() {
				meshes[0].Send(1, role, h, p)
				<-got
			})
			t.Logf("%s role, %d-byte payload: %.1f allocs per message (sender + receiver)", role, size, allocs)
			if allocs != 0 {
				t.Errorf("%s role, %d bytes: %.1f allocs per message, want 0", role, size, allocs)
			}
		}
	}
}

// Every process passes a final barrier and closes at once, as Run does at
// the end of a job: no barrier fails because a peer closes early.
func TestFinalBarrierThenClose(t *testing.T) {
	for round := 0; round < 5; round++ {
		meshes, _ := startMeshes(t, 3, nil)
		var wg sync.WaitGroup
		for _, m := range meshes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.Barrier(context.Background()); err != nil {
					t.Errorf("round %d, rank %d: %v", round, m.Rank(), err)
				}
				m.Close()
			}()
		}
		wg.Wait()
	}
}

// receivingHandler records whether its mesh said it was receiving when a payload's
// destination was asked for, and after the message was delivered.
type receivingHandler struct {
	sinkHandler
	mesh               *Mesh
	during, afterwards chan bool
}

func (r *receivingHandler) Sink(from int, h *Header) ([]byte, error) {
	r.during <- r.mesh.Receiving()
	return r.sinkHandler.Sink(from, h)
}

func (r *receivingHandler) Handle(from int, h *Header, p []byte) {
	r.afterwards <- r.mesh.Receiving()
}

// Receiving reports a message whose payload is still arriving (a write-back of a large
// location over a slow link), so that a process whose tasks all wait is not taken for
// stuck while data moves towards it; and not once the message is delivered.
func TestReceivingWhilePayloadArrives(t *testing.T) {
	rh := &receivingHandler{sinkHandler: sinkHandler{recorder: *newRecorder(), mirror: make([]byte, 2*fragmentSize)},
		during: make(chan bool, 1), afterwards: make(chan bool, 1)}
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		if rank == 1 {
			c.Handler = rh
		}
	})
	rh.mesh = meshes[1]
	if meshes[1].Receiving() {
		t.Fatal("Receiving before any message")
	}
	if err := meshes[0].Send(1, Owner, Header{Type: TypeUser}, make([]byte, 2*fragmentSize)); err != nil {
		t.Fatal(err)
	}
	if !<-rh.during {
		t.Error("Receiving is false while the payload of a message arrives")
	}
	if <-rh.afterwards {
		t.Error("Receiving is still true when the message is delivered")
	}
}

// TestSendAheadLeavesWithTheNextMessage: a message sent ahead waits in its connection's queue,
// without waking the writer, until the caller's next message on the connection, or, through
// shared memory, is in the ring already (TestSendAheadWritesInPlaceAndFlushWakes), and the
// two arrive in order.
func TestSendAheadLeavesWithTheNextMessage(t *testing.T) {
	for _, shm := range []bool{false, true} {
		t.Run(map[bool]string{false: "socket", true: "shared memory"}[shm], func(t *testing.T) { sendAheadThenNext(t, shm) })
	}
}

func sendAheadThenNext(t *testing.T, shm bool) {
	meshes, recs := startMeshes(t, 2, func(_ int, c *Config) {
		c.Heartbeat, c.PeerTimeout, c.NoSharedMemory = time.Hour, 2*time.Hour, !shm
	})
	c := meshes[0].peers[1].conns[Requester].Load()
	if (c.shm != nil) != shm {
		t.Fatalf("through shared memory: %v, want %v", c.shm != nil, shm)
	}
	want := 1 // queued
	if shm {
		want = 0 // in the ring
	}
	for round := range 3 {
		for { // the writer goroutine is done with the last round's (an idle connection)
			c.mu.Lock()
			idle := !c.writing
			c.mu.Unlock()
			if idle {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		first := Header{Type: TypeUser, Arg: int64(2 * round)}
		if err := meshes[0].SendAhead(1, Requester, first, []byte("ahead")); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		queued, woken := len(c.q), len(c.wake)
		c.mu.Unlock()
		if queued != want || woken != 0 {
			t.Fatalf("round %d: after SendAhead, %d messages queued and %d wake-ups pending, want %d and 0", round, queued, woken, want)
		}
		send := meshes[0].SendNow
		if round == 1 {
			send = meshes[0].Send // the writer goroutine takes both
		}
		if err := send(1, Requester, Header{Type: TypeUser, Arg: int64(2*round + 1)}, []byte("next")); err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{"ahead", "next"} {
			f := <-recs[1].frames
			if string(f.p) != want || f.h.Arg != int64(2*round+i) {
				t.Fatalf("round %d: got message %d %q, want %d %q", round, f.h.Arg, f.p, 2*round+i, want)
			}
		}
	}
}

// A peer that closed its mesh is gone once its goodbye came on both connections, so that
// what it sent before, on either one, is delivered; a peer that stays is not gone.
func TestGoneAfterGoodbyeOnBothConnections(t *testing.T) {
	meshes, recs := startMeshes(t, 2, func(rank int, c *Config) { c.PeerTimeout = 300 * time.Millisecond })
	if awaitGone(meshes[0], 1) {
		t.Fatal("rank 1 taken for gone while it is there")
	}
	if err := meshes[1].Send(0, Requester, Header{Type: TypeUser, ID: 7}, []byte("why")); err != nil {
		t.Fatal(err)
	}
	meshes[1].Close()
	if !awaitGone(meshes[0], 1) {
		t.Fatal("rank 1 closed its mesh and is not gone")
	}
	select {
	case f := <-recs[0].frames:
		if f.h.ID != 7 || string(f.p) != "why" {
			t.Fatalf("got %+v, want rank 1's message", f)
		}
	default:
		t.Fatal("rank 1 gone before its message was delivered")
	}
}

// A lost peer is named alike whoever reports it first, the mesh's Handler.PeerLost or a
// send that found the peer gone, wrapped by what failed: "process rank N lost".
func TestPeerLostErrorNamesTheProcess(t *testing.T) {
	err := fmt.Errorf("task 1: release of read handle: %w", &PeerLostError{Rank: 2, Err: io.EOF})
	if !strings.Contains(err.Error(), "process rank 2 lost: EOF") || !errors.Is(err, ErrPeerLost) {
		t.Fatalf("a send's error for a lost peer: %v", err)
	}
}
