package transport

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

func TestMaskBytes(t *testing.T) {
	key := uint32(0x04030201)
	for n := 0; n < 80; n++ {
		for start := 0; start < 5; start++ {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(i * 31)
			}
			want := bytes.Clone(b)
			for i := range want {
				want[i] ^= byte(key >> (8 * ((start + i) & 3)))
			}
			// Mask in two pieces to exercise the offset.
			c := make([]byte, n)
			cut := n / 3
			maskCopy(key, maskCopy(key, start, c[:cut], b[:cut]), c[cut:], b[cut:])
			pos := maskBytes(key, start, b[:cut])
			maskBytes(key, pos, b[cut:])
			if !bytes.Equal(b, want) || !bytes.Equal(c, want) {
				t.Fatalf("n=%d start=%d: %x and %x, want %x", n, start, b, c, want)
			}
		}
	}
}

// The mesh's frames are standard websocket frames: gorilla reads what the
// wire writes, as client (masked) and as server, and the wire reads what
// gorilla writes.
func TestWireInteropWithGorilla(t *testing.T) {
	payloads := [][]byte{nil, []byte("x"), bytes.Repeat([]byte("ab"), 100), bytes.Repeat([]byte{7}, 70000), bytes.Repeat([]byte{9}, 200000)}
	for _, client := range []bool{true, false} {
		done := make(chan error, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			ws, err := upgrader.Upgrade(rw, r, nil)
			if err != nil {
				done <- err
				return
			}
			defer ws.Close()
			if client {
				// gorilla server echoes what our wire client sent.
				for range payloads {
					mt, b, err := ws.ReadMessage()
					if err == nil {
						err = ws.WriteMessage(mt, b)
					}
					if err != nil {
						done <- err
						return
					}
				}
				ws.ReadMessage() // until the client goes away
				done <- nil
				return
			}
			// Our wire as the server: echo with our framing.
			w := newWire(ws.NetConn(), false)
			for range payloads {
				f, err := w.readWSHeader()
				if err != nil {
					done <- err
					return
				}
				b := make([]byte, f.n)
				if _, err := w.read(&f, 0, b); err != nil {
					done <- err
					return
				}
				if err := w.writeFrame(opBinary, nil, b); err == nil {
					err = w.flush()
				}
			}
			// Drain until the client goes away, so that closing does not
			// reset the connection under the client's last read.
			w.nc.Read(make([]byte, 1))
			done <- nil
		}))
		// The wire rejects fragmented messages (no mesh sends them): give
		// gorilla a buffer that holds each message in one frame.
		d := websocket.Dialer{WriteBufferSize: 1 << 20}
		ws, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		w := newWire(ws.NetConn(), true)
		for _, p := range payloads {
			var got []byte
			if client {
				if err := w.writeFrame(opBinary, nil, p); err == nil {
					err = w.flush()
				}
				f, err := w.readWSHeader()
				if err != nil {
					t.Fatal(err)
				}
				got = make([]byte, f.n)
				if _, err := w.read(&f, 0, got); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
					t.Fatal(err, <-done)
				}
				_, got, err = ws.ReadMessage()
				if err != nil {
					t.Fatal(err, <-done)
				}
			}
			if !bytes.Equal(got, p) {
				t.Fatalf("client=%v: %d-byte payload came back as %d bytes", client, len(p), len(got))
			}
		}
		ws.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		srv.Close()
	}
}

// frameBytes returns what a dialing peer's wire puts on the socket for the
// given messages.
func frameBytes(msgs ...[]byte) []byte {
	var out bytes.Buffer
	a, b := net.Pipe()
	go func() {
		w := newWire(a, true)
		for _, m := range msgs {
			w.writeFrame(opBinary, nil, m)
		}
		w.flush()
		a.Close()
	}()
	out.ReadFrom(b)
	return out.Bytes()
}

// FuzzReadLoop feeds arbitrary bytes to a connection's reader, as an
// authenticated but hostile or broken peer could: it must reject or fail
// cleanly, never panic or hang.
func FuzzReadLoop(f *testing.F) {
	hdr := func(h Header) []byte { return AppendHeader(nil, &h) }
	f.Add(frameBytes(append(hdr(Header{Type: TypeUser, Len: 3}), 1, 2, 3)))
	f.Add(frameBytes(hdr(Header{Type: TypeBarrier, Version: 1}), hdr(Header{Type: TypeHeartbeat}), hdr(Header{Type: TypeBye})))
	f.Add(frameBytes(hdr(Header{Type: TypeUser, Len: 1 << 30})))
	f.Add(frameBytes(append(hdr(Header{Type: TypeUser, Len: 9}), 1)))
	f.Add(frameBytes([]byte("garbage")))
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &Mesh{rank: 0, size: 2, cfg: Config{MaxFrame: 1 << 16}, log: quietLogger(), h: nopHandler{},
			peers: make([]peer, 2), marks: make([]uint64, 2), done: make(chan struct{})}
		a, b := net.Pipe()
		c := &conn{m: m, peer: 1, role: Owner, w: newWire(a, false), wake: make(chan struct{}, 1), stop: make(chan struct{})}
		m.peers[1].conns[Owner].Store(c)
		go func() {
			b.Write(data)
			b.Close()
		}()
		m.wg.Add(1)
		c.readLoop()
		if !c.stopped.Load() {
			t.Fatal("reader returned without shutting the connection down")
		}
	})
}
