package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// job3 is a job of 3 tasks, one per process, as TestPartManifests writes it.
var job3 = Fingerprint{Program: "parts", Tasks: 3, Locations: []string{"block"}}

// writeParts writes checkpoint k of job3 as a job of 3 processes does: process r writes
// task r's pieces (a location in a file, a state inline) in stores[r], a copy in its
// partner's, stores[(r+1)%3], and every store commits the pieces it holds, with the
// Summary of all of them. It returns every piece.
func writeParts(t *testing.T, k int, stores []*Store) []PieceInfo {
	t.Helper()
	n := len(stores)
	held := make([][]PieceInfo, n)
	var all []PieceInfo
	for r := range n {
		file, err := stores[r].WritePiece(k, LocationKey(r, "block"), content(k, LocationKey(r, "block")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stores[(r+1)%n].WritePiece(k, file.Key, content(k, file.Key)); err != nil {
			t.Fatal(err)
		}
		inline, err := InlinePiece(StateKey(r, "iter"), []byte{byte(r), byte(k)})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []int{r, (r + 1) % n} {
			held[q] = append(held[q], file, inline)
		}
		all = append(all, file, inline)
	}
	for r, s := range stores {
		if err := s.CommitPart(k, held[r], Summarize(all)); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(all, func(a, b PieceInfo) int { return a.Key.Compare(b.Key) })
	return all
}

// TestPartManifests: each directory's manifest lists only the pieces it holds (its
// process's and its partner's copies), with the Summary of the whole checkpoint. A restart
// that finds every directory, or all but one (its pieces are in its partner's, and listed
// there), restores the whole checkpoint; one whose manifests together lack pieces (a
// directory lost and its partner's manifest damaged) falls back to the previous
// checkpoint and says why, rather than take a part for the whole. Before, every manifest
// listed the job's pieces: a directory's manifest grew with the processes of the job.
func TestPartManifests(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	stores := make([]*Store, len(dirs))
	for r, d := range dirs {
		s, err := Create(d, job3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[r] = s
	}
	writeParts(t, 1, stores)
	all := writeParts(t, 2, stores)
	for _, seen := range [][]string{dirs, dirs[:2], dirs[1:]} {
		c, notes, err := Find(seen, job3)
		if err != nil || c == nil || c.Number != 2 || !slices.Equal(c.Pieces, all) || len(notes) != 0 {
			t.Fatalf("Find over %d of 3 directories: %+v, notes %q, %v; want checkpoint 2 with %d pieces", len(seen), c, notes, err, len(all))
		}
		for _, p := range all {
			got := make([]byte, p.Size)
			if err := c.Load(p.Key, got); err != nil {
				t.Fatalf("Find over %d of 3 directories: %v", len(seen), err)
			}
		}
	}
	// dirs[2] lost; dirs[0], its partner, lost its manifest of checkpoint 2: nothing lists
	// task 2's pieces any more.
	if err := os.Remove(filepath.Join(ckptDir(dirs[0], 2), manifestName)); err != nil {
		t.Fatal(err)
	}
	_, notes, err := Find(dirs[:2], job3)
	want := "checkpoint 2: the manifests found list 4 of its 6 pieces (those of the others are in directories not found); using checkpoint 1"
	if err != nil || len(notes) != 1 || notes[0] != want {
		t.Fatalf("Find over a part: notes %q, %v; want %q", notes, err, want)
	}
	if c := mustFindIn(t, dirs[:2], job3); c.Number != 1 {
		t.Fatalf("Find over a part: checkpoint %d, want 1", c.Number)
	}
}

// mustFindIn returns Find's checkpoint of job in dirs.
func mustFindIn(t *testing.T, dirs []string, job Fingerprint) *Checkpoint {
	t.Helper()
	c, _, err := Find(dirs, job)
	if err != nil || c == nil {
		t.Fatalf("Find: %+v, %v", c, err)
	}
	return c
}

// TestSummaryAddsUp: the Summary of a set of pieces is the sum of its parts' in any
// grouping, and tells a changed entry (a size, a checksum, inline content) from the one
// summarised.
func TestSummaryAddsUp(t *testing.T) {
	var ps []PieceInfo
	for i := range 6 {
		ps = append(ps, PieceInfo{Key: LocationKey(i, "v"), Size: int64(i), CRC: uint32(i * 7)})
	}
	whole := Summarize(ps)
	if got := Summarize(ps[4:]).Add(Summarize(ps[:2])).Add(Summarize(ps[2:4])); got != whole {
		t.Fatalf("the parts add up to %+v, the whole is %+v", got, whole)
	}
	for i, edit := range []func(p *PieceInfo){
		func(p *PieceInfo) { p.Size++ },
		func(p *PieceInfo) { p.CRC++ },
		func(p *PieceInfo) { p.Task++ },
		func(p *PieceInfo) { p.Inline, p.Data = true, "AA==" },
	} {
		changed := slices.Clone(ps)
		edit(&changed[3])
		if Summarize(changed) == whole {
			t.Errorf("edit %d: the same Summary %s", i, fmt.Sprint(whole))
		}
	}
}
