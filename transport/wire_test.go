package transport

import (
	"bytes"
	"errors"
	"io"
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

// The mesh's messages are standard websocket messages: gorilla reads what the wire writes,
// as client (masked) and as server, fragmented or not, and the wire reads what gorilla
// writes, fragmented at gorilla's buffer size (gorilla writes a large message from a server
// as one frame, which the mesh refuses past maxFrame; the test writes it in small pieces).
func TestWireInteropWithGorilla(t *testing.T) {
	sizes := []int{0, 1, 200, 70000, fragmentSize, 2*fragmentSize + 3}
	message := func(size int) (Header, []byte) {
		p := make([]byte, size)
		for i := range p {
			p[i] = byte(i * 13)
		}
		return Header{Type: TypeUser, Key: uint32(size), Len: uint64(size)}, p
	}
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
				for range sizes {
					_, b, err := ws.ReadMessage()
					if err == nil {
						err = gorillaWrite(ws, b)
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
			w.grow(func(r io.Reader) io.Reader { return r })
			for range sizes {
				var h Header
				p, err := w.readMessage(&h, func(h *Header) ([]byte, error) { return make([]byte, h.Len), nil })
				if err == nil {
					if err = w.writeMessage(&h, p); err == nil {
						err = w.flush()
					}
				}
				if err != nil {
					done <- err
					return
				}
			}
			// Drain until the client goes away, so that closing does not reset the
			// connection under the client's last read.
			w.nc.Read(make([]byte, 1))
			done <- nil
		}))
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		w := newWire(ws.NetConn(), true)
		w.grow(func(r io.Reader) io.Reader { return r })
		for _, size := range sizes {
			h, p := message(size)
			var got Header
			var gotP []byte
			if client {
				err := w.writeMessage(&h, p)
				if err == nil {
					err = w.flush()
				}
				if err != nil {
					t.Fatal(err)
				}
				gotP, err = w.readMessage(&got, func(h *Header) ([]byte, error) { return make([]byte, h.Len), nil })
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err := gorillaWrite(ws, append(appendHeader(nil, &h), p...)); err != nil {
					t.Fatal(err, <-done)
				}
				_, b, err := ws.ReadMessage()
				if err != nil {
					t.Fatal(err, <-done)
				}
				var n int
				if got, n, err = decodeHeader(b); err != nil {
					t.Fatal(err)
				}
				gotP = b[n:]
			}
			if got != h || !bytes.Equal(gotP, p) && size > 0 {
				t.Fatalf("client=%v: a %d-byte message came back as %+v with %d bytes", client, size, got, len(gotP))
			}
		}
		ws.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		srv.Close()
	}
}

// gorillaWrite writes b as one binary message through gorilla's NextWriter, in small writes
// that it fragments at its buffer size (a large write from a server would be one frame).
func gorillaWrite(ws *websocket.Conn, b []byte) error {
	wr, err := ws.NextWriter(websocket.BinaryMessage)
	for len(b) > 0 && err == nil {
		k := min(len(b), 1000)
		_, err = wr.Write(b[:k])
		b = b[k:]
	}
	if err == nil {
		err = wr.Close()
	}
	return err
}

// streamBytes returns what a dialing peer's wire puts on the socket for the given frames.
func streamBytes(frames ...func(w *wire)) []byte {
	var out bytes.Buffer
	a, b := net.Pipe()
	go func() {
		w := newWire(a, true)
		for _, f := range frames {
			f(w)
		}
		w.flush()
		a.Close()
	}()
	out.ReadFrom(b)
	return out.Bytes()
}

// msg writes one whole message; frag one raw frame.
func msg(h Header, p []byte) func(*wire) {
	return func(w *wire) { h.Len = uint64(len(p)); w.writeMessage(&h, p) }
}

func frag(op byte, fin bool, raw []byte) func(*wire) {
	return func(w *wire) { w.writeFrame(op, fin, len(raw), nil, false, raw) }
}

// FuzzReadMessage feeds arbitrary bytes to the chunked stream reader, as an authenticated
// but hostile or broken peer could: it must deliver whole messages into their destination
// or fail, never panic, hang or write outside the destination, and its rule errors name a
// frame error.
func FuzzReadMessage(f *testing.F) {
	hdr := func(h Header) []byte { return appendHeader(nil, &h) }
	f.Add(streamBytes(msg(Header{Type: TypeUser}, []byte{1, 2, 3})))
	f.Add(streamBytes(msg(Header{Type: TypeBarrier, Seq: 1}, nil), msg(Header{Type: TypeHeartbeat}, nil), msg(Header{Type: TypeBye}, nil)))
	f.Add(streamBytes(msg(Header{Type: TypeUser}, make([]byte, fragmentSize+10))))
	f.Add(streamBytes(frag(opBinary, false, append(hdr(Header{Type: TypeUser, Len: 9}), 1)), frag(opPing, true, nil), frag(opContinuation, true, make([]byte, 8))))
	f.Add(streamBytes(frag(opBinary, true, hdr(Header{Type: TypeUser, Len: 1 << 40}))))
	f.Add(streamBytes(frag(opBinary, true, []byte("garbage"))))
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		go func() {
			b.Write(data)
			b.Close()
		}()
		w := newWire(a, false)
		w.grow(func(r io.Reader) io.Reader { return r })
		for {
			var h Header
			var dst []byte
			p, err := w.readMessage(&h, func(h *Header) ([]byte, error) {
				if h.Len > 1<<22 {
					return nil, ErrFrameTooLarge
				}
				dst = make([]byte, h.Len+8) // room past the end, which must stay untouched
				return dst[:h.Len], nil
			})
			if err != nil {
				var re *ruleError
				if errors.As(err, &re) && !frameReason(re.err) {
					t.Fatalf("rule error %v names no frame error", err)
				}
				break
			}
			if uint64(len(p)) != h.Len || h.Len > 0 && (&p[0] != &dst[0] || !bytes.Equal(dst[h.Len:], make([]byte, 8))) {
				t.Fatalf("message %+v delivered %d bytes outside its destination", h, len(p))
			}
		}
		a.Close()
	})
}

// frameReason reports whether err wraps one of the errors a rejected message is reported with.
func frameReason(err error) bool {
	for _, e := range []error{ErrBadHeader, ErrFrameTooLarge, ErrFrameTruncated, ErrTrailingBytes, ErrUnknownType, ErrNotBinary, ErrFragment} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// A message is never whole on the socket before the flush that follows it, even when its
// payload is written straight from the caller's memory: the writer publishes what it sent
// between the two (conn.writeBatch), and the peer's answer must not overtake that.
func TestMessageWholeOnlyAtFlush(t *testing.T) {
	for _, size := range []int{0, 100, directLimit, fragmentSize + 10, 3*fragmentSize + 1} {
		sock := &recordingConn{}
		w := newWire(sock, false) // unmasked: large payloads go straight out
		h := Header{Type: TypeUser, Len: uint64(size)}
		if err := w.writeMessage(&h, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		before := sock.n
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		if before >= sock.n {
			t.Errorf("message of %d bytes: %d bytes on the socket before the flush, %d after: whole before it", size, before, sock.n)
		}
	}
}

// recordingConn counts the bytes written to it.
type recordingConn struct {
	net.Conn
	n int
}

func (c *recordingConn) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }
