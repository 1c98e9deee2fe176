//go:build unix

package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of this file build the checkpoint directories that a disk, another user or a bad
// copy may leave, and check that a restart reads, renames, writes and deletes nothing outside
// the directory, never hangs, allocates for no piece that cannot fit, and falls back to the
// previous checkpoint saying why.

// within returns f's result, failing the test when f has not returned within 10 s; fifo,
// when not "", is a named pipe that f may be stuck opening: it is then opened for writing,
// which lets f go on, so that no goroutine outlives the test.
func within[T any](t *testing.T, fifo string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		if fifo != "" {
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		t.Fatal("hung for 10 s")
		return *new(T)
	}
}

// outsideFile writes b to a new file outside every checkpoint directory and returns its path.
func outsideFile(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceWith removes path and makes in its place what make makes there.
func replaceWith(t *testing.T, path string, make func(string) error) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := make(path); err != nil {
		t.Fatal(err)
	}
}

func symlinkTo(target string) func(string) error {
	return func(path string) error { return os.Symlink(target, path) }
}

func fifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// TestManifestNotRegular: a MANIFEST that is a link (to a device, to a file elsewhere), a
// named pipe or a file longer than any manifest of the job is not read: the checkpoint is
// damaged, and the previous one is used, saying why, without hanging or running out of
// memory.
func TestManifestNotRegular(t *testing.T) {
	for _, c := range []struct {
		name, why string
		make      func(t *testing.T, path string) func(string) error
	}{
		{"link to /dev/zero", "not a regular file (a symbolic link)",
			func(*testing.T, string) func(string) error { return symlinkTo("/dev/zero") }},
		{"link elsewhere", "not a regular file (a symbolic link)", func(t *testing.T, path string) func(string) error {
			b, err := os.ReadFile(path) // the manifest itself, readable through the link
			if err != nil {
				t.Fatal(err)
			}
			return symlinkTo(outsideFile(t, b))
		}},
		{"named pipe", "not a regular file (a named pipe)", func(*testing.T, string) func(string) error { return fifo }},
		{"sparse, too long", fmt.Sprintf("%d bytes, more than a manifest of this job", manifestLimit(testJob)+1), func(*testing.T, string) func(string) error {
			return func(path string) error {
				f, err := os.Create(path)
				if err == nil {
					err = f.Truncate(manifestLimit(testJob) + 1)
					f.Close()
				}
				return err
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := twoCheckpoints(t)
			path := filepath.Join(dir, "ckpt-2", manifestName)
			replaceWith(t, path, c.make(t, path))
			type found struct {
				c     *Checkpoint
				notes []string
				err   error
			}
			got := within(t, path, func() found {
				cp, notes, err := Find([]string{dir}, testJob)
				return found{cp, notes, err}
			})
			want := fmt.Sprintf("checkpoint 2: manifest in %s unreadable (%s*%s*); using checkpoint 1", dir, path, c.why)
			if got.err != nil || got.c == nil || got.c.Number != 1 || len(got.notes) != 1 || !like(got.notes[0], want) {
				t.Fatalf("Find: %+v, %q, %v; want checkpoint 1 and a note like %q", got.c, got.notes, got.err, want)
			}
			checkContent(t, got.c)
		})
	}
}

// TestPieceNotRegular: a piece's file that is a link or a named pipe is not read, by Survey
// nor by LoadCopy, even when the content it leads to is what the manifest lists.
func TestPieceNotRegular(t *testing.T) {
	for _, c := range []struct {
		name, why string
		make      func(t *testing.T, content []byte) func(string) error
	}{
		{"link elsewhere", "(a symbolic link)", func(t *testing.T, b []byte) func(string) error { return symlinkTo(outsideFile(t, b)) }},
		{"named pipe", "(a named pipe)", func(*testing.T, []byte) func(string) error { return fifo }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCheckpoint(t, 1, create(t, dir))
			key := LocationKey(1, "block")
			path := filepath.Join(dir, "ckpt-1", key.fileName())
			replaceWith(t, path, c.make(t, content(1, key)))
			p := PieceInfo{Key: key, Size: int64(len(content(1, key))), CRC: Checksum(content(1, key))}
			err := within(t, path, func() error { return LoadCopy(dir, 1, p, make([]byte, p.Size)) })
			if want := fmt.Sprintf("*%s is not a regular file %s", path, c.why); err == nil || !like(err.Error(), want) {
				t.Errorf("LoadCopy: %v; want an error like %q", err, want)
			}
			mustFind(t, []string{dir}, 0, fmt.Sprintf(`checkpoint 1: piece %v missing in every directory; no complete checkpoint left: starting afresh`, key))
		})
	}
}

// TestRestartWritesNothingOutside: the files a Store reuses (DIR/.recycle) and the
// checkpoint directories it replaces are never followed out of DIR: a .recycle that is a
// link, links or hard links among its files, a checkpoint's directory that is a link. The
// files outside keep their place and content, and the checkpoint written is intact.
func TestRestartWritesNothingOutside(t *testing.T) {
	precious := []byte("precious")
	for _, c := range []struct {
		name string
		// plant makes dir's hostile entries, leading to outside, and returns the files
		// outside that must stay as they are.
		plant func(t *testing.T, dir, outside string) []string
	}{
		{".recycle is a link", func(t *testing.T, dir, outside string) []string {
			replaceWith(t, filepath.Join(dir, recycleName), symlinkTo(outside))
			return pieceFiles(t, outside, precious)
		}},
		{"links in .recycle", func(t *testing.T, dir, outside string) []string {
			files := pieceFiles(t, outside, precious)
			for _, f := range files {
				replaceWith(t, filepath.Join(dir, recycleName, filepath.Base(f)), symlinkTo(f))
			}
			return files
		}},
		{"hard links in .recycle", func(t *testing.T, dir, outside string) []string {
			files := pieceFiles(t, outside, precious)
			for _, f := range files {
				replaceWith(t, filepath.Join(dir, recycleName, filepath.Base(f)), func(path string) error { return os.Link(f, path) })
			}
			return files
		}},
		{"ckpt-4 is a link", func(t *testing.T, dir, outside string) []string {
			replaceWith(t, filepath.Join(dir, "ckpt-4"), symlinkTo(outside))
			return pieceFiles(t, outside, precious)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			s := create(t, dir)
			for k := 1; k <= 3; k++ { // checkpoint 1's files are now in .recycle
				writeCheckpoint(t, k, s)
			}
			s.Close()
			files := c.plant(t, dir, outside)
			writeCheckpoint(t, 4, create(t, dir)) // the restarted job
			for _, f := range files {
				if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, precious) {
					t.Errorf("%s outside the directory: %q, %v; want it as it was", f, b, err)
				}
			}
			if fi, err := os.Lstat(filepath.Join(dir, "ckpt-4")); err != nil || !fi.IsDir() {
				t.Errorf("ckpt-4: %v, %v; want a directory", fi, err)
			}
			mustFind(t, []string{dir}, 4)
		})
	}
}

// pieceFiles writes, in dir, a file b of the name of each piece of testJob, and returns
// their paths.
func pieceFiles(t *testing.T, dir string, b []byte) []string {
	t.Helper()
	var files []string
	for _, key := range testKeys() {
		f := filepath.Join(dir, key.fileName())
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// rewriteManifest rewrites the manifest of checkpoint k in dir as edit changes it, with a
// checksum that matches: the manifest an editor (or a bad tool) leaves.
func rewriteManifest(t *testing.T, dir string, k int, edit func(m *manifest)) string {
	t.Helper()
	path := filepath.Join(ckptDir(dir, k), manifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b[:bytes.LastIndex(b, []byte("\ncrc32c "))], &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if b, err = m.encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEditedManifestFallsBack: a manifest whose checksum matches but whose pieces cannot be
// those of the job makes the restart use the previous checkpoint and say why, in Find and
// in Survey then Choose.
func TestEditedManifestFallsBack(t *testing.T) {
	inline := func(key Key, b []byte) PieceInfo {
		p, err := InlinePiece(key, b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	at := func(m *manifest, key Key) *PieceInfo {
		return &m.Pieces[slices.IndexFunc(m.Pieces, func(p PieceInfo) bool { return p.Key == key })]
	}
	bound := LocationKey(1, "bound")
	for _, c := range []struct {
		name, why string
		edit      func(m *manifest)
	}{
		{"inline piece of task 10^12", `piece task 1000000000000 state "x": task 1000000000000 of a job of 2 tasks`, func(m *manifest) {
			m.Pieces = append(m.Pieces, inline(StateKey(1e12, "x"), []byte{1}))
		}},
		{"inline data not as its checksum", `piece task 1 location "bound" in the manifest: 2 bytes, crc32c *; listed as 8 bytes*`, func(m *manifest) {
			p := inline(bound, make([]byte, 8))
			p.Data = base64.StdEncoding.EncodeToString([]byte{1, 2})
			*at(m, bound) = p
		}},
		{"pieces out of order", `piece task 0 location "block" after task 0 location "bound": pieces out of order`, func(m *manifest) {
			m.Pieces[0], m.Pieces[1] = m.Pieces[1], m.Pieces[0]
		}},
		{"listed twice", `piece task 0 location "block" listed twice`, func(m *manifest) {
			m.Pieces = slices.Insert(m.Pieces, 0, m.Pieces[0])
		}},
		{"unknown location", `piece task 1 location "out": no location "out" in this job`, func(m *manifest) {
			at(m, bound).Name = "out"
		}},
		{"negative size", `piece task 1 location "bound": negative size -8`, func(m *manifest) {
			at(m, bound).Size = -8
		}},
		{"inline piece too long", fmt.Sprintf(`piece task 1 location "bound": inline, of 65 bytes; at most %d`, InlineMax), func(m *manifest) {
			p := inline(bound, nil)
			p.Data, p.Size = base64.StdEncoding.EncodeToString(make([]byte, 65)), 65
			p.CRC = Checksum(make([]byte, 65))
			*at(m, bound) = p
		}},
		{"data of a piece in a file", `piece task 1 location "bound": data in the manifest of a piece that is not inline`, func(m *manifest) {
			at(m, bound).Data = "AAAA"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := twoCheckpoints(t)
			path := rewriteManifest(t, dir, 2, c.edit)
			want := fmt.Sprintf("checkpoint 2: manifest in %s unreadable (%s: *%s); using checkpoint 1", dir, path, c.why)
			mustFind(t, []string{dir}, 1, want)
			inv, err := Survey([]string{dir}, testJob)
			if err != nil {
				t.Fatal(err)
			}
			plan, notes := Choose([]*Inventory{inv}, func(k Key) int { return 0 })
			checkPlan(t, plan, notes, 1, make([]int, len(testKeys())), want)
		})
	}
}

// forgeSize makes the piece key of checkpoint k in dir size bytes long, of zeros: a sparse
// file, and the manifest's entry to match.
func forgeSize(t *testing.T, dir string, k int, key Key, size int64) {
	t.Helper()
	path := filepath.Join(ckptDir(dir, k), key.fileName())
	replaceWith(t, path, func(path string) error {
		err := os.WriteFile(path, nil, 0o644)
		if err == nil {
			err = os.Truncate(path, size)
		}
		return err
	})
	var crc uint32
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zeros)) {
		crc = crc32.Update(crc, castagnoli, zeros[:min(left, int64(len(zeros)))])
	}
	rewriteManifest(t, dir, k, func(m *manifest) {
		p := &m.Pieces[slices.IndexFunc(m.Pieces, func(p PieceInfo) bool { return p.Key == key })]
		p.Size, p.CRC = size, crc
	})
}

// TestForgedSizeFallsBack: a piece whose size was forged in the manifest, with a sparse
// file to match, larger than the memory of the process that would hold it or read it, makes
// Choose pass over its checkpoint, saying why, before any process allocates for it.
func TestForgedSizeFallsBack(t *testing.T) {
	const forged, limit = 64 << 20, 32 << 20
	key := StateKey(1, "iter")
	a, b := t.TempDir(), t.TempDir()
	sa, sb := create(t, a), create(t, b)
	writeCheckpoint(t, 1, sa, sb)
	writeCheckpoint(t, 2, sa, sb)
	forgeSize(t, a, 2, key, forged)
	forgeSize(t, b, 2, key, forged)
	var invs []*Inventory
	for _, dir := range []string{a, b} {
		inv, err := Survey([]string{dir}, testJob)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS == "linux" && inv.Memory <= 0 {
			t.Errorf("Survey: memory %d, want this host's", inv.Memory)
		}
		invs = append(invs, inv)
	}

	invs[0].Memory, invs[1].Memory = limit, 0 // task 1's process, 0, holds the pieces of tasks 0 and 1
	plan, notes := Choose(invs, func(Key) int { return 0 })
	checkPlan(t, plan, notes, 1, make([]int, len(testKeys())), fmt.Sprintf(
		`checkpoint 2: the pieces of the tasks of process 0 make * bytes (piece %v %d), more than its memory (%d bytes); using checkpoint 1`, key, forged, limit))

	invs[0].Memory, invs[1].Memory = 0, limit                                          // process 1 would read it, for process 0
	plan, notes = Choose([]*Inventory{invs[0], invs[1]}, func(k Key) int { return 2 }) // a process without inventory
	if want := fmt.Sprintf(`checkpoint 2: piece %v of %d bytes, more than the memory of process 1 that reads it (%d bytes); using checkpoint 1`,
		key, forged, limit); plan.Checkpoint != 1 || len(notes) != 1 || !like(notes[0], want) {
		t.Errorf("plan of checkpoint %d, notes %q; want checkpoint 1 and a note like %q", plan.Checkpoint, notes, want)
	}

	copies, err := listCopies(a, 2) // a copy that a process could not hold is not even read
	if err != nil {
		t.Fatal(err)
	}
	notes = checksumCopies(copies, limit)
	want := fmt.Sprintf("checkpoint 2: piece %v in %s of %d bytes, more than this process can hold (%d bytes); not read", key, a, forged, limit)
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("checksums within %d bytes: notes %q, want %q", limit, notes, want)
	}
	for _, c := range copies {
		if (c.Size < 0) != (c.Key == key) {
			t.Errorf("checksums within %d bytes: copy %v of %d bytes", limit, c.Key, c.Size)
		}
	}

	invs[0].Memory, invs[1].Memory = 0, 0 // memory unknown: the sizes are taken as they are
	if plan, notes = Choose(invs, func(Key) int { return 0 }); plan.Checkpoint != 2 || len(notes) != 0 {
		t.Errorf("memory unknown: plan of checkpoint %d, notes %q; want checkpoint 2", plan.Checkpoint, notes)
	}
}

// TestLockNotRegular: a LOCK that is a link to a file elsewhere is neither followed nor
// written (Create writes its holder there), and one that is a named pipe does not hang
// Create: the directory is refused, naming the file.
func TestLockNotRegular(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) (func(string) error, string)
	}{
		{"link elsewhere", func(t *testing.T) (func(string) error, string) {
			return symlinkTo(outsideFile(t, []byte("precious"))), ""
		}},
		{"named pipe", func(*testing.T) (func(string) error, string) { return fifo, "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lock := filepath.Join(dir, lockName)
			mk, _ := tc.make(t)
			replaceWith(t, lock, mk)
			target, _ := os.Readlink(lock)
			err := within(t, lock, func() error {
				s, err := Create(dir, testJob)
				if err == nil {
					s.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), lock) {
				t.Fatalf("Create over a LOCK that is not a regular file: %v, want an error naming %s", err, lock)
			}
			if target != "" {
				if b, _ := os.ReadFile(target); string(b) != "precious" {
					t.Fatalf("the file the LOCK links to now holds %q", b)
				}
			}
		})
	}
}

// TestFinishedNotRegular: a FINISHED mark that is a link to a device, a named pipe or a
// file longer than any mark is not read (no hang, no unbounded read): it counts as an
// unreadable mark, and a note names it.
func TestFinishedNotRegular(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(string) error
	}{
		{"link to /dev/zero", symlinkTo("/dev/zero")},
		{"named pipe", fifo},
		{"huge sparse file", func(path string) error {
			f, err := os.Create(path)
			if err == nil {
				err = errors.Join(f.Truncate(1<<40), f.Close())
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, s := twoCheckpoints(t)
			s.Close()
			mark := filepath.Join(dir, finishedName)
			replaceWith(t, mark, tc.make)
			type result struct {
				ks    []int
				notes []string
			}
			r := within(t, mark, func() result {
				ks, notes := Finished([]string{dir})
				return result{ks, notes}
			})
			if !slices.Equal(r.ks, []int{1, 2}) || len(r.notes) != 1 || !strings.Contains(r.notes[0], mark) {
				t.Fatalf("Finished: %v %q, want every checkpoint and a note naming %s", r.ks, r.notes, mark)
			}
		})
	}
}
