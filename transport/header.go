package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Header is the fixed part of every message. On the wire it is a msgpack array of seven
// integers, in this order, followed by exactly Len raw payload bytes (never msgpack-encoded).
// Its fields mean nothing to the mesh but for Type (below TypeUser: the mesh's own messages)
// and Len: the upper layer gives them their meaning.
type Header struct {
	Type  uint8  // message type: values below TypeUser are reserved for the mesh
	Flags uint8  // free bits
	Key   uint32 // free: what the message is about
	ID    uint64 // free: which exchange it belongs to
	Seq   uint64 // free: a sequence or version number (the barrier number for the mesh)
	Arg   int64  // free argument
	Len   uint64 // payload length in bytes, set by Send
}

// Message types reserved for the mesh itself. The upper layer numbers its own types from
// TypeUser up; a message whose type is below TypeUser and is not one the mesh expects is
// rejected with ErrUnknownType.
const (
	TypeInvalid       uint8 = 0  // never valid on the wire
	TypeHeartbeat     uint8 = 1  // liveness; no payload
	TypeBarrier       uint8 = 2  // barrier marker; Seq is the barrier number
	TypeAuthChallenge uint8 = 3  // handshake: server nonce and proof
	TypeAuthResponse  uint8 = 4  // handshake: client proof
	TypeAuthHello     uint8 = 5  // handshake: client rank, purpose and nonce
	TypeRegister      uint8 = 6  // bootstrap: a rank's listen address and job description
	TypeAddrBook      uint8 = 7  // bootstrap: every rank's listen address and rank 0's job description
	TypeBye           uint8 = 8  // the sender is closing its mesh cleanly
	TypeFinal         uint8 = 9  // final barrier marker: the sender is done; Flags says whether it failed
	TypeReady         uint8 = 10 // bootstrap: the sender's connections are all up
	TypeStart         uint8 = 11 // bootstrap: every connection of the job is up
	TypeAbort         uint8 = 12 // bootstrap: the start failed; the payload says why
	TypeShmOffer      uint8 = 13 // handshake: the dialer's shared memory, or nothing (see shm.go)
	TypeShmAnswer     uint8 = 14 // handshake: Flags 1 when the acceptor took the shared memory
	TypeLost          uint8 = 15 // liveness: rank Arg is lost, rank Key found it (see tree.go)
	TypeUser          uint8 = 16 // first type available to the upper layer
)

// headerSize is the size of a header as appendHeader writes it: a fixarray marker and seven
// integers in their fixed-width msgpack forms. decodeHeader also accepts the other integer
// forms msgpack encoders produce, so a decoded header may be shorter, or longer up to
// maxHeaderSize.
const headerSize = 1 + 2 + 2 + 5 + 9 + 9 + 9 + 9

// maxHeaderSize is the longest header decodeHeader can meet: seven integers in their 9-byte
// forms.
const maxHeaderSize = 1 + 7*9

// msgpack format codes (the values of msgpack/v5/msgpcode, as constants so
// the decoder can switch on them; a test checks they agree).
const (
	mpFixArray7 = 0x97
	mpUint8     = 0xcc
	mpUint16    = 0xcd
	mpUint32    = 0xce
	mpUint64    = 0xcf
	mpInt8      = 0xd0
	mpInt16     = 0xd1
	mpInt32     = 0xd2
	mpInt64     = 0xd3
	mpPosFixMax = 0x7f
	mpNegFixMin = 0xe0
)

// ErrBadHeader is wrapped by every error of decoding a malformed header.
var ErrBadHeader = errors.New("transport: malformed message header")

// appendHeader appends the headerSize-byte encoding of h to b and returns the extended
// slice. It does not allocate when b has room, and encodes in place there.
func appendHeader(b []byte, h *Header) []byte {
	n := len(b)
	b = slices.Grow(b, headerSize)[:n+headerSize]
	t := b[n : n+headerSize : n+headerSize]
	t[0] = mpFixArray7
	t[1] = mpUint8
	t[2] = h.Type
	t[3] = mpUint8
	t[4] = h.Flags
	t[5] = mpUint32
	binary.BigEndian.PutUint32(t[6:], h.Key)
	t[10] = mpUint64
	binary.BigEndian.PutUint64(t[11:], h.ID)
	t[19] = mpUint64
	binary.BigEndian.PutUint64(t[20:], h.Seq)
	t[28] = mpInt64
	binary.BigEndian.PutUint64(t[29:], uint64(h.Arg))
	t[37] = mpUint64
	binary.BigEndian.PutUint64(t[38:], h.Len)
	return b
}

// decodeHeader decodes a header from the start of b and returns it with the
// number of bytes it used. Any msgpack integer encoding is accepted for each
// field as long as the value fits the field's type; anything else, including
// a short buffer, yields an error wrapping ErrBadHeader. It never allocates
// on success and never reads past b.
func decodeHeader(b []byte) (h Header, n int, err error) {
	n, err = h.decode(b)
	return h, n, err
}

// decode is decodeHeader into h, in place: a message's header is decoded with no copy.
func (h *Header) decode(b []byte) (int, error) {
	if h.decodeFixed(b) {
		return headerSize, nil
	}
	var n int
	var err error
	*h, n, err = decodeAnyHeader(b)
	return n, err
}

// decodeAnyHeader is decodeHeader for any integer forms.
func decodeAnyHeader(b []byte) (Header, int, error) {
	var h Header
	if len(b) == 0 {
		return h, 0, fmt.Errorf("%w: empty", ErrBadHeader)
	}
	if b[0] != mpFixArray7 {
		return h, 0, fmt.Errorf("%w: want a 7-element msgpack array, got code 0x%02x", ErrBadHeader, b[0])
	}
	p := 1
	var u uint64
	var s int64
	var signed bool
	var err error
	for i := 0; i < 7; i++ {
		u, s, signed, p, err = decodeInt(b, p)
		if err != nil {
			return h, 0, err
		}
		if i == 5 { // Arg: int64
			if signed {
				h.Arg = s
			} else if u > 1<<63-1 {
				return h, 0, fmt.Errorf("%w: field Arg out of range", ErrBadHeader)
			} else {
				h.Arg = int64(u)
			}
			continue
		}
		if signed {
			if s < 0 {
				return h, 0, fmt.Errorf("%w: field %s negative", ErrBadHeader, fieldNames[i])
			}
			u = uint64(s)
		}
		if u > fieldMax[i] {
			return h, 0, fmt.Errorf("%w: field %s out of range", ErrBadHeader, fieldNames[i])
		}
		switch i {
		case 0:
			h.Type = uint8(u)
		case 1:
			h.Flags = uint8(u)
		case 2:
			h.Key = uint32(u)
		case 3:
			h.ID = u
		case 4:
			h.Seq = u
		case 6:
			h.Len = u
		}
	}
	return h, p, nil
}

// decodeFixed decodes into h a header in the form appendHeader writes, which every field's
// value fits, and reports whether b starts with one; h is unchanged when not.
func (h *Header) decodeFixed(b []byte) bool {
	if len(b) < headerSize || b[0] != mpFixArray7 || b[1] != mpUint8 || b[3] != mpUint8 || b[5] != mpUint32 ||
		b[10] != mpUint64 || b[19] != mpUint64 || b[28] != mpInt64 || b[37] != mpUint64 {
		return false
	}
	h.Type = b[2]
	h.Flags = b[4]
	h.Key = binary.BigEndian.Uint32(b[6:])
	h.ID = binary.BigEndian.Uint64(b[11:])
	h.Seq = binary.BigEndian.Uint64(b[20:])
	h.Arg = int64(binary.BigEndian.Uint64(b[29:]))
	h.Len = binary.BigEndian.Uint64(b[38:])
	return true
}

var fieldNames = [7]string{"Type", "Flags", "Key", "ID", "Seq", "Arg", "Len"}
var fieldMax = [7]uint64{0xff, 0xff, 0xffffffff, 1<<64 - 1, 1<<64 - 1, 0, 1<<64 - 1}

var errShort = fmt.Errorf("%w: truncated", ErrBadHeader)
var errNotInt = fmt.Errorf("%w: field is not a msgpack integer", ErrBadHeader)

// decodeInt decodes one msgpack integer at b[p:]. It returns the value as
// unsigned (signed == false) or signed, and the position after it.
func decodeInt(b []byte, p int) (u uint64, s int64, signed bool, next int, err error) {
	if p >= len(b) {
		return 0, 0, false, p, errShort
	}
	c := b[p]
	p++
	n := 0
	switch {
	case c <= mpPosFixMax:
		return uint64(c), 0, false, p, nil
	case c >= mpNegFixMin:
		return 0, int64(int8(c)), true, p, nil
	case c == mpUint8, c == mpInt8:
		n = 1
	case c == mpUint16, c == mpInt16:
		n = 2
	case c == mpUint32, c == mpInt32:
		n = 4
	case c == mpUint64, c == mpInt64:
		n = 8
	default:
		return 0, 0, false, p, errNotInt
	}
	if len(b)-p < n {
		return 0, 0, false, p, errShort
	}
	v := b[p : p+n]
	switch c {
	case mpUint8:
		u = uint64(v[0])
	case mpUint16:
		u = uint64(binary.BigEndian.Uint16(v))
	case mpUint32:
		u = uint64(binary.BigEndian.Uint32(v))
	case mpUint64:
		u = binary.BigEndian.Uint64(v)
	case mpInt8:
		s, signed = int64(int8(v[0])), true
	case mpInt16:
		s, signed = int64(int16(binary.BigEndian.Uint16(v))), true
	case mpInt32:
		s, signed = int64(int32(binary.BigEndian.Uint32(v))), true
	case mpInt64:
		s, signed = int64(binary.BigEndian.Uint64(v)), true
	}
	return u, s, signed, p + n, nil
}
