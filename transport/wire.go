package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
)

// wire reads and writes RFC 6455 websocket frames on a connection that
// gorilla/websocket upgraded. gorilla performs the HTTP upgrade; after it the
// mesh frames messages itself, because gorilla allocates a reader and a
// writer object per message and copies client payloads, and the mesh must
// not allocate per message. Every message is one final binary frame
// (opcode 2); a close frame (opcode 8) ends a direction; pings are answered
// by nothing (the mesh has its own heartbeats) and pongs are ignored. The
// dialing side masks what it sends, as the RFC requires of clients; the
// accepting side does not. The upgrade protocol has the client speak first,
// so no byte can be buffered inside gorilla when the mesh takes over.
type wire struct {
	nc     net.Conn
	br     *bufio.Reader
	client bool // this side dialed: it masks what it sends

	wbuf []byte      // pending output (frames coalesced per writer batch)
	vec  net.Buffers // for vectored writes of large server payloads
	arr  [2][]byte
	rng  rand.PCG
	hb   [8]byte // reader's scratch for frame header fields
}

const (
	opContinuation = 0x0
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
	finBit         = 0x80
	maskBit        = 0x80
	maxWSHeader    = 14
	// directLimit is the payload size from which an unmasked payload is
	// written from the caller's memory (writev) rather than copied.
	directLimit = 32 << 10
)

var errProtocol = errors.New("transport: websocket protocol violation")

func newWire(nc net.Conn, client bool) *wire {
	w := &wire{nc: nc, br: bufio.NewReaderSize(nc, bufSize), client: client, wbuf: make([]byte, 0, bufSize)}
	w.rng.Seed(rand.Uint64(), rand.Uint64())
	return w
}

// appendWSHeader appends a websocket frame header for a final frame of n
// payload bytes and returns it with the mask key (zero when not masking).
func (w *wire) appendWSHeader(b []byte, op byte, n int) ([]byte, uint32) {
	b = append(b, finBit|op)
	var m byte
	if w.client {
		m = maskBit
	}
	switch {
	case n < 126:
		b = append(b, m|byte(n))
	case n < 1<<16:
		b = append(b, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if !w.client {
		return b, 0
	}
	key := uint32(w.rng.Uint64())
	if key == 0 {
		key = 1
	}
	return binary.LittleEndian.AppendUint32(b, key), key
}

// writeFrame queues one message (header h, if any, then p) into the output
// buffer, writing out what does not fit. Large unmasked payloads are written
// straight from p. Call flush to write out the buffer.
func (w *wire) writeFrame(op byte, h *Header, p []byte) error {
	n := len(p)
	if h != nil {
		n += HeaderSize
	}
	if len(w.wbuf)+maxWSHeader+n > cap(w.wbuf) && len(w.wbuf) > 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	var key uint32
	w.wbuf, key = w.appendWSHeader(w.wbuf, op, n)
	body := len(w.wbuf)
	if h != nil {
		w.wbuf = AppendHeader(w.wbuf, h)
	}
	if !w.client && len(p) >= directLimit {
		w.arr[0], w.arr[1] = w.wbuf, p
		w.vec = w.arr[:]
		_, err := w.vec.WriteTo(w.nc)
		w.arr[0], w.arr[1] = nil, nil
		w.wbuf = w.wbuf[:0]
		return err
	}
	pos := 0
	if w.client {
		pos = maskBytes(key, 0, w.wbuf[body:])
	}
	for len(p) > 0 {
		if len(w.wbuf) == cap(w.wbuf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		k := min(len(p), cap(w.wbuf)-len(w.wbuf))
		off := len(w.wbuf)
		w.wbuf = w.wbuf[:off+k]
		if w.client {
			pos = maskCopy(key, pos, w.wbuf[off:], p[:k])
		} else {
			copy(w.wbuf[off:], p[:k])
		}
		p = p[k:]
	}
	return nil
}

// flush writes out the output buffer.
func (w *wire) flush() error {
	if len(w.wbuf) == 0 {
		return nil
	}
	_, err := w.nc.Write(w.wbuf)
	w.wbuf = w.wbuf[:0]
	return err
}

// maskBytes XORs b with the mask key, starting at key offset pos&3, and
// returns the offset after b.
func maskBytes(key uint32, pos int, b []byte) int {
	k := bits.RotateLeft32(key, -8*(pos&3)) // byte 0 of k masks b[0]
	k64 := uint64(k) | uint64(k)<<32
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(b[i:])^k64)
	}
	for ; i < len(b); i++ {
		b[i] ^= byte(k >> (8 * (i & 3)))
	}
	return pos + len(b)
}

// maskCopy copies src to dst (of the same length) masking it, starting at
// key offset pos&3, and returns the offset after it: one pass instead of a
// copy and a mask.
func maskCopy(key uint32, pos int, dst, src []byte) int {
	k := bits.RotateLeft32(key, -8*(pos&3))
	k64 := uint64(k) | uint64(k)<<32
	dst = dst[:len(src)]
	i := 0
	for ; i+32 <= len(src); i += 32 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k64)
		binary.LittleEndian.PutUint64(dst[i+8:], binary.LittleEndian.Uint64(src[i+8:])^k64)
		binary.LittleEndian.PutUint64(dst[i+16:], binary.LittleEndian.Uint64(src[i+16:])^k64)
		binary.LittleEndian.PutUint64(dst[i+24:], binary.LittleEndian.Uint64(src[i+24:])^k64)
	}
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k64)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ byte(k>>(8*(i&3)))
	}
	return pos + len(src)
}

// frameInfo describes a websocket frame whose header has been read.
type frameInfo struct {
	op     byte
	n      int64 // payload length
	key    uint32
	masked bool
}

// readWSHeader reads the next frame header. Fragmented messages are a
// protocol violation: no mesh sends them.
func (w *wire) readWSHeader() (frameInfo, error) {
	var f frameInfo
	b0, err := w.br.ReadByte()
	if err != nil {
		return f, err
	}
	b1, err := w.br.ReadByte()
	if err != nil {
		return f, unexpected(err)
	}
	f.op = b0 & 0x0f
	if b0&0x70 != 0 {
		return f, fmt.Errorf("%w: reserved bits set", errProtocol)
	}
	if b0&finBit == 0 || f.op == opContinuation {
		return f, fmt.Errorf("%w: fragmented message", errProtocol)
	}
	f.masked = b1&maskBit != 0
	if f.masked == w.client {
		return f, fmt.Errorf("%w: wrong masking", errProtocol)
	}
	f.n = int64(b1 & 0x7f)
	switch f.n {
	case 126:
		x := w.hb[:2]
		if _, err := io.ReadFull(w.br, x); err != nil {
			return f, unexpected(err)
		}
		f.n = int64(binary.BigEndian.Uint16(x))
	case 127:
		x := w.hb[:8]
		if _, err := io.ReadFull(w.br, x); err != nil {
			return f, unexpected(err)
		}
		u := binary.BigEndian.Uint64(x)
		if u > 1<<62 {
			return f, fmt.Errorf("%w: frame length %d", errProtocol, u)
		}
		f.n = int64(u)
	}
	if f.masked {
		x := w.hb[:4]
		if _, err := io.ReadFull(w.br, x); err != nil {
			return f, unexpected(err)
		}
		f.key = binary.LittleEndian.Uint32(x)
	}
	if f.op >= opClose && f.n > 125 {
		return f, fmt.Errorf("%w: control frame of %d bytes", errProtocol, f.n)
	}
	return f, nil
}

// read fills b with the next payload bytes of frame f, unmasking them; pos
// is the offset in the payload. It returns the new offset.
func (w *wire) read(f *frameInfo, pos int, b []byte) (int, error) {
	if _, err := io.ReadFull(w.br, b); err != nil {
		return pos, unexpected(err)
	}
	if f.masked {
		return maskBytes(f.key, pos, b), nil
	}
	return pos + len(b), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// writeMsg writes one frame and flushes (handshake only).
func (w *wire) writeMsg(h Header, payload []byte) error {
	h.Len = uint32(len(payload))
	if err := w.writeFrame(opBinary, &h, payload); err != nil {
		return err
	}
	return w.flush()
}

// readMsg reads one message of type want with at most max payload bytes
// (handshake only; it allocates).
func (w *wire) readMsg(want uint8, max int) (Header, []byte, error) {
	f, err := w.readWSHeader()
	if err != nil {
		return Header{}, nil, err
	}
	if f.op == opClose {
		return Header{}, nil, fmt.Errorf("%w: connection closed by the peer", ErrAuth)
	}
	if f.op != opBinary {
		return Header{}, nil, ErrNotBinary
	}
	if f.n > int64(MaxHeaderSize+max) {
		return Header{}, nil, fmt.Errorf("%w: handshake message of %d bytes", ErrFrameTooLarge, f.n)
	}
	b := make([]byte, f.n)
	if _, err := w.read(&f, 0, b); err != nil {
		return Header{}, nil, err
	}
	h, n, err := DecodeHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.Type != want {
		return h, nil, fmt.Errorf("%w: got message type %d, expected %d", ErrUnknownType, h.Type, want)
	}
	if int(h.Len) != len(b)-n {
		return h, nil, fmt.Errorf("%w: header announces %d bytes, message has %d", ErrFrameTruncated, h.Len, len(b)-n)
	}
	return h, b[n:], nil
}
