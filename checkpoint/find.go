package checkpoint

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Checkpoint is a complete checkpoint found by Find, from which a job restarts.
type Checkpoint struct {
	Number int         // the checkpoint's number
	Pieces []PieceInfo // every piece of the job, sorted by key

	dirs []string // dirs[i]: the directory of the intact copy of Pieces[i] Find chose
}

// Find returns the newest checkpoint that is complete across dirs (the directories a
// pattern's Glob found), for one process that sees them all (a tool, a test): Survey then
// Choose, as a job's processes do together. It returns a nil Checkpoint and a nil error
// when there is none: the job starts afresh.
//
// The notes say, one line each, what Find found wrong and what it did instead ("checkpoint
// 8: piece task 3 location "block" in /ckpt/1 corrupted (crc32c ...); using checkpoint 7",
// or "...; using the copy in /ckpt/2"); a runtime prints them. A directory holding a
// checkpoint of another job (its fingerprint differs from job) is an error, a
// *MismatchError naming the difference.
func Find(dirs []string, job Fingerprint) (*Checkpoint, []string, error) {
	inv, err := Survey(dirs, job)
	if err != nil {
		return nil, nil, err
	}
	// No process runs the tasks (dest -1): Find holds no piece, its caller loads them one by
	// one; each must fit in this process's memory (Choose).
	plan, notes := Choose([]*Inventory{inv}, func(Key) int { return -1 })
	if plan.Checkpoint == 0 {
		return nil, notes, nil
	}
	return &Checkpoint{Number: plan.Checkpoint, Pieces: plan.Pieces, dirs: plan.Dirs}, notes, nil
}

// resolve ends each note of a rejected checkpoint with what Find did instead.
func resolve(notes []string, what string) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = n + "; " + what
	}
	return out
}

// Piece returns the manifest's entry for key.
func (c *Checkpoint) Piece(key Key) (PieceInfo, bool) {
	i, ok := c.index(key)
	if !ok {
		return PieceInfo{Key: key}, false
	}
	return c.Pieces[i], true
}

// index returns the index of key in c.Pieces.
func (c *Checkpoint) index(key Key) (int, bool) {
	return slices.BinarySearchFunc(c.Pieces, key, func(p PieceInfo, k Key) int { return p.Key.Compare(k) })
}

// Open returns a reader of the piece key, from the copy Find found intact. The reader
// checks the checksum as it goes: when the checksum differs (the copy changed since), the
// Read that completes the content and every later one return an error matching ErrCorrupt
// instead of io.EOF (read to io.EOF, as io.ReadAll and io.Copy do; io.ReadFull drops an
// error that comes with the last bytes), and so does a copy that ends early.
func (c *Checkpoint) Open(key Key) (io.ReadCloser, error) {
	i, ok := c.index(key)
	if !ok {
		return nil, fmt.Errorf("checkpoint %d has no piece %v", c.Number, key)
	}
	if p := c.Pieces[i]; p.Inline {
		b, err := p.content()
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return openCopy(c.dirs[i], c.Number, c.Pieces[i])
}

// Load reads the piece key into dst, whose length must be the piece's size, from the copy
// Find found intact, checking it as LoadCopy does.
func (c *Checkpoint) Load(key Key, dst []byte) error {
	i, ok := c.index(key)
	if !ok {
		return fmt.Errorf("checkpoint %d has no piece %v", c.Number, key)
	}
	return LoadCopy(c.dirs[i], c.Number, c.Pieces[i], dst)
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

// openCopy opens the copy of p of checkpoint k in dir, a regular file (openFile), checking
// its size.
func openCopy(dir string, k int, p PieceInfo) (*pieceReader, error) {
	f, fi, err := openFile(filepath.Join(ckptDir(dir, k), p.Key.fileName()), os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	r := &pieceReader{f: f, p: p, err: &copyError{k: k, key: p.Key, dir: dir}}
	switch {
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
