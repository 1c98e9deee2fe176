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

// wire reads and writes RFC 6455 websocket frames on a connection that gorilla/websocket
// upgraded. gorilla performs the HTTP upgrade; after it the mesh frames messages itself,
// because gorilla allocates a reader and a writer object per message and copies client
// payloads, and the mesh must not allocate per message. A message is one binary websocket
// message, fragmented into frames of at most fragmentSize payload bytes; a close frame
// (opcode 8) ends a direction; pings and pongs are skipped (the mesh has its own
// heartbeats). The dialing side masks what it sends, as the RFC requires of clients; the
// accepting side does not, and neither side does once the connection goes through shared
// memory (useShm), where no proxy reads the frames. The upgrade protocol has the client speak
// first, so no byte can be buffered inside gorilla when the mesh takes over.
//
// A new wire has small buffers, so that a connection that has not proved it knows the job's
// secret costs little memory; grow gives an authenticated one its full buffers.
type wire struct {
	nc        net.Conn
	src       source // what br reads: nc, or the shared memory that replaced it (useShm)
	br        *bufio.Reader
	small     *bufio.Reader // the buffer of the handshake, which br reads first once grown
	masks     bool          // this side masks what it sends: it dialed, and the bytes go through a socket
	peerMasks bool          // the peer masks what it sends

	wbuf []byte      // pending output (frames coalesced per writer batch)
	vec  net.Buffers // for vectored writes of large unmasked payloads
	arr  [2][]byte
	rng  rand.PCG
	hb   [8]byte             // reader's scratch for frame header fields
	rbuf [maxHeaderSize]byte // reader's scratch for message headers
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
	// directLimit is the payload size from which an unmasked payload is written from the
	// caller's memory (writev) rather than copied.
	directLimit = 32 << 10
	// heldBack is how many of a payload's last bytes are copied even when it is written
	// from the caller's memory.
	heldBack = 8
	// handshakeBuf is the read buffer of a connection before it is authenticated.
	handshakeBuf = 512
)

var errProtocol = errors.New("transport: websocket protocol violation")

func newWire(nc net.Conn, client bool) *wire {
	w := &wire{nc: nc, src: source{nc}, masks: client, peerMasks: !client}
	w.br = bufio.NewReaderSize(&w.src, handshakeBuf)
	w.rng.Seed(rand.Uint64(), rand.Uint64())
	return w
}

// source is the reader under a wire's buffers, which useShm can change.
type source struct{ r io.Reader }

func (s *source) Read(p []byte) (int, error) { return s.r.Read(p) }

// grow gives an authenticated connection its full buffers; every read goes through r, which
// reads what the small buffer holds first.
func (w *wire) grow(r func(io.Reader) io.Reader) {
	w.small = w.br
	w.br = bufio.NewReaderSize(r(w.br), bufSize)
	w.wbuf = make([]byte, 0, bufSize)
}

// buffered returns the number of bytes read from the source and not yet consumed.
func (w *wire) buffered() int {
	n := w.br.Buffered()
	if w.small != nil {
		n += w.small.Buffered()
	}
	return n
}

// wsHeaderSize returns the size of the header of an unmasked websocket frame of n payload
// bytes: what appendWSHeader writes.
func wsHeaderSize(n int) int {
	var b [10]byte
	return len(appendWSHeader(b[:0], 0, true, n, false))
}

// appendWSHeader appends a websocket frame header for a frame of n payload bytes and
// returns it with the mask key (zero when not masking).
func (w *wire) appendWSHeader(b []byte, op byte, fin bool, n int) ([]byte, uint32) {
	b = appendWSHeader(b, op, fin, n, w.masks)
	if !w.masks {
		return b, 0
	}
	key := uint32(w.rng.Uint64())
	if key == 0 {
		key = 1
	}
	return binary.LittleEndian.AppendUint32(b, key), key
}

// appendWSHeader appends the header of a websocket frame of n payload bytes, but for the
// mask key that follows it when masked.
func appendWSHeader(b []byte, op byte, fin bool, n int, masked bool) []byte {
	if fin {
		op |= finBit
	}
	b = append(b, op)
	var m byte
	if masked {
		m = maskBit
	}
	switch {
	case n < 126:
		return append(b, m|byte(n))
	case n < 1<<16:
		return append(b, m|126, byte(n>>8), byte(n))
	}
	b = append(b, m|127)
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

// writeMessage queues one message (header h, then p) into the output buffer, as frames of at
// most fragmentSize payload bytes, writing out what does not fit. Large unmasked payloads
// are written straight from p. Call flush to write out the buffer.
func (w *wire) writeMessage(h *Header, p []byte) error {
	op := byte(opBinary)
	for first := true; ; first = false {
		k := min(len(p), fragmentSize)
		fin := k == len(p)
		n := k
		if first {
			n += headerSize
		}
		if err := w.writeFrame(op, fin, n, h, first, p[:k]); err != nil {
			return err
		}
		p = p[k:]
		op = opContinuation
		if fin {
			return nil
		}
	}
}

// writeFrame queues one frame of n payload bytes: the message header h when withHeader,
// then p.
func (w *wire) writeFrame(op byte, fin bool, n int, h *Header, withHeader bool, p []byte) error {
	if len(w.wbuf)+maxWSHeader+n > cap(w.wbuf) && len(w.wbuf) > 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	var key uint32
	w.wbuf, key = w.appendWSHeader(w.wbuf, op, fin, n)
	body := len(w.wbuf)
	if withHeader {
		w.wbuf = appendHeader(w.wbuf, h)
	}
	if !w.masks && len(p) >= directLimit {
		// The last bytes stay in the buffer, written out by the next flush: a message is
		// never whole at the peer before its writer has published it (conn.writeBatch).
		body, tail := p[:len(p)-heldBack], p[len(p)-heldBack:]
		w.arr[0], w.arr[1] = w.wbuf, body
		w.vec = w.arr[:]
		_, err := w.vec.WriteTo(w.nc)
		w.arr[0], w.arr[1] = nil, nil
		w.wbuf = append(w.wbuf[:0], tail...)
		return err
	}
	pos := 0
	if w.masks {
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
		if w.masks {
			pos = maskCopy(key, pos, w.wbuf[off:], p[:k])
		} else {
			copy(w.wbuf[off:], p[:k])
		}
		p = p[k:]
	}
	return nil
}

// writeClose queues a close frame with the given status payload.
func (w *wire) writeClose(status []byte) error {
	var key uint32
	w.wbuf, key = w.appendWSHeader(w.wbuf, opClose, true, len(status))
	off := len(w.wbuf)
	w.wbuf = append(w.wbuf, status...)
	if w.masks {
		maskBytes(key, 0, w.wbuf[off:])
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

// maskBytes XORs b with the mask key, starting at key offset pos&3, and returns the offset
// after b.
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

// maskCopy copies src to dst (of the same length) masking it, starting at key offset pos&3,
// and returns the offset after it: one pass instead of a copy and a mask.
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
	fin    bool
	n      int64 // payload length
	key    uint32
	masked bool
}

// errClosed is returned by nextFrame for a close frame.
var errClosed = errors.New("transport: close frame")

// nextFrame reads frame headers until one that is not a ping or a pong (whose payloads it
// skips); a close frame gives errClosed.
func (w *wire) nextFrame() (frameInfo, error) {
	for {
		f, err := w.readWSHeader()
		if err != nil {
			return f, err
		}
		switch f.op {
		case opPing, opPong:
			if _, err := w.br.Discard(int(f.n)); err != nil {
				return f, unexpected(err)
			}
			continue
		case opClose:
			return f, errClosed
		}
		return f, nil
	}
}

// readWSHeader reads the next frame header.
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
	f.fin = b0&finBit != 0
	if b0&0x70 != 0 {
		return f, fmt.Errorf("%w: reserved bits set", errProtocol)
	}
	f.masked = b1&maskBit != 0
	if f.masked != w.peerMasks {
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
	if f.op >= opClose && (f.n > 125 || !f.fin) {
		return f, fmt.Errorf("%w: control frame of %d bytes", errProtocol, f.n)
	}
	return f, nil
}

// read fills b with the next payload bytes of frame f, unmasking them; pos is the offset in
// the frame's payload. It returns the new offset.
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

// ruleError is a message that breaks the framing rules (checkFirst, checkFragment, a
// malformed header, a refused destination), as opposed to a broken connection.
type ruleError struct {
	err       error
	hasHeader bool // the message header was decoded
}

func (e *ruleError) Error() string { return e.err.Error() }
func (e *ruleError) Unwrap() error { return e.err }

// readMessage reads one message into h and returns its payload, streamed frame by frame into
// the buffer of h.Len bytes that dest returns (called only for a payload, after the first
// frame passed every check). A mesh message (Type < TypeUser) has no payload. A message that
// breaks the rules gives a *ruleError; the connection cannot go on after any error.
func (w *wire) readMessage(h *Header, dest func(*Header) ([]byte, error)) ([]byte, error) {
	f, err := w.nextFrame()
	if err != nil {
		return nil, err
	}
	k := int(min(f.n, maxHeaderSize))
	pos, err := w.read(&f, 0, w.rbuf[:k])
	if err != nil {
		return nil, err
	}
	buf, hn, err := openMessage(h, w.rbuf[:k], f.op, f.fin, f.n, dest)
	if err != nil {
		return nil, err
	}
	// The header's frame may hold the first payload bytes already.
	if _, err := w.read(&f, pos, buf[k-hn:f.n-int64(hn)]); err != nil {
		return nil, err
	}
	for off, fin := uint64(f.n-int64(hn)), f.fin; !fin; {
		g, err := w.nextFrame()
		if err != nil {
			return nil, err
		}
		if err := checkFragment(g.op, g.fin, g.n, h.Len-off); err != nil {
			return nil, &ruleError{err: err, hasHeader: true}
		}
		if _, err := w.read(&g, 0, buf[off:off+uint64(g.n)]); err != nil {
			return nil, err
		}
		off, fin = off+uint64(g.n), g.fin
	}
	return buf, nil
}

// openMessage decodes the message header at the start of head, the first bytes of a first
// frame (opcode op, fin, n payload bytes), checks the frame, and returns the payload's
// buffer from dest with the payload bytes that head holds after the header copied in, and
// the header's size.
func openMessage(h *Header, head []byte, op byte, fin bool, n int64, dest func(*Header) ([]byte, error)) ([]byte, int, error) {
	hn, err := h.decode(head)
	if err != nil {
		return nil, 0, &ruleError{err: err}
	}
	if err := checkFirst(op, fin, n, h, hn); err != nil {
		return nil, 0, &ruleError{err: err, hasHeader: true}
	}
	if h.Len == 0 {
		return nil, hn, nil
	}
	buf, err := dest(h)
	if err != nil {
		return nil, 0, &ruleError{err: err, hasHeader: true}
	}
	copy(buf, head[hn:])
	return buf, hn, nil
}

// wholeFrameAt parses the websocket frame header at the start of b when it is that of a
// final unmasked binary frame of less than 64 KiB (its length in the header's second byte,
// or in the two after it), and returns the header's size and the payload's; ok is false for
// any other frame, or when b is too short to tell.
func wholeFrameAt(b []byte) (hl, n int, ok bool) {
	if len(b) < 2 || b[0] != finBit|opBinary {
		return 0, 0, false
	}
	switch n := int(b[1]); {
	case n < 126:
		return 2, n, true
	case n == 126 && len(b) >= 4:
		return 4, int(binary.BigEndian.Uint16(b[2:4])), true
	}
	return 0, 0, false
}

// writeMsg writes one message of at most fragmentSize payload bytes and flushes (handshake
// and bootstrap only).
func (w *wire) writeMsg(h Header, payload []byte) error {
	h.Len = uint64(len(payload))
	if err := w.writeMessage(&h, payload); err != nil {
		return err
	}
	return w.flush()
}

// readMsg reads one message of type want with at most max payload bytes, in one frame
// (handshake and bootstrap only; it allocates).
func (w *wire) readMsg(want uint8, max int) (Header, []byte, error) {
	h, p, err := w.readAny(max)
	if err == nil && h.Type != want {
		err = fmt.Errorf("%w: got message type %d, expected %d", ErrUnknownType, h.Type, want)
	}
	return h, p, err
}

// closedBy is the error of a close frame f that came instead of a message of the handshake
// or of the start: a handshake whose time ended at the peer (closeTryAgain) may be tried
// again; any other close is the peer refusing this process (ErrAuth).
func (w *wire) closedBy(f *frameInfo) error {
	var status [125]byte // a control frame's payload is 125 bytes at most
	b := status[:min(f.n, int64(len(status)))]
	if _, err := w.read(f, 0, b); err == nil && len(b) >= 2 && b[0] == closeTryAgain[0] && b[1] == closeTryAgain[1] {
		return errHandshakeTimeout
	}
	return fmt.Errorf("%w: the peer refused the connection (wrong secret, or a rank or purpose it does not take: its log says which)", ErrAuth)
}

// readAny reads one message of any type with at most max payload bytes, in one frame.
func (w *wire) readAny(max int) (Header, []byte, error) {
	f, err := w.nextFrame()
	if errors.Is(err, errClosed) {
		return Header{}, nil, w.closedBy(&f)
	}
	if err != nil {
		return Header{}, nil, err
	}
	if f.op != opBinary || !f.fin {
		return Header{}, nil, fmt.Errorf("%w: opcode %d, fin %v", ErrNotBinary, f.op, f.fin)
	}
	if f.n > int64(maxHeaderSize+max) {
		return Header{}, nil, fmt.Errorf("%w: a message of %d bytes, at most %d expected", ErrFrameTooLarge, f.n, maxHeaderSize+max)
	}
	b := make([]byte, f.n)
	if _, err := w.read(&f, 0, b); err != nil {
		return Header{}, nil, err
	}
	h, n, err := decodeHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.Len != uint64(len(b)-n) {
		return h, nil, fmt.Errorf("%w: header announces %d bytes, message has %d", ErrFrameTruncated, h.Len, len(b)-n)
	}
	return h, b[n:], nil
}
