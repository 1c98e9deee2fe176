package transport

import (
	"errors"
	"math"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

func TestCodesMatchMsgpack(t *testing.T) {
	pairs := []struct {
		ours, theirs byte
	}{
		{mpUint8, msgpcode.Uint8}, {mpUint16, msgpcode.Uint16}, {mpUint32, msgpcode.Uint32}, {mpUint64, msgpcode.Uint64},
		{mpInt8, msgpcode.Int8}, {mpInt16, msgpcode.Int16}, {mpInt32, msgpcode.Int32}, {mpInt64, msgpcode.Int64},
		{mpPosFixMax, msgpcode.PosFixedNumHigh}, {mpNegFixMin, msgpcode.NegFixedNumLow}, {mpFixArray7, msgpcode.FixedArrayLow | 7},
	}
	for _, p := range pairs {
		if p.ours != p.theirs {
			t.Errorf("code 0x%02x, msgpack says 0x%02x", p.ours, p.theirs)
		}
	}
}

var headerCases = []Header{
	{},
	{Type: TypeUser, Flags: 3, Key: 7, ID: 42, Seq: 9, Arg: -1, Len: 8},
	{Type: 255, Flags: 255, Key: math.MaxUint32, ID: math.MaxUint64, Seq: math.MaxUint64, Arg: math.MinInt64, Len: math.MaxUint64},
	{Arg: math.MaxInt64},
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range headerCases {
		b := appendHeader(nil, &h)
		if len(b) != headerSize {
			t.Fatalf("encoded %d bytes, want %d", len(b), headerSize)
		}
		got, n, err := decodeHeader(append(b, 1, 2, 3))
		if err != nil || n != headerSize || got != h {
			t.Errorf("decodeHeader(appendHeader(%+v)) = %+v, %d, %v", h, got, n, err)
		}
	}
}

// The encoding is real msgpack: the library reads ours, and ours reads the
// library's compact forms.
func TestHeaderMsgpackInterop(t *testing.T) {
	for _, h := range headerCases {
		var v []any
		if err := msgpack.Unmarshal(appendHeader(nil, &h), &v); err != nil {
			t.Fatal(err)
		}
		if len(v) != 7 {
			t.Fatalf("msgpack sees %d elements", len(v))
		}
		lib, err := msgpack.Marshal([]any{h.Type, h.Flags, h.Key, h.ID, h.Seq, h.Arg, h.Len})
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := decodeHeader(lib)
		if err != nil || n != len(lib) || got != h {
			t.Errorf("decodeHeader(msgpack %x) = %+v, %d, %v; want %+v", lib, got, n, err, h)
		}
		lib, _ = msgpack.Marshal([]any{int64(h.Type), int16(h.Flags), int64(h.Key), h.ID, h.Seq, h.Arg, int32(min(h.Len, 5))})
		if _, _, err := decodeHeader(lib); err != nil {
			t.Errorf("signed forms %x: %v", lib, err)
		}
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	good := appendHeader(nil, &Header{Type: TypeUser, Len: 3})
	cases := map[string][]byte{
		"empty":        nil,
		"not array":    {0x01},
		"array of 6":   {0x96, 1, 1, 1, 1, 1, 1},
		"short":        good[:headerSize-1],
		"string field": {0x97, 0xa1, 'x', 0, 0, 0, 0, 0, 0},
		"type 256":     {0x97, 0xcd, 1, 0, 0, 0, 0, 0, 0, 0},
		"negative len": {0x97, 0, 0, 0, 0, 0, 0, 0xff},
		"arg too big":  {0x97, 0, 0, 0, 0, 0, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0, 0},
		"key 2^32":     {0x97, 0, 0, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
	}
	for name, b := range cases {
		if _, _, err := decodeHeader(b); !errors.Is(err, ErrBadHeader) {
			t.Errorf("%s: err = %v, want ErrBadHeader", name, err)
		}
	}
}

func TestHeaderNoAllocs(t *testing.T) {
	h := headerCases[1]
	buf := make([]byte, 0, headerSize)
	var sink Header
	allocs := testing.AllocsPerRun(1000, func() {
		b := appendHeader(buf[:0], &h)
		sink, _, _ = decodeHeader(b)
	})
	if allocs != 0 || sink != h {
		t.Errorf("encode+decode: %v allocs", allocs)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	for _, h := range headerCases {
		f.Add(appendHeader(nil, &h))
	}
	f.Add([]byte{0x97, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x97, 0xd0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := decodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		if n < 8 || n > len(b) || n > maxHeaderSize {
			t.Fatalf("used %d bytes of %d", n, len(b))
		}
		if fixed := (Header{}); fixed.decodeFixed(b) {
			if any, n, err := decodeAnyHeader(b); err != nil || any != fixed || n != headerSize {
				t.Fatalf("fixed form %x: %+v; any form: %+v %d %v", b, fixed, any, n, err)
			}
		}
		h2, n2, err := decodeHeader(appendHeader(nil, &h))
		if err != nil || h2 != h || n2 != headerSize {
			t.Fatalf("re-encoding %+v: %+v %d %v", h, h2, n2, err)
		}
	})
}

func BenchmarkHeaderEncodeDecode(b *testing.B) {
	h := headerCases[1]
	buf := make([]byte, 0, headerSize)
	b.ReportAllocs()
	for b.Loop() {
		bb := appendHeader(buf[:0], &h)
		decodeHeader(bb)
	}
}
