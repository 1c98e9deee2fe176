package transport

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFinal waits until m has received from's final marker.
func waitFinal(m *Mesh, from int) {
	m.awaitMarks(context.Background(), func() (bool, error) { return m.peers[from].final, nil })
}

// FinalBarrier is an agreement: it returns nil only when every peer finished without
// failure, and then what they sent before their FinalBarrier was delivered; a peer that
// crashes after its marker has finished.
func TestFinalBarrierAgreement(t *testing.T) {
	meshes, recs := startMeshes(t, 3, nil)
	ctx := context.Background()
	done0 := make(chan error, 1)
	go func() { done0 <- meshes[0].FinalBarrier(ctx, false) }()
	waitFinal(meshes[1], 0)
	select {
	case err := <-done0:
		t.Fatalf("rank 0 left its final barrier (%v) before the others entered it", err)
	default:
	}
	if err := meshes[1].Send(0, Requester, Header{Type: TypeUser}, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, m := range meshes[1:] {
		go func() { errs <- m.FinalBarrier(ctx, false) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done0; err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-recs[0].frames:
		if string(f.p) != "last words" {
			t.Fatalf("got %q", f.p)
		}
	default:
		t.Fatal("a message sent before FinalBarrier was not delivered when it returned")
	}
	crash(meshes[2]) // after its marker: finished, not lost
	// Again: at once. Barrier: refused.
	if err := meshes[0].FinalBarrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := meshes[0].Barrier(ctx); err == nil {
		t.Fatal("Barrier after FinalBarrier succeeded")
	}
	closeAll(meshes[:2])
	for _, r := range recs[:2] {
		select {
		case err := <-r.lost:
			t.Fatalf("a peer that finished was reported lost: %v", err)
		default:
		}
	}
	if err := meshes[0].FinalBarrier(ctx, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("FinalBarrier after Close: %v", err)
	}
}

// A process that cannot confirm the end of the job gets an error naming the rank: one that
// was lost before its marker, or one that reported its failure (which returns at once).
func TestFinalBarrierCannotConfirm(t *testing.T) {
	meshes, recs := startMeshes(t, 3, nil)
	ctx := context.Background()
	crash(meshes[2])
	<-recs[0].lost
	err := meshes[0].FinalBarrier(ctx, false)
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 2 cannot confirm") {
		t.Fatalf("rank 0 with rank 2 lost: %v", err)
	}
	if err := meshes[1].FinalBarrier(ctx, true); err != nil {
		t.Fatalf("a failed process's FinalBarrier: %v", err)
	}

	meshes, _ = startMeshes(t, 2, nil)
	go meshes[1].FinalBarrier(ctx, true)
	err = meshes[0].FinalBarrier(ctx, false)
	if !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), "rank 1") || errors.Is(err, ErrPeerLost) {
		t.Fatalf("rank 0 with rank 1 failed: %v", err)
	}
}

// A Barrier that a peer will not reach, because it entered FinalBarrier,
// fails with ErrPeerFinished; the process then passes its own FinalBarrier.
func TestBarrierFailsWhenPeerFinished(t *testing.T) {
	meshes, recs := startMeshes(t, 2, nil)
	ctx := context.Background()
	done0 := make(chan error, 1)
	go func() { done0 <- meshes[0].FinalBarrier(ctx, false) }()
	err := meshes[1].Barrier(ctx)
	if !errors.Is(err, ErrPeerFinished) || !strings.Contains(err.Error(), "rank 0") || errors.Is(err, ErrPeerLost) {
		t.Fatalf("Barrier: %v", err)
	}
	if err := meshes[1].FinalBarrier(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := <-done0; err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		select {
		case err := <-r.lost:
			t.Fatalf("PeerLost: %v", err)
		default:
		}
	}
}

// FinalBarrier gives up with ctx; a peer that never comes is waited for.
func TestFinalBarrierContext(t *testing.T) {
	meshes, _ := startMeshes(t, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := meshes[0].FinalBarrier(ctx, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("FinalBarrier: %v", err)
	}
	single, err := Start(context.Background(), Config{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if err := single.FinalBarrier(ctx, false); err != nil {
		t.Fatalf("FinalBarrier of one process: %v", err)
	}
}

// Send on a connection the peer closed (its goodbye on the other connection
// not read yet) says the peer is lost, closing: not ErrClosed.
func TestSendToClosingPeer(t *testing.T) {
	inHandle, unblock := make(chan struct{}), make(chan struct{})
	r0 := newRecorder()
	r0.onRecv = func(int, *Header, []byte) {
		close(inHandle)
		<-unblock
	}
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour
		if rank == 0 {
			c.Handler = r0
		}
	})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before the meshes' cleanup, even when the test fails
	// Rank 1's Requester-role frame holds up the reader of rank 0's Owner
	// connection, so rank 0 reads rank 1's goodbye on the other one only.
	if err := meshes[1].Send(0, Requester, Header{Type: TypeUser}, nil); err != nil {
		t.Fatal(err)
	}
	<-inHandle
	closed := make(chan struct{})
	go func() { meshes[1].Close(); close(closed) }()
	<-meshes[0].peers[1].conns[Requester].Load().stop
	err := meshes[0].Send(1, Requester, Header{Type: TypeUser}, nil)
	var pl *PeerLostError
	if !errors.As(err, &pl) || pl.Rank != 1 || !errors.Is(err, ErrPeerClosed) || errors.Is(err, ErrClosed) {
		t.Fatalf("Send to a closing peer: %v", err)
	}
	release()
	if err := <-r0.lost; !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("PeerLost: %v", err)
	}
	<-closed
	if err := meshes[0].Send(1, Owner, Header{Type: TypeUser}, nil); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("Send to a closed peer: %v", err)
	}
}

// Sends racing with the peer's Close fail with ErrPeerLost only; after this
// process's own Close, Send fails with ErrClosed.
func TestSendErrorsAroundClose(t *testing.T) {
	for round := 0; round < 5; round++ {
		meshes, recs := startMeshes(t, 3, nil)
		for _, r := range recs {
			r.onRecv = func(int, *Header, []byte) {}
		}
		go meshes[2].Close()
		for _, role := range []Role{Requester, Owner} {
			for {
				err := meshes[0].Send(2, role, Header{Type: TypeUser}, []byte("x"))
				if err == nil {
					continue
				}
				if !errors.Is(err, ErrPeerLost) || errors.Is(err, ErrClosed) {
					t.Fatalf("round %d: Send to a peer closing: %v", round, err)
				}
				break
			}
		}
		meshes[0].Close()
		if err := meshes[0].Send(1, Requester, Header{Type: TypeUser}, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Send after Close: %v", err)
		}
		closeAll(meshes)
	}
}

// answerer answers every TypeUser frame with an Owner-role frame, which
// travels on the other connection of the pair.
type answerer struct {
	recorder
	m atomic.Pointer[Mesh]
}

func (a *answerer) Handle(from int, h *Header, p []byte) {
	if h.Type == TypeUser {
		a.m.Load().Send(from, Owner, Header{Type: TypeUser, Arg: h.Arg}, nil)
	}
}

// The payload of a message that the peer answered may be modified once the
// answer is delivered: the race detector sees the edge through the network
// (without it, go test -race reports the writer's copy of the payload). The
// small payload shares its writev with a large one, so no write(2), which the
// race detector counts as a release, follows its copy.
func TestSendHappensBeforeAnswer(t *testing.T) {
	a := &answerer{recorder: *newRecorder()}
	answers := make(chan int64, 1)
	r0 := newRecorder()
	r0.onRecv = func(from int, h *Header, p []byte) { answers <- h.Arg }
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour
		c.Handler = r0
		if rank == 1 {
			c.Handler = a
		}
	})
	a.m.Store(meshes[1])
	small, large := make([]byte, 100), make([]byte, directLimit) // both fit in the output buffer
	c := meshes[0].peers[1].conns[Owner].Load()
	for i := range int64(20) {
		for k := range small {
			small[k] = byte(i) // the owner modifies its data after the answer
		}
		c.mu.Lock() // one batch: the writer copies small, then writes both with writev
		c.q = append(c.q,
			outMsg{h: Header{Type: TypeUser, Arg: i, Len: uint64(len(small))}, p: small},
			outMsg{h: Header{Type: TypeUser + 1, Len: uint64(len(large))}, p: large})
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		if got := <-answers; got != i {
			t.Fatalf("answer %d, want %d", got, i)
		}
	}
}

// A clean close at the end of a job and a loss are both logged at Debug level only: a loss
// reaches the user once, through the handler's PeerLost (the job's error), not a log line too.
func TestCloseLogLevels(t *testing.T) {
	var logs logBuffer
	meshes, recs := startMeshes(t, 3, func(rank int, c *Config) {
		if rank == 0 {
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	meshes[2].Close()
	<-recs[0].lost
	crash(meshes[1])
	<-recs[0].lost
	var closedLine, lostLine string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "peer closed its mesh"):
			closedLine = line
		case strings.Contains(line, "peer lost"):
			lostLine = line
		}
	}
	if !strings.Contains(closedLine, "level=DEBUG") || !strings.Contains(closedLine, "peer=2") {
		t.Errorf("clean close logged as %q", closedLine)
	}
	if !strings.Contains(lostLine, "level=DEBUG") || !strings.Contains(lostLine, "peer=1") {
		t.Errorf("loss logged as %q", lostLine)
	}
}

// A peer that crashes after its final marker but before this process's agreement ends is
// lost: it is reported (PeerLost), and FinalBarrier fails naming it; it never heard that
// the job succeeded. A peer that closes cleanly meanwhile has agreed, and is not lost.
func TestFinalBarrierPeerCrashesAfterItsMarker(t *testing.T) {
	meshes, recs := startMeshes(t, 3, nil)
	ctx := context.Background()
	if err := meshes[2].Connect(ctx, []int{0, 1}); err != nil { // rank 1 is not its neighbour in the tree
		t.Fatal(err)
	}
	go meshes[2].FinalBarrier(ctx, false)
	waitFinal(meshes[0], 2)
	waitFinal(meshes[1], 2)
	crash(meshes[2])
	for rank, r := range recs[:2] {
		select {
		case err := <-r.lost:
			var pl *PeerLostError
			if !errors.As(err, &pl) || pl.Rank != 2 {
				t.Fatalf("rank %d: PeerLost %v, want rank 2", rank, err)
			}
		case <-time.After(10 * time.Second): // a bound on a failure, not a wait
			t.Fatalf("rank %d: rank 2 crashed after its final marker and is not reported lost", rank)
		}
	}
	errs := make(chan error, 2)
	for _, m := range meshes[:2] {
		go func() { errs <- m.FinalBarrier(ctx, false) }()
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 2") {
			t.Fatalf("FinalBarrier with rank 2 crashed after its marker: %v", err)
		}
	}
}

// A process that closes right after its FinalBarrier, while its peer looks quiet to it (a
// peer busy or slow, whose heartbeats have not come for two periods), still delivers its
// final marker and its goodbye: the peer's FinalBarrier succeeds. Close stops waiting for
// the goodbye of a quiet peer, not for its own to be written.
func TestCloseAfterFinalBarrierWithAQuietPeer(t *testing.T) {
	for round := range 10 {
		meshes, recs := startMeshes(t, 2, func(rank int, c *Config) {
			c.Heartbeat, c.PeerTimeout = time.Minute, time.Hour // no heartbeat during the test
		})
		ctx := context.Background()
		done0 := make(chan error, 1)
		go func() { done0 <- meshes[0].FinalBarrier(ctx, false) }()
		waitFinal(meshes[1], 0)
		for i := range meshes[1].peers[0].conns { // rank 0 has been quiet for an hour
			c := meshes[1].peers[0].conns[i].Load()
			c.seen.Store(c.received())
			c.lastRecv.Store(meshes[1].now() - int64(time.Hour))
		}
		if err := meshes[1].FinalBarrier(ctx, false); err != nil {
			t.Fatal(err)
		}
		meshes[1].Close()
		if err := <-done0; err != nil {
			t.Fatalf("round %d: rank 0's FinalBarrier, rank 1 closed after its own: %v", round, err)
		}
		select {
		case err := <-recs[0].lost:
			t.Fatalf("round %d: rank 1 reported lost: %v", round, err)
		default:
		}
		closeAll(meshes)
	}
}

// A process that closes after its FinalBarrier succeeded has finished, also for a peer
// that has not agreed yet and never had its final marker: rank 2 agrees, then sends to
// rank 3 (connections made after its final barrier), and closes while rank 3's release is
// held up at rank 1, its parent in the tree. Rank 3's FinalBarrier succeeds, and no process
// is told that rank 2 was lost.
func TestCloseAfterAgreementBeforeAPeerAgreed(t *testing.T) {
	meshes, recs := startMeshes(t, 4, nil) // the tree: 0 → 1, 2; 1 → 3
	ctx := context.Background()
	errs := make([]chan error, 4)
	final := func(r int) {
		errs[r] = make(chan error, 1)
		go func() { errs[r] <- meshes[r].FinalBarrier(ctx, false) }()
	}
	for _, r := range []int{0, 1, 3} {
		final(r)
	}
	held := meshes[1] // once it has passed its subtree's agreement up, the release stops there
	for {
		held.markMu.Lock()
		if held.coll.finalUp {
			break
		}
		held.markMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	release := sync.OnceFunc(held.markMu.Unlock)
	defer release()
	final(2)
	if err := <-errs[2]; err != nil {
		t.Fatal(err)
	}
	if err := meshes[2].Send(3, Requester, Header{Type: TypeUser}, []byte("after the end")); err != nil {
		t.Fatal(err)
	}
	<-recs[3].frames
	if err := meshes[3].Connect(ctx, []int{2}); err != nil {
		t.Fatal(err)
	}
	meshes[2].Close()
	if !awaitGone(meshes[3], 2) {
		t.Fatal("rank 2 closed its mesh, and rank 3 did not see it go")
	}
	release()
	for _, r := range []int{0, 1, 3} {
		if err := <-errs[r]; err != nil {
			t.Fatalf("rank %d: FinalBarrier, rank 2 closed after its own succeeded: %v", r, err)
		}
	}
	for rank, rec := range recs {
		select {
		case err := <-rec.lost:
			t.Fatalf("rank %d: rank 2 reported lost after it agreed: %v", rank, err)
		default:
		}
	}
}
