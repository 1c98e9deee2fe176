package checkpoint

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// FindOptions narrow what Find verifies. The zero value verifies every piece of every
// checkpoint.
type FindOptions struct {
	// Only, when not nil, selects the pieces Find verifies (a process restoring its own
	// tasks verifies theirs); the others are taken as listed and checked only when read.
	Only func(Key) bool
	// Max, when not 0, ignores checkpoints numbered above it.
	Max int
}

// Checkpoint is a complete checkpoint found by Find, from which a job restarts.
type Checkpoint struct {
	Number int         // the checkpoint's number
	Job    Fingerprint // the fingerprint of the job that wrote it
	Pieces []PieceInfo // every piece of the job, sorted by key

	dirs []string       // the directories holding a directory of this checkpoint
	good map[Key]string // the directory of a copy found intact
}

// Find returns the newest checkpoint that is complete across dirs (the directories a
// pattern's Glob found): its manifest committed in some directory, and every piece it lists
// present with its size and checksum in at least one directory. It returns a nil
// Checkpoint and a nil error when there is none: the job starts afresh.
//
// The notes say, one line each, what Find found wrong and what it did instead ("checkpoint
// 8: piece task 3 location "block" in /ckpt/1 corrupted (crc32c ...); using checkpoint 7",
// or "...; using the copy in /ckpt/2"); a runtime prints them. A directory holding a
// checkpoint of another job (its fingerprint differs from job) is an error, a
// *MismatchError naming the difference.
func Find(dirs []string, job Fingerprint, opt *FindOptions) (*Checkpoint, []string, error) {
	if opt == nil {
		opt = &FindOptions{}
	}
	dirs = slices.Compact(slices.Sorted(slices.Values(dirs)))
	sc, err := scan(dirs, job)
	if err != nil {
		return nil, sc.notes, err
	}
	notes, pending := sc.notes, []string(nil)
	for _, k := range sc.order {
		if opt.Max != 0 && k > opt.Max {
			continue
		}
		c := &Checkpoint{Number: k, Job: sc.manifests[k].Job, Pieces: sc.manifests[k].Pieces,
			dirs: sc.holders[k], good: make(map[Key]string)}
		replaced, bad := c.verify(opt.Only)
		if len(bad) == 0 {
			notes = append(notes, resolve(pending, fmt.Sprintf("using checkpoint %d", k))...)
			return c, append(notes, replaced...), nil
		}
		pending = append(pending, bad...)
	}
	return nil, append(notes, resolve(pending, "no complete checkpoint left: starting afresh")...), nil
}

// resolve ends each note of a rejected checkpoint with what Find did instead.
func resolve(notes []string, what string) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = n + "; " + what
	}
	return out
}

// scanned is what Find found in its directories.
type scanned struct {
	order     []int             // checkpoints with a manifest, newest first
	manifests map[int]*manifest // the first good manifest of each
	from      map[int]string    // the directory of each manifest used
	holders   map[int][]string  // the directories holding a directory of each checkpoint
	notes     []string
}

// scan reads the manifests of every directory and refuses another job's.
func scan(dirs []string, job Fingerprint) (*scanned, error) {
	sc := &scanned{manifests: make(map[int]*manifest), from: make(map[int]string), holders: make(map[int][]string)}
	for _, dir := range dirs {
		es, err := list(dir)
		if err != nil {
			sc.notes = append(sc.notes, fmt.Sprintf("checkpoint directory %s unreadable (%v); not used", dir, err))
			continue
		}
		for _, e := range es {
			sc.holders[e.k] = append(sc.holders[e.k], dir)
			if !e.complete {
				continue
			}
			m, err := readManifest(filepath.Join(ckptDir(dir, e.k), manifestName), e.k)
			if err != nil {
				sc.notes = append(sc.notes, fmt.Sprintf("checkpoint %d: manifest in %s unreadable (%v); not used", e.k, dir, err))
				continue
			}
			if d := m.Job.Diff(job); d != "" {
				return sc, &MismatchError{Dir: dir, Checkpoint: e.k, Diff: d}
			}
			switch first := sc.manifests[e.k]; {
			case first == nil:
				sc.manifests[e.k] = m
				sc.order = append(sc.order, e.k)
				sc.from[e.k] = dir
			case !slices.Equal(first.Pieces, m.Pieces):
				sc.notes = append(sc.notes, fmt.Sprintf("checkpoint %d: manifest in %s differs from the one in %s; using the latter",
					e.k, dir, sc.from[e.k]))
			}
		}
	}
	slices.SortFunc(sc.order, func(a, b int) int { return cmpInt(b, a) })
	return sc, nil
}

// verify looks for an intact copy of every piece (of those only selects), several pieces
// at once. It returns the notes on bad copies that a good one replaces, and those on
// pieces without a good copy, which make c incomplete.
func (c *Checkpoint) verify(only func(Key) bool) (replaced, bad []string) {
	type result struct {
		good string   // the directory of an intact copy
		bad  []string // what is wrong with the others seen
	}
	results := make([]*result, len(c.Pieces))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(c.Pieces), runtime.GOMAXPROCS(0), 8) {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for i := int(next.Add(1) - 1); i < len(c.Pieces); i = int(next.Add(1) - 1) {
				if p := c.Pieces[i]; only == nil || only(p.Key) {
					r := &result{}
					r.good, r.bad = c.findCopy(p, buf)
					results[i] = r
				}
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		switch {
		case r == nil:
		case r.good == "" && len(r.bad) == 0:
			bad = append(bad, fmt.Sprintf("checkpoint %d: piece %v missing in every directory", c.Number, c.Pieces[i].Key))
		case r.good == "":
			bad = append(bad, r.bad...)
		default:
			c.good[c.Pieces[i].Key] = r.good
			for _, b := range r.bad {
				replaced = append(replaced, b+"; using the copy in "+r.good)
			}
		}
	}
	return replaced, bad
}

// findCopy reads the copies of p in turn until one is intact: it returns its directory,
// and the errors of the bad copies before it.
func (c *Checkpoint) findCopy(p PieceInfo, buf []byte) (good string, bad []string) {
	for _, dir := range c.dirs {
		r, err := openCopy(dir, c.Number, p)
		for err == nil {
			_, err = r.Read(buf)
		}
		if r != nil {
			r.Close()
		}
		switch {
		case err == io.EOF:
			return dir, bad
		case !errors.Is(err, os.ErrNotExist):
			bad = append(bad, err.Error())
		}
	}
	return "", bad
}

// Piece returns the manifest's entry for key.
func (c *Checkpoint) Piece(key Key) (PieceInfo, bool) {
	i, ok := slices.BinarySearchFunc(c.Pieces, key, func(p PieceInfo, k Key) int { return p.Key.Compare(k) })
	if !ok {
		return PieceInfo{Key: key}, false
	}
	return c.Pieces[i], true
}

// copies returns the directories that may hold key: the intact copy Find saw first.
func (c *Checkpoint) copies(key Key) []string {
	good, ok := c.good[key]
	if !ok {
		return c.dirs
	}
	return append([]string{good}, slices.DeleteFunc(slices.Clone(c.dirs), func(d string) bool { return d == good })...)
}

// Open returns a reader of the piece key, from its first copy of the right size. The
// reader checks the checksum as it goes: when the checksum differs, the Read that
// completes the content and every later one return an error matching ErrCorrupt instead
// of io.EOF (read to io.EOF, as io.ReadAll and io.Copy do; io.ReadFull drops an error
// that comes with the last bytes), and so does a copy that ends early.
func (c *Checkpoint) Open(key Key) (io.ReadCloser, error) {
	p, ok := c.Piece(key)
	if !ok {
		return nil, fmt.Errorf("checkpoint %d has no piece %v", c.Number, key)
	}
	var errs []error
	for _, dir := range c.copies(key) {
		r, err := openCopy(dir, c.Number, p)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("checkpoint %d: piece %v: no copy: %w", c.Number, key, errors.Join(errs...))
}

// Load reads the piece key into dst, whose length must be the piece's size, from the first
// intact copy.
func (c *Checkpoint) Load(key Key, dst []byte) error {
	p, ok := c.Piece(key)
	switch {
	case !ok:
		return fmt.Errorf("checkpoint %d has no piece %v", c.Number, key)
	case int64(len(dst)) != p.Size:
		return fmt.Errorf("checkpoint %d: piece %v has %d bytes, not %d", c.Number, key, p.Size, len(dst))
	}
	var errs []error
	for _, dir := range c.copies(key) {
		err := loadCopy(dir, c.Number, p, dst)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("checkpoint %d: piece %v: no intact copy: %w", c.Number, key, errors.Join(errs...))
}

// copyError says what is wrong with one copy of a piece; it matches ErrCorrupt when its
// content does not match the manifest.
type copyError struct {
	k       int
	key     Key
	dir     string
	what    string
	corrupt bool
}

func (e *copyError) Error() string {
	return fmt.Sprintf("checkpoint %d: piece %v in %s %s", e.k, e.key, e.dir, e.what)
}

func (e *copyError) Is(target error) bool { return e.corrupt && target == ErrCorrupt }

// pieceReader reads one copy of a piece, checking it against its manifest entry.
type pieceReader struct {
	f   *os.File
	p   PieceInfo
	err *copyError // the copy's error, a template until it happens
	n   int64
	crc uint32
}

// openCopy opens the copy of p of checkpoint k in dir, checking its size.
func openCopy(dir string, k int, p PieceInfo) (*pieceReader, error) {
	f, err := os.Open(filepath.Join(ckptDir(dir, k), p.Key.fileName()))
	if err != nil {
		return nil, err
	}
	r := &pieceReader{f: f, p: p, err: &copyError{k: k, key: p.Key, dir: dir}}
	fi, err := f.Stat()
	switch {
	case err != nil:
		r.err.what = fmt.Sprintf("unreadable (%v)", err)
	case fi.Size() < p.Size:
		r.err.what, r.err.corrupt = fmt.Sprintf("truncated (%d of %d bytes)", fi.Size(), p.Size), true
	case fi.Size() > p.Size:
		r.err.what, r.err.corrupt = fmt.Sprintf("too long (%d bytes, manifest %d)", fi.Size(), p.Size), true
	default:
		return r, nil
	}
	f.Close()
	return nil, r.err
}

// Read reads the piece, up to its size in the manifest, checking its checksum.
func (r *pieceReader) Read(b []byte) (int, error) {
	left := r.p.Size - r.n
	if r.err.what != "" {
		return 0, r.err
	}
	if left == 0 {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), left)]
	n, err := r.f.Read(b)
	r.crc = crc32.Update(r.crc, castagnoli, b[:n])
	r.n += int64(n)
	switch {
	case r.n == r.p.Size && r.crc != r.p.CRC:
		r.err.what, r.err.corrupt = fmt.Sprintf("corrupted (crc32c %08x, manifest %08x)", r.crc, r.p.CRC), true
	case err == io.EOF && r.n < r.p.Size:
		r.err.what, r.err.corrupt = fmt.Sprintf("truncated (%d of %d bytes)", r.n, r.p.Size), true
	case err != nil && err != io.EOF:
		r.err.what = fmt.Sprintf("unreadable (%v)", err)
	default:
		return n, nil
	}
	return n, r.err
}

// Close closes the copy's file.
func (r *pieceReader) Close() error { return r.f.Close() }
