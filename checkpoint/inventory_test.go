package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// piece is a PieceInfo of a test of Choose.
func piece(task int, size int64, crc uint32) PieceInfo {
	return PieceInfo{Key: LocationKey(task, "v"), Size: size, CRC: crc}
}

// inv is an inventory of a test of Choose: the manifests of ks, and copies.
func inv(dir string, manifest map[int][]PieceInfo, copies map[int][]PieceInfo) *Inventory {
	in := &Inventory{}
	for _, k := range slices.Backward(slices.Sorted(func(yield func(int) bool) {
		for k := range manifest {
			yield(k)
		}
	})) {
		in.Manifests = append(in.Manifests, Manifest{Checkpoint: k, Dir: dir, Pieces: manifest[k]})
	}
	for k, ps := range copies {
		for _, p := range ps {
			in.Copies = append(in.Copies, Copy{Checkpoint: k, Dir: dir, PieceInfo: p})
		}
	}
	return in
}

// checkPlan checks plan's checkpoint and holders, and notes against patterns (see like).
func checkPlan(t *testing.T, plan *Plan, notes []string, k int, from []int, wantNotes ...string) {
	t.Helper()
	if plan.Checkpoint != k || !slices.Equal(plan.From, from) {
		t.Fatalf("plan: checkpoint %d from %v; want %d from %v (notes %q)", plan.Checkpoint, plan.From, k, from, notes)
	}
	if len(notes) != len(wantNotes) {
		t.Fatalf("notes %q, want %d like %q", notes, len(wantNotes), wantNotes)
	}
	for i, n := range notes {
		if !like(n, wantNotes[i]) {
			t.Errorf("note %q is not like %q", n, wantNotes[i])
		}
	}
}

// TestChoose: Choose takes the newest checkpoint complete across the union of the
// inventories, reads each piece where its process is when it can, spreads the others over
// the holders, and falls back past a checkpoint whose piece has no intact copy anywhere,
// saying why.
func TestChoose(t *testing.T) {
	m1 := []PieceInfo{piece(0, 8, 1), piece(1, 8, 2), piece(2, 8, 3), piece(3, 8, 4)}
	m2 := []PieceInfo{piece(0, 8, 11), piece(1, 8, 12), piece(2, 8, 13), piece(3, 8, 14)}
	owner := func(k Key) int { return []int{0, 0, 1, 5}[k.Task] } // task 3's process has no inventory
	invs := func() []*Inventory {
		return []*Inventory{
			inv("/a", map[int][]PieceInfo{1: m1, 2: m2}, map[int][]PieceInfo{
				1: m1, 2: {m2[0], piece(1, 8, 99), m2[3]}}), // task 1's copy corrupted
			inv("/b", map[int][]PieceInfo{1: m1}, map[int][]PieceInfo{ // killed before committing 2
				1: m1, 2: {m2[1], m2[2], m2[3]}}),
			inv("/c", nil, map[int][]PieceInfo{2: {m2[3], piece(2, 4, 13)}}), // task 2's truncated
		}
	}
	t.Run("newest across the union", func(t *testing.T) {
		plan, notes := Choose(invs(), owner)
		checkPlan(t, plan, notes, 2, []int{0, 1, 1, 2}, // task 3: the least loaded holder
			`checkpoint 2: piece task 1 location "v" in /a corrupted (crc32c 00000063, manifest 0000000c); using the copy in /b`,
			`checkpoint 2: piece task 2 location "v" in /c truncated (4 of 8 bytes); using the copy in /b`)
		if !slices.Equal(plan.Dirs, []string{"/a", "/b", "/b", "/c"}) || !slices.Equal(plan.Pieces, m2) {
			t.Fatalf("plan %+v", plan)
		}
	})
	t.Run("spread over the holders", func(t *testing.T) {
		// tasks 0 and 1: their only intact copies; task 2: /b, as /c's is truncated; task 3:
		// the least loaded of /a, /b, /c
		plan, notes := Choose(invs(), func(Key) int { return -1 })
		checkPlan(t, plan, notes, 2, []int{0, 1, 1, 2}, `* in /a corrupted*; using the copy in /b`, `* in /c truncated*; using the copy in /b`)
	})
	t.Run("falls back", func(t *testing.T) {
		in := invs()
		in[1].Copies = slices.DeleteFunc(in[1].Copies, func(c Copy) bool { return c.Checkpoint == 2 && c.Task == 1 })
		plan, notes := Choose(in, owner)
		checkPlan(t, plan, notes, 1, []int{0, 0, 1, 1},
			`checkpoint 2: piece task 1 location "v" in /a corrupted (crc32c 00000063, manifest 0000000c); using checkpoint 1`)
		in[0].Copies = slices.DeleteFunc(in[0].Copies, func(c Copy) bool { return c.Checkpoint == 1 && c.Task == 0 })
		in[1].Copies = slices.DeleteFunc(in[1].Copies, func(c Copy) bool { return c.Checkpoint == 1 && c.Task == 0 })
		plan, notes = Choose(in, owner)
		checkPlan(t, plan, notes, 0, nil,
			`checkpoint 2: piece task 1 * corrupted*; no complete checkpoint left: starting afresh`,
			`checkpoint 1: piece task 0 location "v" missing in every directory; no complete checkpoint left: starting afresh`)
	})
	t.Run("nothing", func(t *testing.T) {
		plan, notes := Choose([]*Inventory{{}, {}}, owner)
		checkPlan(t, plan, notes, 0, nil)
	})
	t.Run("manifests that differ", func(t *testing.T) {
		in := invs()
		in[1].Manifests[0].Pieces = m1[:3]
		in[1].Notes = []string{"a note of /b"}
		plan, notes := Choose(in, owner)
		checkPlan(t, plan, notes, 2, []int{0, 1, 1, 2}, "a note of /b",
			"checkpoint 1: manifest in /b differs from the one in /a; using the latter", "*", "*")
	})
}

// TestSurveyThenChoose: two directories that no process sees both (a disk per node), one of
// them without the newest manifest and one piece: their inventories, put together, restore
// every piece from the copies they name, checked as read.
func TestSurveyThenChoose(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa, sb := create(t, a), create(t, b)
	writeCheckpoint(t, 1, sa, sb)
	writeCheckpoint(t, 2, sa, sb)
	key := LocationKey(0, "block")
	for _, name := range []string{"MANIFEST", key.fileName()} { // a was killed before committing 2
		if err := os.Remove(filepath.Join(a, "ckpt-2", name)); err != nil {
			t.Fatal(err)
		}
	}
	corrupt(t, b, 2, StateKey(1, "iter")) // a has the only intact copy
	var invs []*Inventory
	for _, dir := range []string{a, b} {
		in, err := Survey([]string{dir, dir}, testJob)
		if err != nil {
			t.Fatal(err)
		}
		invs = append(invs, in)
	}
	if len(invs[0].Manifests) != 1 || len(invs[1].Manifests) != 2 || len(invs[0].Copies) != 2*len(testKeys())-1 {
		t.Fatalf("inventories: %+v", invs)
	}
	plan, notes := Choose(invs, func(k Key) int { return k.Task })
	if plan.Checkpoint != 2 || len(notes) != 1 || !like(notes[0], fmt.Sprintf("*state \"iter\" in %s corrupted*; using the copy in %s", b, a)) {
		t.Fatalf("plan %+v, notes %q", plan, notes)
	}
	for i, p := range plan.Pieces {
		want := p.Key.Task
		if p.Key == key || p.Key == StateKey(1, "iter") {
			want = 1 - want // the only intact copy
		}
		if plan.From[i] != want || plan.Dirs[i] != []string{a, b}[want] {
			t.Errorf("piece %v read from %d (%s), want %d", p.Key, plan.From[i], plan.Dirs[i], want)
		}
		got := make([]byte, p.Size)
		if err := LoadCopy(plan.Dirs[i], 2, p, got); err != nil || !bytes.Equal(got, content(2, p.Key)) || Checksum(got) != p.CRC {
			t.Errorf("piece %v: %v", p.Key, err)
		}
	}
	p := plan.Pieces[slices.IndexFunc(plan.Pieces, func(p PieceInfo) bool { return p.Key == StateKey(1, "iter") })]
	if err := LoadCopy(b, 2, p, make([]byte, p.Size)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("loading a corrupted copy: %v", err)
	}
	if err := LoadCopy(a, 2, p, make([]byte, p.Size+1)); err == nil {
		t.Error("LoadCopy into a buffer of the wrong size succeeded")
	}
	other := testJob
	other.Tasks = 3
	if _, err := Survey([]string{a}, other); !errors.Is(err, ErrOtherJob) {
		t.Errorf("Survey of another job's directory: %v", err)
	}
}

// TestParseFileName: parseFileName inverts Key.fileName, and refuses the other names of a
// checkpoint's directory.
func TestParseFileName(t *testing.T) {
	for _, k := range []Key{LocationKey(0, "block"), StateKey(12, "a b/é%.x"), LocationKey(3, "%41")} {
		if got, ok := parseFileName(k.fileName()); !ok || got != k {
			t.Errorf("parseFileName(%q) = %v, %v; want %v", k.fileName(), got, ok, k)
		}
	}
	for _, name := range []string{"MANIFEST", ".tmp-location.0.v-123", "location.x.v", "location.01.v", "state.1.%4", "state.1.%41", "other.1.v", "location.1."} {
		if k, ok := parseFileName(name); ok {
			t.Errorf("parseFileName(%q) = %v, want none", name, k)
		}
	}
}
