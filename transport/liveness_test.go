package transport

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// A peer that is sending is alive: a message whose payload takes several peer timeouts to
// arrive (a slow link) does not lose its sender, and arrives whole.
func TestSlowPayloadIsProgress(t *testing.T) {
	const size = 64 << 10
	sh, got := userSink(size)
	meshes, recs := startMeshes(t, 2, func(rank int, c *Config) {
		c.Heartbeat, c.PeerTimeout = 50*time.Millisecond, 300*time.Millisecond
		if rank == 0 {
			// Rank 0's writers stay idle: on the connection that carries the payload it
			// sends nothing else, and the test keeps its other connection busy.
			c.Heartbeat = time.Hour
		}
		if rank == 1 {
			c.Handler = sh
		}
	})
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 5)
	}
	// One message in 20 frames over about 1s: each frame is short, the message is long.
	h := Header{Type: TypeUser, Len: size}
	piece := size / 20
	pace := time.NewTicker(50 * time.Millisecond)
	defer pace.Stop()
	for k := 0; k < 20; k++ {
		var raw []byte
		op := byte(opContinuation)
		if k == 0 {
			op, raw = opBinary, appendHeader(nil, &h)
		}
		end := (k + 1) * piece
		if k == 19 {
			end = size
		}
		raw = append(raw, payload[k*piece:end]...)
		if err := injectRaw(meshes[0], 1, Owner, op, k == 19, raw); err != nil {
			t.Fatal(err)
		}
		if err := meshes[0].Send(1, Requester, Header{Type: TypeUser + 2}, nil); err != nil {
			t.Fatal(err)
		}
		<-pace.C
	}
	arrivesWhole(t, got, payload, sh.lost, recs[0].lost)
}

// A process that was paused itself (a late beat) does not blame its peers for the silence:
// they get a new timeout from the moment it resumed, and are lost only when that ends too.
func TestOwnPauseIsNotBlamed(t *testing.T) {
	meshes, recs := startMeshes(t, 2, func(rank int, c *Config) {
		c.Heartbeat, c.PeerTimeout = 400*time.Millisecond, time.Second // and beats by hand, ahead of the clock
	})
	m := meshes[0]
	now := m.now()
	paused := now + int64(5*time.Second) // rank 1 has been silent for 5s: we were stopped
	m.beat(paused, now)
	m.beat(paused+int64(500*time.Millisecond), paused)
	select {
	case err := <-recs[0].lost:
		t.Fatalf("a peer was blamed for this process's pause: %v", err)
	default:
	}
	m.beat(paused+int64(1500*time.Millisecond), paused+int64(1000*time.Millisecond))
	err := <-recs[0].lost
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "peer timeout 1s") {
		t.Fatalf("a peer silent past the new timeout: %v", err)
	}
	// This process was paused longer than the timeout: its losses say so.
	if !strings.Contains(err.Error(), "rank 0, was itself paused for 5s") {
		t.Errorf("the loss does not mention this process's own pause: %v", err)
	}
}

// The time a process takes to make room for a message (its Handler's Sink: mapping and
// populating a mirror of gigabytes) is its own, not its peer's silence: a Sink that takes
// several peer timeouts loses nobody, and the message arrives whole.
func TestSlowSinkIsNotThePeersSilence(t *testing.T) {
	const size = 64 << 10
	user, got := userSink(size)
	sh := &slowSink{sinkHandler: *user, delay: time.Second}
	meshes, recs := startMeshes(t, 2, func(rank int, c *Config) {
		c.Heartbeat, c.PeerTimeout = 50*time.Millisecond, 300*time.Millisecond
		if rank == 1 {
			c.Handler = sh
		}
	})
	payload := bytes.Repeat([]byte{7}, size)
	if err := meshes[0].Send(1, Owner, Header{Type: TypeUser}, payload); err != nil {
		t.Fatal(err)
	}
	arrivesWhole(t, got, payload, sh.lost, recs[0].lost)
}

// arrivesWhole fails t unless want arrives on got, byte for byte, within a minute, while
// neither rank 1 (its lost channel, receiverLost) nor rank 0 (senderLost) loses its peer.
func arrivesWhole(t *testing.T, got <-chan []byte, want []byte, receiverLost, senderLost <-chan error) {
	t.Helper()
	select {
	case p := <-got:
		if !bytes.Equal(p, want) {
			t.Fatal("the message arrived damaged")
		}
	case err := <-receiverLost:
		t.Fatalf("rank 1 lost rank 0: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the message has not come")
	}
	select {
	case err := <-senderLost:
		t.Fatalf("rank 0 lost rank 1: %v", err)
	default:
	}
}

// slowSink is a sinkHandler whose Sink takes delay for a message of type TypeUser.
type slowSink struct {
	sinkHandler
	delay time.Duration
}

func (s *slowSink) Sink(from int, h *Header) ([]byte, error) {
	if h.Type == TypeUser {
		time.Sleep(s.delay)
	}
	return s.sinkHandler.Sink(from, h)
}

// userSink returns a sinkHandler with a mirror of size bytes, and the channel that the
// payloads of its messages of type TypeUser come out on.
func userSink(size int) (*sinkHandler, <-chan []byte) {
	sh := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, size)}
	got := make(chan []byte, 1)
	sh.onRecv = func(from int, h *Header, p []byte) {
		if h.Type == TypeUser {
			got <- bytes.Clone(p)
		}
	}
	return sh, got
}

// awaitGone waits, a peer timeout at most, until rank is lost or has closed its mesh (its
// goodbye read on both connections), and reports whether it is gone.
func awaitGone(m *Mesh, rank int) bool {
	t := time.NewTimer(m.cfg.PeerTimeout)
	defer t.Stop()
	select {
	case <-m.peers[rank].gone:
		return true
	case <-t.C:
		return false
	}
}
