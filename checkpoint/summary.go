package checkpoint

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
)

// Summary is what proves a checkpoint complete without listing it: the count of its pieces
// and the sum (modulo 2^64) of their digests, each a hash of the whole PieceInfo (key,
// size, checksum, inline content). Summaries add up, so the processes of a job summarise
// the pieces each wrote, and one of them adds their summaries (in any order, or up a tree)
// into the checkpoint's: each process's manifest then lists only the pieces its directory
// holds (CommitPart), with that Summary, and a restart accepts the union of the manifests
// it finds only when it has the Summary's count and digest (Choose).
type Summary struct {
	Pieces int    `json:"pieces"`
	Digest uint64 `json:"digest"`
}

// Summarize returns the Summary of pieces.
func Summarize(pieces []PieceInfo) Summary {
	var s Summary
	for _, p := range pieces {
		s = s.Add(Summary{Pieces: 1, Digest: p.digest()})
	}
	return s
}

// Add returns the Summary of the pieces of s and of o (two disjoint sets).
func (s Summary) Add(o Summary) Summary {
	return Summary{Pieces: s.Pieces + o.Pieces, Digest: s.Digest + o.Digest}
}

// digest is the hash of p that Summary adds up: FNV-1a (64 bits) of every field, each
// delimited.
func (p PieceInfo) digest() uint64 {
	h := fnv.New64a()
	var b []byte
	b = binary.AppendUvarint(b, uint64(p.Kind))
	b = binary.AppendVarint(b, int64(p.Task))
	b = binary.AppendUvarint(b, uint64(len(p.Name)))
	b = append(b, p.Name...)
	b = binary.AppendVarint(b, p.Size)
	b = binary.AppendUvarint(b, uint64(p.CRC))
	if p.Inline {
		b = append(b, 1)
	}
	b = binary.AppendUvarint(b, uint64(len(p.Data)))
	b = append(b, p.Data...)
	h.Write(b)
	return h.Sum64()
}

// combine adds m, a manifest of checkpoint k found in m.Dir, to have, the manifest of k
// made of those found before (nil: none), and returns the result and a note for what it
// left out. Manifests that list the whole checkpoint (Whole nil) are not combined: the
// first is used, and one that differs is noted. Parts of the checkpoint (Whole set, the
// same in both) are united; an entry that a part lists otherwise than have keeps have's,
// and is noted (the Summary then tells whether the union is the checkpoint). A whole
// manifest and a part, or parts of different Summaries, differ: have is kept.
func combine(have *Manifest, m Manifest) (Manifest, []string) {
	if have == nil {
		return m, nil
	}
	differs := fmt.Sprintf("checkpoint %d: manifest in %s differs from the one in %s; using the latter", m.Checkpoint, m.Dir, have.Dir)
	switch {
	case have.Whole == nil && m.Whole == nil:
		if !slices.Equal(have.Pieces, m.Pieces) {
			return *have, []string{differs}
		}
		return *have, nil
	case have.Whole == nil || m.Whole == nil || *have.Whole != *m.Whole:
		return *have, []string{differs}
	}
	var notes []string
	out := *have
	out.Pieces = make([]PieceInfo, 0, max(len(have.Pieces), len(m.Pieces)))
	a, b := have.Pieces, m.Pieces
	for len(a) > 0 || len(b) > 0 {
		var c int
		switch {
		case len(b) == 0:
			c = -1
		case len(a) == 0:
			c = 1
		default:
			c = a[0].Key.Compare(b[0].Key)
		}
		switch {
		case c < 0:
			out.Pieces, a = append(out.Pieces, a[0]), a[1:]
		case c > 0:
			out.Pieces, b = append(out.Pieces, b[0]), b[1:]
		default:
			if a[0] != b[0] {
				notes = append(notes, fmt.Sprintf("checkpoint %d: piece %v in the manifest in %s differs from the one in %s; using the latter",
					m.Checkpoint, a[0].Key, m.Dir, have.Dir))
			}
			out.Pieces, a, b = append(out.Pieces, a[0]), a[1:], b[1:]
		}
	}
	return out, notes
}

// whole returns the Summary of the checkpoint m is (a part of): its own, or, for a
// manifest that lists the whole checkpoint, that of its pieces.
func (m Manifest) whole() Summary {
	if m.Whole != nil {
		return *m.Whole
	}
	return Summarize(m.Pieces)
}

// complete says why m, the union of the manifests of its checkpoint found, is not the
// whole checkpoint, or "".
func (m Manifest) complete() string {
	want, got := m.whole(), Summarize(m.Pieces)
	switch {
	case got.Pieces < want.Pieces:
		return fmt.Sprintf("checkpoint %d: the manifests found list %d of its %d pieces (those of the others are in directories not found)",
			m.Checkpoint, got.Pieces, want.Pieces)
	case got != want:
		return fmt.Sprintf("checkpoint %d: the manifests found list %d pieces, whose digest %016x is not the checkpoint's (%d pieces, %016x)",
			m.Checkpoint, got.Pieces, got.Digest, want.Pieces, want.Digest)
	}
	return ""
}
