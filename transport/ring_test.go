package transport

import (
	"bytes"
	"testing"
	"unsafe"
)

// testRing returns a ring of a segment in this process's memory, 8-byte aligned, and its two
// ends.
func testRing() (*ringWriter, *ringReader) {
	words := make([]uint64, segmentSize/8)
	up, _ := rings(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), segmentSize))
	return &ringWriter{ring: up}, &ringReader{ring: up}
}

// Records of a few hundred bytes, each read before the next few are written, keep cycling
// through the ring's first pages: the writer goes back to the ring's start when the reader
// has read everything, so a long job does not touch (fault in, and keep resident) the whole
// ring. The bytes read are those written, in order, and the bytes the writer touched (the
// highest offset of a record's end, with the cleared word after it) stay within a bound;
// records of up to shmChunk bytes go back to the start too, once past themselves.
func TestRingStaysSmallWhileTheReaderKeepsUp(t *testing.T) {
	const traffic = 3 * shmRing // bytes of records, enough to walk the ring three times over
	for _, tc := range []struct {
		name  string
		most  int    // the most bytes of a record
		burst int    // records written before the reader reads them all
		bound uint64 // the most ring bytes the writer may touch
	}{
		{"one by one", 400, 1, rewindAfter + 2<<10},
		{"in bursts of 7", 400, 7, 8 * rewindAfter},
		{"large, one by one", shmChunk, 1, 3 * shmChunk},
	} {
		w, r := testRing()
		var touched, sent uint64
		var written [][]byte
		buf := make([]byte, shmChunk)
		for i := 0; sent < traffic; i++ {
			p := bytes.Repeat([]byte{byte(i)}, 1+i*7919%tc.most)
			if w.put(p) != len(p) {
				t.Fatalf("%s: record %d of %d bytes: no room in the ring", tc.name, i, len(p))
			}
			touched = max(touched, (w.pos-1)&(shmRing-1)+9)
			sent += uint64(len(p))
			if written = append(written, p); len(written) < tc.burst {
				continue
			}
			for _, want := range written {
				if n := r.take(buf); !bytes.Equal(buf[:n], want) {
					t.Fatalf("%s: record %d: read %d bytes %q..., want %d of %q", tc.name, i, n, buf[:min(n, 4)], len(want), want[:1])
				}
			}
			written = written[:0]
			if r.ready() {
				t.Fatalf("%s: a record to read after record %d, all read", tc.name, i)
			}
		}
		if touched > tc.bound {
			t.Errorf("%s: %d bytes of records touched %d bytes of the ring, want at most %d", tc.name, sent, touched, tc.bound)
		}
	}
}
