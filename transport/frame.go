package transport

import (
	"errors"
	"fmt"
)

// A message is one websocket message: its first frame starts with the message's Header, and
// its payload follows, split into frames of at most fragmentSize bytes, so that a message of
// any size streams through a connection with bounded memory and lands straight in its
// destination (Handler.Sink). A reader accepts no frame longer than maxFrame.
const (
	fragmentSize = 4 << 20
	maxFrame     = fragmentSize + maxHeaderSize
	// maxScratch is the largest payload read into a connection's own buffer when
	// Handler.Sink gives no destination.
	maxScratch = 64 << 20
)

// Errors of messages that break the framing rules. The connection that carries such a
// message cannot go on: its peer is lost with a *FrameError wrapping one of these.
var (
	ErrFrameTooLarge  = errors.New("transport: frame larger than the maximum")
	ErrFrameTruncated = errors.New("transport: message shorter than its header announces")
	ErrTrailingBytes  = errors.New("transport: message longer than its header announces")
	ErrUnknownType    = errors.New("transport: unknown mesh message type")
	ErrNotBinary      = errors.New("transport: websocket message is not binary")
	ErrFragment       = errors.New("transport: bad fragment")
	ErrSinkSize       = errors.New("transport: Handler.Sink returned a buffer shorter than the payload")
	ErrSinkRefused    = errors.New("transport: Handler.Sink refused the message")
)

// FrameError describes a message a reader rejected: the rank it came from, its header when
// one could be decoded, and the reason (one of the frame errors, possibly wrapped with
// detail).
type FrameError struct {
	Rank      int
	Header    Header
	HasHeader bool
	Err       error
}

// Error describes the rejected message and the reason.
func (e *FrameError) Error() string {
	if e.HasHeader {
		return fmt.Sprintf("transport: message from rank %d (type %d, key %d, len %d) rejected: %v",
			e.Rank, e.Header.Type, e.Header.Key, e.Header.Len, e.Err)
	}
	return fmt.Sprintf("transport: message from rank %d rejected: %v", e.Rank, e.Err)
}

// Unwrap returns the reason.
func (e *FrameError) Unwrap() error { return e.Err }

// checkFirst validates the first frame of a message: its websocket opcode and fin bit, its
// payload length n, and the message header h decoded from its first hn bytes.
func checkFirst(op byte, fin bool, n int64, h *Header, hn int) error {
	body := uint64(n - int64(hn)) // payload bytes in this frame
	switch {
	case op != opBinary:
		return fmt.Errorf("%w: opcode %d", ErrNotBinary, op)
	case n > maxFrame:
		return fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, n, maxFrame)
	case h.Type < TypeUser && !meshType(h.Type):
		return fmt.Errorf("%w: %d", ErrUnknownType, h.Type)
	case h.Type < TypeUser && (h.Len != 0 || !fin || body != 0):
		return fmt.Errorf("%w: mesh message type %d with a payload", ErrTrailingBytes, h.Type)
	case body > h.Len:
		return fmt.Errorf("%w: %d payload bytes in the first frame, header announces %d", ErrTrailingBytes, body, h.Len)
	case fin && body < h.Len:
		return fmt.Errorf("%w: %d of %d payload bytes", ErrFrameTruncated, body, h.Len)
	}
	return nil
}

// checkFragment validates a frame that continues a message which still expects rest bytes.
func checkFragment(op byte, fin bool, n int64, rest uint64) error {
	switch {
	case op != opContinuation:
		return fmt.Errorf("%w: opcode %d inside a message", ErrFragment, op)
	case n > maxFrame:
		return fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, n, maxFrame)
	case uint64(n) > rest:
		return fmt.Errorf("%w: a fragment of %d bytes, %d expected", ErrTrailingBytes, n, rest)
	case fin && uint64(n) < rest:
		return fmt.Errorf("%w: %d payload bytes missing", ErrFrameTruncated, rest-uint64(n))
	}
	return nil
}

// meshType reports whether t is one of the mesh's own messages on an established
// connection.
func meshType(t uint8) bool {
	switch t {
	case TypeHeartbeat, TypeBarrier, TypeBye, TypeFinal, TypeLost:
		return true
	}
	return false
}
