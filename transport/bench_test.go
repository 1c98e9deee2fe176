package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// Benchmarks compare the mesh with raw TCP between two endpoints of this
// process over loopback sockets:
//
//	go test -run '^$' -bench . -benchtime 2s ./transport/

const blockSize = 8 << 20

// pairMesh starts a two-process job whose rank 1 reads payloads into a
// mirror and calls recv for every frame.
func pairMesh(b *testing.B, mirror int, recv func(from int, h *Header, p []byte)) []*Mesh {
	sh := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, mirror)}
	sh.onRecv = recv
	meshes, _ := startMeshes(b, 2, func(rank int, c *Config) {
		if rank == 1 {
			c.Handler = sh
		}
	})
	return meshes
}

// streamMesh sends b.N payloads from rank 0 to rank 1 with the given role,
// at most window in flight.
func streamMesh(b *testing.B, role Role, size int) {
	const window = 4
	credits := make(chan struct{}, window)
	meshes := pairMesh(b, size, func(int, *Header, []byte) { credits <- struct{}{} })
	payload := make([]byte, size)
	for range window {
		credits <- struct{}{}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-credits
		if err := meshes[0].Send(1, role, Header{Type: TypeUser, Seq: uint64(i)}, payload); err != nil {
			b.Fatal(err)
		}
	}
	for range window {
		<-credits
	}
}

// BenchmarkStream8MiB: bulk data as grants travel (Owner role, unmasked)
// against a raw TCP stream of the same blocks.
func BenchmarkStream8MiB(b *testing.B) {
	b.Run("mesh-owner", func(b *testing.B) { streamMesh(b, Owner, blockSize) })
	b.Run("tcp", func(b *testing.B) { streamTCP(b, blockSize) })
}

// BenchmarkMasking justifies the topology: the same stream dialer->acceptor
// (Requester role, masked by the client) and acceptor->dialer (Owner role).
func BenchmarkMasking(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, blockSize} {
		b.Run(fmt.Sprintf("masked-dialer-%dKiB", size>>10), func(b *testing.B) { streamMesh(b, Requester, size) })
		b.Run(fmt.Sprintf("unmasked-acceptor-%dKiB", size>>10), func(b *testing.B) { streamMesh(b, Owner, size) })
	}
}

func tcpPair(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	a := <-acc
	b.Cleanup(func() { d.Close(); a.Close() })
	return a, d
}

func streamTCP(b *testing.B, size int) {
	src, dst := tcpPair(b)
	payload := make([]byte, size)
	mirror := make([]byte, size)
	done := make(chan error, 1)
	n := b.N
	go func() {
		for i := 0; i < n; i++ {
			if _, err := io.ReadFull(dst, mirror); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < n; i++ {
		if _, err := src.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPingPong8B: strict alternation of 8-byte messages, rank 0 sends
// a request (Requester role), rank 1 answers with a grant (Owner role);
// one op is a round trip. Against a raw TCP ping-pong.
func BenchmarkPingPong8B(b *testing.B) {
	b.Run("mesh", func(b *testing.B) {
		pong := make(chan struct{}, 1)
		r0 := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, 8)}
		r0.onRecv = func(int, *Header, []byte) { pong <- struct{}{} }
		var meshes []*Mesh
		r1 := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, 8)}
		answer := make([]byte, 8)
		r1.onRecv = func(from int, h *Header, p []byte) {
			binary.LittleEndian.PutUint64(answer, h.Seq)
			meshes[1].Send(0, Owner, Header{Type: TypeUser + 1, Seq: h.Seq}, answer)
		}
		meshes, _ = startMeshes(b, 2, func(rank int, c *Config) {
			c.Handler = []Handler{r0, r1}[rank]
		})
		req := make([]byte, 8)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := meshes[0].Send(1, Requester, Header{Type: TypeUser, Seq: uint64(i)}, req); err != nil {
				b.Fatal(err)
			}
			<-pong
		}
	})
	b.Run("tcp", func(b *testing.B) {
		a, d := tcpPair(b)
		n := b.N
		go func() {
			buf := make([]byte, 8)
			for i := 0; i < n; i++ {
				if _, err := io.ReadFull(a, buf); err != nil {
					return
				}
				a.Write(buf)
			}
		}()
		buf := make([]byte, 8)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < n; i++ {
			d.Write(buf)
			if _, err := io.ReadFull(d, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// loopConn serves the same bytes again and again, one copy per Read.
type loopConn struct {
	net.Conn
	b   []byte
	off int
}

func (l *loopConn) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

// BenchmarkReadSmallMessage: what a connection's reader spends on one message of 8 payload
// bytes that arrives alone, masked (from the dialer, over a socket) or not.
func BenchmarkReadSmallMessage(b *testing.B) {
	for _, masked := range []bool{false, true} {
		b.Run(map[bool]string{false: "unmasked", true: "masked"}[masked], func(b *testing.B) {
			src := newWire(nil, masked)
			src.wbuf = make([]byte, 0, 1<<10)
			h := Header{Type: TypeUser, Len: 8}
			src.writeFrame(opBinary, true, headerSize+8, &h, true, make([]byte, 8))
			w := newWire(&loopConn{b: src.wbuf}, !masked)
			w.grow(func(r io.Reader) io.Reader { return r })
			buf := make([]byte, 8)
			dest := func(*Header) ([]byte, error) { return buf, nil }
			var rh Header
			for b.Loop() {
				if _, err := w.readMessage(&rh, dest); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShmRoundTrip8B: what the layering costs a round trip of 8-byte messages through
// shared memory, with no core between the two ends: one goroutine sends a request from rank
// 0, reads it in rank 1 (Poll), answers it with a grant and reads the answer in rank 0, as
// two tasks that wait in Poll would on a host their processes oversubscribe. Each message
// goes as package orwl sends its grants and releases (SendAhead, then Flush on the task), or
// with SendNow.
func BenchmarkShmRoundTrip8B(b *testing.B) {
	b.Run("ahead-flush", func(b *testing.B) {
		shmRoundTrip(b, func(m *Mesh, to int, role Role, h Header, p []byte) error {
			if err := m.SendAhead(to, role, h, p); err != nil {
				return err
			}
			return m.Flush(to, role, true)
		})
	})
	b.Run("now", func(b *testing.B) { shmRoundTrip(b, (*Mesh).SendNow) })
}

func shmRoundTrip(b *testing.B, send func(m *Mesh, to int, role Role, h Header, p []byte) error) {
	var got [2]int
	hs := [2]*sinkHandler{}
	for r := range hs {
		hs[r] = &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, 8)}
		hs[r].onRecv = func(int, *Header, []byte) { got[r]++ }
	}
	meshes, _ := startMeshes(b, 2, func(rank int, c *Config) {
		c.Handler, c.Spin, c.Oversubscribed = hs[rank], time.Second, true
	})
	msg := make([]byte, 8)
	for r, m := range meshes {
		if m.onRings.Load() == nil {
			b.Fatalf("rank %d: no connection through shared memory", r)
		}
		conns := *m.onRings.Load()
		for _, c := range conns {
			c.shm.in.h.polling.Add(1)
		}
		defer leaveRings(conns)
	}
	p0, p1 := meshes[0].Poller(), meshes[1].Poller()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := send(meshes[0], 1, Requester, Header{Type: TypeUser, Seq: uint64(i)}, msg); err != nil {
			b.Fatal(err)
		}
		p1.Poll(func() bool { return got[1] > i }, nil)
		if err := send(meshes[1], 0, Owner, Header{Type: TypeUser, Seq: uint64(i)}, msg); err != nil {
			b.Fatal(err)
		}
		p0.Poll(func() bool { return got[0] > i }, nil)
	}
}
