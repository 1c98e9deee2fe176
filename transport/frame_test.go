package transport

import (
	"errors"
	"testing"
)

func TestCheckFirst(t *testing.T) {
	user := func(n uint64) *Header { return &Header{Type: TypeUser, Len: n} }
	const hn = headerSize
	for _, tc := range []struct {
		name string
		op   byte
		fin  bool
		n    int64 // the frame's payload: header and body
		h    *Header
		want error
	}{
		{"whole message", opBinary, true, hn + 10, user(10), nil},
		{"no payload", opBinary, true, hn, user(0), nil},
		{"first of several frames", opBinary, false, hn + 10, user(100), nil},
		{"first frame holds only the header", opBinary, false, hn, user(100), nil},
		{"mesh message", opBinary, true, hn, &Header{Type: TypeBarrier}, nil},
		{"text frame", 0x1, true, hn, user(0), ErrNotBinary},
		{"continuation first", opContinuation, true, hn, user(0), ErrNotBinary},
		{"frame too long", opBinary, false, maxFrame + 1, user(1 << 30), ErrFrameTooLarge},
		{"unknown mesh type", opBinary, true, hn, &Header{Type: TypeInvalid}, ErrUnknownType},
		{"handshake type", opBinary, true, hn, &Header{Type: TypeAuthHello}, ErrUnknownType},
		{"mesh message with payload", opBinary, true, hn + 1, &Header{Type: TypeHeartbeat, Len: 1}, ErrTrailingBytes},
		{"fragmented mesh message", opBinary, false, hn, &Header{Type: TypeBarrier}, ErrTrailingBytes},
		{"more than announced", opBinary, true, hn + 11, user(10), ErrTrailingBytes},
		{"less than announced", opBinary, true, hn + 9, user(10), ErrFrameTruncated},
	} {
		if err := checkFirst(tc.op, tc.fin, tc.n, tc.h, hn); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCheckFragment(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   byte
		fin  bool
		n    int64
		rest uint64
		want error
	}{
		{"middle fragment", opContinuation, false, 10, 100, nil},
		{"last fragment", opContinuation, true, 10, 10, nil},
		{"empty last fragment", opContinuation, true, 0, 0, nil},
		{"new message inside one", opBinary, true, 10, 10, ErrFragment},
		{"fragment too long", opContinuation, false, maxFrame + 1, 1 << 30, ErrFrameTooLarge},
		{"past the announced length", opContinuation, false, 11, 10, ErrTrailingBytes},
		{"last fragment short", opContinuation, true, 9, 10, ErrFrameTruncated},
	} {
		if err := checkFragment(tc.op, tc.fin, tc.n, tc.rest); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
