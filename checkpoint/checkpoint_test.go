package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

const writerEnv = "CHECKPOINT_TEST_WRITER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		os.Exit(writer(dir))
	}
	goleak.VerifyTestMain(m)
}

// testJob is the job of most tests: 2 tasks, each with a location "block" and "bound" and
// a state "iter".
var testJob = Fingerprint{
	Program:   "test",
	Tasks:     2,
	Locations: []string{"block", "bound"},
	Sizes:     [][]int64{{800, 8}, {800, 8}},
	Params:    map[string]string{"n": "100", "iters": "10"},
}

// testKeys are testJob's pieces.
func testKeys() []Key {
	var ks []Key
	for t := range testJob.Tasks {
		ks = append(ks, LocationKey(t, "block"), LocationKey(t, "bound"), StateKey(t, "iter"))
	}
	return ks
}

// content is the content of piece key in checkpoint k: its size and bytes depend on both.
func content(k int, key Key) []byte {
	b := make([]byte, 100+37*key.Task+11*int(key.Kind)+len(key.Name)+k)
	for i := range b {
		b[i] = byte(k*131 + key.Task*17 + i*7 + len(key.Name))
	}
	return b
}

// create opens a Store on dir for testJob, closed at the test's end.
func create(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Create(dir, testJob)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeCheckpoint writes checkpoint k of testJob over stores: task t's pieces in
// stores[t%n] and a partner copy in stores[(t+1)%n] when there are several, then commits
// it in every store.
func writeCheckpoint(t *testing.T, k int, stores ...*Store) []PieceInfo {
	t.Helper()
	var infos []PieceInfo
	for _, key := range testKeys() {
		owner := stores[key.Task%len(stores)]
		info, err := owner.WritePiece(k, key, content(k, key))
		if err != nil {
			t.Fatal(err)
		}
		if len(stores) > 1 {
			partner := stores[(key.Task+1)%len(stores)]
			if copied, err := partner.WritePiece(k, key, content(k, key)); err != nil || copied != info {
				t.Fatalf("partner copy: %+v, %v; want %+v", copied, err, info)
			}
		}
		infos = append(infos, info)
	}
	for _, s := range stores {
		if err := s.Commit(k, infos); err != nil {
			t.Fatal(err)
		}
	}
	return infos
}

// like reports whether s holds the parts of pattern around each "*", in order.
func like(s, pattern string) bool {
	for _, part := range strings.Split(pattern, "*") {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

// mustFind runs Find and checks that it found checkpoint want (0: none) with notes like
// wantNotes, and that every piece reads back.
func mustFind(t *testing.T, dirs []string, want int, wantNotes ...string) *Checkpoint {
	t.Helper()
	c, notes, err := Find(dirs, testJob)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != len(wantNotes) {
		t.Fatalf("notes %q, want %d like %q", notes, len(wantNotes), wantNotes)
	}
	for i, n := range notes {
		if !like(n, wantNotes[i]) {
			t.Errorf("note %q is not like %q", n, wantNotes[i])
		}
	}
	if want == 0 {
		if c != nil {
			t.Fatalf("found checkpoint %d, want none", c.Number)
		}
		return nil
	}
	if c == nil || c.Number != want {
		t.Fatalf("found %+v, want checkpoint %d", c, want)
	}
	checkContent(t, c)
	return c
}

// checkContent checks that every piece of c loads with the content of its checkpoint.
func checkContent(t *testing.T, c *Checkpoint) {
	t.Helper()
	if len(c.Pieces) != len(testKeys()) {
		t.Fatalf("checkpoint %d has %d pieces, want %d", c.Number, len(c.Pieces), len(testKeys()))
	}
	for _, key := range testKeys() {
		want := content(c.Number, key)
		got := make([]byte, len(want))
		if err := c.Load(key, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("checkpoint %d piece %v: %v, content equal: %v", c.Number, key, err, bytes.Equal(got, want))
		}
	}
}

// names lists the entries of dir, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, de := range des {
		n = append(n, de.Name())
	}
	return n
}

// checkContents checks that c holds want: each piece's size, and its content as Open
// streams it and as Load reads it.
func checkContents(t *testing.T, c *Checkpoint, want map[Key][]byte) {
	t.Helper()
	for key, data := range want {
		if p, _ := c.Piece(key); p.Size != int64(len(data)) {
			t.Errorf("piece %v: size %d, want %d", key, p.Size, len(data))
		}
		r, err := c.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Open(%v): %q, %v; want %q", key, got, err, data)
		}
		got = make([]byte, len(data))
		if err := c.Load(key, got); err != nil || !bytes.Equal(got, data) {
			t.Errorf("Load(%v): %q, %v; want %q", key, got, err, data)
		}
	}
}

// A checkpoint reads back as written, pieces streamed or whole, empty or with odd names,
// in the documented layout.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := create(t, dir)
	odd := StateKey(1, "a/b c%é")
	empty := StateKey(0, "empty")
	want := map[Key][]byte{odd: []byte("odd"), empty: {}}
	var infos []PieceInfo
	for _, key := range testKeys() {
		want[key] = content(1, key)
		w, err := s.NewPiece(1, key)
		if err != nil {
			t.Fatal(err)
		}
		for b := want[key]; len(b) > 0; b = b[min(len(b), 50):] { // several writes
			if _, err := w.Write(b[:min(len(b), 50)]); err != nil {
				t.Fatal(err)
			}
		}
		info, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	for _, key := range []Key{odd, empty} {
		info, err := s.WritePiece(1, key, want[key])
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if err := s.Commit(1, infos); err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"MANIFEST", "location.0.block", "location.0.bound", "location.1.block", "location.1.bound",
		"state.0.empty", "state.0.iter", "state.1.a%2Fb%20c%25%C3%A9", "state.1.iter"}
	if got := names(t, filepath.Join(dir, "ckpt-1")); !slices.Equal(got, wantFiles) {
		t.Errorf("files %q, want %q", got, wantFiles)
	}
	c, notes, err := Find([]string{dir}, testJob)
	if err != nil || c == nil || c.Number != 1 || len(notes) != 0 || len(c.Pieces) != len(want) {
		t.Fatalf("Find: %+v, %q, %v", c, notes, err)
	}
	checkContents(t, c, want)
	if _, err := c.Open(StateKey(5, "none")); err == nil {
		t.Error("opened a piece the checkpoint lacks")
	}
	if err := c.Load(odd, make([]byte, 2)); err == nil || !strings.Contains(err.Error(), "has 3 bytes, not 2") {
		t.Errorf("Load into a wrong size: %v", err)
	}
}

// Pieces of at most InlineMax bytes live in the manifest: no file, read back from any
// directory whose manifest is committed, each read checked against its checksum.
func TestInlinePieces(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa, sb := create(t, a), create(t, b)
	full := bytes.Repeat([]byte{0xff, 0, 0x80}, InlineMax/3)
	want := map[Key][]byte{
		LocationKey(0, "bound"): {1, 2, 3, 4, 5, 6, 7, 8},
		LocationKey(1, "bound"): {},
		StateKey(1, "iter"):     full,
	}
	var infos []PieceInfo
	for key, data := range want {
		info, err := InlinePiece(key, data)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	for _, key := range []Key{LocationKey(0, "block"), StateKey(0, "iter"), LocationKey(1, "block")} {
		want[key] = content(1, key)
		info, err := sa.WritePiece(1, key, want[key]) // in a only
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	for _, s := range []*Store{sa, sb} {
		if err := s.Commit(1, infos); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := names(t, filepath.Join(b, "ckpt-1")), []string{"MANIFEST"}; !slices.Equal(got, want) {
		t.Errorf("b holds %q, want %q", got, want)
	}
	c, notes, err := Find([]string{a, b}, testJob)
	if err != nil || c == nil || c.Number != 1 || len(notes) != 0 {
		t.Fatalf("Find: %+v, %q, %v", c, notes, err)
	}
	checkContents(t, c, want)

	// a process that has no inventory needs them: they are read where the others are
	both, err := Survey([]string{a, b}, testJob)
	if err != nil {
		t.Fatal(err)
	}
	plan, notes := Choose([]*Inventory{both}, func(Key) int { return 7 })
	if plan.Checkpoint != 1 || slices.ContainsFunc(plan.From, func(f int) bool { return f != 0 }) {
		t.Errorf("Choose for an inventory that is not there: checkpoint %d from %v (notes %q), want 1 from inventory 0",
			plan.Checkpoint, plan.From, notes)
	}

	// b alone: its manifest has the inline pieces, not the others'
	inv, err := Survey([]string{b}, testJob)
	if err != nil {
		t.Fatal(err)
	}
	plan, notes = Choose([]*Inventory{inv}, func(Key) int { return 0 })
	if plan.Checkpoint != 0 || len(notes) != 3 {
		t.Errorf("b alone: checkpoint %d, notes %q; want none, the 3 pieces in files missing", plan.Checkpoint, notes)
	}
	for _, n := range notes {
		if strings.Contains(n, "bound") || strings.Contains(n, `"iter"`) && strings.Contains(n, "task 1") {
			t.Errorf("an inline piece is said missing: %q", n)
		}
	}

	_, err = InlinePiece(StateKey(0, "big"), make([]byte, InlineMax+1))
	if err == nil || !strings.Contains(err.Error(), "more than a manifest holds") {
		t.Errorf("InlinePiece of %d bytes: %v", InlineMax+1, err)
	}
	if _, err := InlinePiece(StateKey(0, ""), nil); err == nil {
		t.Error("InlinePiece of an empty name: no error")
	}
	bad := infos[0]
	bad.Data = "AAAA" // other bytes than its checksum's
	if err := sa.Commit(2, []PieceInfo{bad}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Commit of an inline piece whose data does not match: %v", err)
	}
}

// Pieces of one checkpoint written at once from many goroutines (run with -race).
func TestConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	s := create(t, dir)
	keys := testKeys()
	infos := make([]PieceInfo, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() { infos[i], errs[i] = s.WritePiece(1, key, content(1, key)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(1, infos); err != nil {
		t.Fatal(err)
	}
	mustFind(t, []string{dir}, 1)
}

// A piece reuses the file of its name of the checkpoint pruned last, shorter or longer
// than it was, and reads back as written; a piece with no such file gets a new one.
func TestPiecesReuseThePrunedFiles(t *testing.T) {
	dir := t.TempDir()
	s := create(t, dir)
	for k := 1; k <= 3; k++ {
		writeCheckpoint(t, k, s)
	}
	if got, want := names(t, filepath.Join(dir, recycleName)), names(t, filepath.Join(dir, "ckpt-2")); !slices.Equal(got, want) {
		t.Fatalf("recycled after 3 commits: %q, want checkpoint 1's %q", got, want)
	}
	block, iter := LocationKey(0, "block"), StateKey(1, "iter")
	old := make(map[Key]os.FileInfo)
	for _, key := range []Key{block, iter} {
		fi, err := os.Stat(filepath.Join(dir, recycleName, key.fileName()))
		if err != nil {
			t.Fatal(err)
		}
		old[key] = fi
	}
	want := map[Key][]byte{block: []byte("shorter"), iter: bytes.Repeat([]byte("longer"), 100)}
	var infos []PieceInfo
	for _, key := range testKeys() {
		data, ok := want[key]
		if !ok {
			data = content(4, key)
			want[key] = data
		}
		info, err := s.WritePiece(4, key, data)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	for key, fi := range old {
		now, err := os.Stat(filepath.Join(dir, "ckpt-4", key.fileName()))
		if err != nil || !os.SameFile(fi, now) {
			t.Errorf("piece %v of checkpoint 4: not the recycled file (%v)", key, err)
		}
	}
	if got := names(t, filepath.Join(dir, recycleName)); len(got) != 1 || got[0] != manifestName {
		t.Errorf("left in the recycled files: %q, want the manifest alone", got)
	}
	odd := StateKey(0, "new")
	want[odd] = []byte("no file of that name to reuse")
	info, err := s.WritePiece(4, odd, want[odd])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(4, append(infos, info)); err != nil {
		t.Fatal(err)
	}
	c, notes, err := Find([]string{dir}, testJob)
	if err != nil || c == nil || c.Number != 4 || len(notes) != 0 {
		t.Fatalf("Find: %+v, %q, %v", c, notes, err)
	}
	checkContents(t, c, want)
}

// After each commit a directory keeps its two newest complete checkpoints; incomplete
// ones older than the commit go, newer ones (being written) stay.
func TestKeepLastTwo(t *testing.T) {
	dir := t.TempDir()
	s := create(t, dir)
	for k := 1; k <= 4; k++ {
		writeCheckpoint(t, k, s)
	}
	if got, want := names(t, dir), []string{".recycle", "LOCK", "ckpt-3", "ckpt-4"}; !slices.Equal(got, want) {
		t.Errorf("after 4 commits: %q, want %q", got, want)
	}
	if _, err := s.WritePiece(5, LocationKey(0, "block"), []byte("abandoned")); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, 6, s)
	if _, err := s.WritePiece(8, LocationKey(0, "block"), []byte("early")); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, 7, s)
	if got, want := names(t, dir), []string{".recycle", "LOCK", "ckpt-6", "ckpt-7", "ckpt-8"}; !slices.Equal(got, want) {
		t.Errorf("after commits 6 and 7: %q, want %q", got, want)
	}
	mustFind(t, []string{dir}, 7)
	if err := s.Commit(7, nil); err == nil || !strings.Contains(err.Error(), "already committed") {
		t.Errorf("second commit of 7: %v", err)
	}
	if err := s.Discard(7); err == nil || !strings.Contains(err.Error(), "is complete: not discarded") {
		t.Errorf("Discard(7): %v", err)
	}
}

// twoCheckpoints returns a directory holding checkpoints 1 and 2, and its Store.
func twoCheckpoints(t *testing.T) (string, *Store) {
	t.Helper()
	dir := t.TempDir()
	s := create(t, dir)
	writeCheckpoint(t, 1, s)
	writeCheckpoint(t, 2, s)
	return dir, s
}

// corrupt flips one byte of a piece's file.
func corrupt(t *testing.T, dir string, k int, key Key) {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("ckpt-%d", k), key.fileName())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A corrupted piece makes Find fall back to the previous checkpoint and say so; with none
// left, it starts afresh.
func TestCorruptionFallsBack(t *testing.T) {
	dir, _ := twoCheckpoints(t)
	bad := LocationKey(1, "block")
	corrupt(t, dir, 2, bad)
	mustFind(t, []string{dir}, 1,
		fmt.Sprintf(`checkpoint 2: piece task 1 location "block" in %s corrupted (crc32c *, manifest *); using checkpoint 1`, dir))
	corrupt(t, dir, 1, StateKey(0, "iter"))
	mustFind(t, []string{dir}, 0, `checkpoint 2: piece task 1 location "block" in *; no complete checkpoint left: starting afresh`,
		fmt.Sprintf(`checkpoint 1: piece task 0 state "iter" in %s corrupted*; no complete checkpoint left: starting afresh`, dir))
}

// A piece that goes bad after Find is caught as it is read, whole or streamed.
func TestReadVerifiesChecksum(t *testing.T) {
	dir := t.TempDir()
	writeCheckpoint(t, 1, create(t, dir))
	c := mustFind(t, []string{dir}, 1)
	key := LocationKey(0, "block")
	corrupt(t, dir, 1, key)
	if err := c.Load(key, make([]byte, len(content(1, key)))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of a corrupted piece: %v", err)
	}
	r, err := c.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadAll(r); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "corrupted (crc32c") {
		t.Errorf("streaming a corrupted piece: %v", err)
	}
}

// A truncated piece (a short write, a disk losing its tail) is found by its size.
func TestTruncatedPiece(t *testing.T) {
	dir, _ := twoCheckpoints(t)
	key := StateKey(1, "iter")
	if err := os.Truncate(filepath.Join(dir, "ckpt-2", key.fileName()), 10); err != nil {
		t.Fatal(err)
	}
	mustFind(t, []string{dir}, 1, fmt.Sprintf(`checkpoint 2: piece task 1 state "iter" in %s truncated (10 of %d bytes); using checkpoint 1`,
		dir, len(content(2, key))))
}

// Every piece lives in two directories: a lost directory, a missing or corrupted copy, a
// manifest committed in only one directory are all made up for by the other.
func TestPartnerCopies(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa, sb := create(t, a), create(t, b)
	writeCheckpoint(t, 1, sa, sb)
	writeCheckpoint(t, 2, sa, sb)
	mustFind(t, []string{a}, 2) // b lost: a holds every piece
	mustFind(t, []string{b}, 2)
	key := LocationKey(0, "block")
	if err := os.Remove(filepath.Join(b, "ckpt-2", key.fileName())); err != nil {
		t.Fatal(err)
	}
	corrupt(t, a, 2, key) // a's copy corrupted, b's gone
	mustFind(t, []string{a, b}, 1, fmt.Sprintf(`checkpoint 2: piece task 0 location "block" in %s corrupted`, a))

	writeCheckpoint(t, 3, sa, sb)
	corrupt(t, a, 3, key) // b's copy makes up for it
	mustFind(t, []string{a, b}, 3, fmt.Sprintf(`checkpoint 3: piece task 0 location "block" in %s corrupted (crc32c *); using the copy in %s`, a, b))
	if err := os.Remove(filepath.Join(b, "ckpt-3", "MANIFEST")); err != nil { // b died before committing
		t.Fatal(err)
	}
	mustFind(t, []string{a, b}, 3, "corrupted*; using the copy in "+b)
	if err := os.Remove(filepath.Join(b, "ckpt-3", key.fileName())); err != nil {
		t.Fatal(err)
	}
	// 2 was damaged above, and 1 is gone (the two newest kept were 2 and 3)
	mustFind(t, []string{a, b}, 0, fmt.Sprintf(`checkpoint 3: piece task 0 location "block" in %s corrupted*; no complete checkpoint left`, a),
		fmt.Sprintf(`checkpoint 2: piece task 0 location "block" in %s corrupted*; no complete checkpoint left`, a))
}

// A directory of another job is refused, naming the difference, and left as it was.
func TestOtherJobRefused(t *testing.T) {
	dir := t.TempDir()
	s := create(t, dir)
	writeCheckpoint(t, 1, s)
	s.Close()
	before := names(t, filepath.Join(dir, "ckpt-1"))
	other := testJob
	other.Tasks = 3
	want := fmt.Sprintf("checkpoint 1 in %s is of another job: tasks 2, this job 3", dir)
	if _, err := Create(dir, other); !errors.Is(err, ErrOtherJob) || err.Error() != want {
		t.Errorf("Create: %v, want %q", err, want)
	}
	_, _, err := Find([]string{dir}, other)
	var me *MismatchError
	if !errors.As(err, &me) || me.Dir != dir || me.Checkpoint != 1 || me.Diff != "tasks 2, this job 3" {
		t.Errorf("Find: %v, want %q", err, want)
	}
	if got := names(t, filepath.Join(dir, "ckpt-1")); !slices.Equal(got, before) {
		t.Errorf("directory changed: %q, was %q", got, before)
	}
	mustFind(t, []string{dir}, 1)
}

func TestFingerprintDiff(t *testing.T) {
	change := func(f func(*Fingerprint)) Fingerprint {
		g := testJob
		g.Sizes = [][]int64{{800, 8}, {800, 8}}
		g.Params = map[string]string{"n": "100", "iters": "10"}
		f(&g)
		return g
	}
	for _, c := range []struct {
		job  Fingerprint
		want string
	}{
		{change(func(*Fingerprint) {}), ""},
		{change(func(g *Fingerprint) { g.Program = "other" }), `program "test", this job "other"`},
		{change(func(g *Fingerprint) { g.Tasks = 4 }), "tasks 2, this job 4"},
		{change(func(g *Fingerprint) { g.Locations = []string{"block"} }), `locations ["block" "bound"], this job ["block"]`},
		{change(func(g *Fingerprint) { g.Sizes[1][0] = 640 }), `task 1 "block": size 800, this job 640`},
		{change(func(g *Fingerprint) { g.Sizes = nil }), "sizes of 2 tasks, this job 0"},
		{change(func(g *Fingerprint) { g.Sizes[0] = g.Sizes[0][:1] }), `task 0 "bound": size 8, this job none`},
		{change(func(g *Fingerprint) { g.Params["n"] = "200" }), "parameter n=100, this job n=200"},
		{change(func(g *Fingerprint) { delete(g.Params, "iters") }), "parameter iters=10, this job none"},
		{change(func(g *Fingerprint) { g.Params["eps"] = "1e-9" }), "no parameter eps, this job eps=1e-9"},
	} {
		if got := testJob.Diff(c.job); got != c.want {
			t.Errorf("Diff(%+v) = %q, want %q", c.job, got, c.want)
		}
	}
}

// A directory that cannot be written fails at once, naming it.
func TestUnwritableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create("", testJob); err == nil || err.Error() != "checkpoint: no directory given" {
		t.Errorf("Create without a directory: %v", err)
	}
	under := filepath.Join(file, "ckpt")
	if _, err := Create(under, testJob); err == nil || !strings.Contains(err.Error(), under) {
		t.Errorf("Create under a file: %v", err)
	}
	ro := mountTmpfs(t, true, "size=64k")
	for _, dir := range []string{ro, filepath.Join(ro, "sub")} {
		_, err := Create(dir, testJob)
		if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "checkpoint: directory "+dir) {
			t.Errorf("Create on a read-only file system: %v", err)
		}
	}
}

// A directory is one process's: a second Store on it fails until the first is closed.
func TestDirInUse(t *testing.T) {
	dir := t.TempDir()
	s := create(t, dir)
	if _, err := Create(dir, testJob); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("checkpoint: directory %s is in use by pid %d on host ", dir, os.Getpid())) {
		t.Errorf("second Create: %v", err)
	}
	s.Close()
	if _, err := s.WritePiece(1, LocationKey(0, "block"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("WritePiece after Close: %v", err)
	}
	create(t, dir)
}

// Bad keys, numbers and manifests are refused with an error naming them.
func TestMisuse(t *testing.T) {
	s := create(t, t.TempDir())
	info, err := s.WritePiece(1, LocationKey(0, "block"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{second(s.WritePiece(0, LocationKey(0, "block"), nil)), "checkpoint 0: numbers start at 1"},
		{second(s.WritePiece(1, LocationKey(-1, "block"), nil)), `piece task -1 location "block": negative task`},
		{second(s.WritePiece(1, StateKey(0, ""), nil)), `piece task 0 state "": empty name`},
		{second(s.WritePiece(1, StateKey(0, strings.Repeat("x", 300)), nil)), "name longer than 200 bytes"},
		{s.Commit(1, []PieceInfo{info, info}), `piece task 0 location "block" listed twice`},
		{s.Commit(1, []PieceInfo{{Key: info.Key, Size: 1, CRC: info.CRC + 1}}), `piece task 0 location "block" written in`},
		{s.Commit(1, nil), "is not in the manifest as such"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v, want %q", c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// A full disk: the write fails with an error the caller recognises, the partial file is
// removed, the previous checkpoint stays complete, and the job goes on once room is made.
func TestFullDisk(t *testing.T) {
	dir := mountTmpfs(t, false, "size=256k")
	s := create(t, dir)
	writeCheckpoint(t, 1, s)
	if _, err := s.WritePiece(2, LocationKey(0, "block"), content(2, LocationKey(0, "block"))); err != nil {
		t.Fatal(err)
	}
	_, err := s.WritePiece(2, StateKey(0, "big"), make([]byte, 512<<10))
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("writing more than the disk holds: %v", err)
	}
	w, err := s.NewPiece(2, StateKey(1, "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for err == nil {
		_, err = w.Write(chunk)
	}
	if !errors.Is(err, ErrNoSpace) || !errors.Is(second(w.Finish()), ErrNoSpace) {
		t.Fatalf("streaming more than the disk holds: %v", err)
	}
	if got, want := names(t, filepath.Join(dir, "ckpt-2")), []string{"location.0.block"}; !slices.Equal(got, want) {
		t.Errorf("after the failures checkpoint 2 holds %q, want %q", got, want)
	}
	mustFind(t, []string{dir}, 1)
	if err := s.Discard(2); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, 3, s)
	mustFind(t, []string{dir}, 3)
}

// A job restarted from an older checkpoint writes the newer numbers again: the first write
// of a number replaces what an earlier run left there.
func TestRewriteAfterRestart(t *testing.T) {
	dir, s := twoCheckpoints(t)
	if _, err := s.WritePiece(3, LocationKey(0, "block"), []byte("left over")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	corrupt(t, dir, 2, LocationKey(0, "bound"))
	mustFind(t, []string{dir}, 1, "checkpoint 2: * corrupted*; using checkpoint 1")
	s = create(t, dir)
	writeCheckpoint(t, 2, s)
	if got, want := names(t, dir), []string{"LOCK", "ckpt-1", "ckpt-2"}; !slices.Equal(got, want) {
		t.Errorf("after rewriting 2: %q, want %q", got, want)
	}
	mustFind(t, []string{dir}, 2)
}

// A damaged manifest is reported and its copy in another directory used.
func TestDamagedManifest(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeCheckpoint(t, 1, create(t, a), create(t, b))
	path := filepath.Join(a, "ckpt-1", "MANIFEST")
	m, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(m, []byte(`"tasks":2`), []byte(`"tasks":3`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	mustFind(t, []string{a, b}, 1, fmt.Sprintf("checkpoint 1: manifest in %s unreadable (%s: checkpoint: piece corrupted: checksum mismatch); not used", a, path))
}

// Manifests of one number that differ (a directory left by an abandoned run) are reported.
func TestManifestsDiffer(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeCheckpoint(t, 1, create(t, a))
	sb := create(t, b)
	info, err := sb.WritePiece(1, StateKey(0, "extra"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Commit(1, []PieceInfo{info}); err != nil {
		t.Fatal(err)
	}
	mustFind(t, []string{a, b}, 1, fmt.Sprintf("checkpoint 1: manifest in %s differs from the one in %s; using the latter", b, a))
}

func TestPatterns(t *testing.T) {
	if got := Expand("/c/{host}/r{rank}.{rank}", 3, "n1"); got != "/c/n1/r3.3" {
		t.Errorf("Expand: %q", got)
	}
	base := filepath.Join(t.TempDir(), "a[*]")
	for _, d := range []string{"h1/r0", "h1/r1", "h2/r12", "h1/rx", "h3/q1", "h1/r"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "h2", "r3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Glob(base + "/{host}/r{rank}")
	want := []string{base + "/h1/r0", base + "/h1/r1", base + "/h2/r12"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Glob = %q, %v; want %q", got, err, want)
	}
	if got, err := Glob(base + "/h1/r1/"); err != nil || !slices.Equal(got, []string{base + "/h1/r1"}) {
		t.Errorf("Glob without placeholders = %q, %v", got, err)
	}
	if got, err := Glob(base + "/none/{rank}"); err != nil || len(got) != 0 {
		t.Errorf("Glob of nothing = %q, %v", got, err)
	}
}
