package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// castagnoli is the CRC-32 table of every checksum of the package.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	manifestName = "MANIFEST"
	formatWhole  = 1           // a manifest that lists every piece of its checkpoint
	formatPart   = 2           // a manifest that lists a part of its checkpoint, with the whole's Summary
	dirPrefix    = "ckpt-"     // a checkpoint's directory: ckpt-K
	tmpPrefix    = ".tmp-"     // a file being written
	trashPrefix  = ".removing" // a checkpoint's directory being removed
	recycleName  = ".recycle"  // the files of the checkpoint pruned last, which new pieces reuse
	lockName     = "LOCK"
)

// manifest is the list of a checkpoint's pieces, every one of the job's (format 1), or a
// part of them with the Summary of the whole (format 2, Whole set: CommitPart). On disk it
// is its JSON encoding followed by a line "crc32c XXXXXXXX" that checks it.
type manifest struct {
	Format     int         `json:"format"`
	Checkpoint int         `json:"checkpoint"`
	Job        Fingerprint `json:"job"`
	Pieces     []PieceInfo `json:"pieces"`
	Whole      *Summary    `json:"whole,omitempty"`
}

// encode returns the manifest's bytes on disk.
func (m *manifest) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(b, "\ncrc32c %08x\n", crc32.Checksum(b, castagnoli)), nil
}

// readManifest reads and checks the manifest at path, the manifest of checkpoint k in a
// directory of job: a regular file (never read through a link, nor waited for as a named
// pipe) of at most manifestLimit(job) bytes, whose checksum matches and whose pieces its
// fingerprint's job could have written (manifest.check). Its fingerprint may still be
// another job's: the caller compares it with job.
func readManifest(path string, k int, job Fingerprint) (*manifest, error) {
	b, err := readRegular(path, manifestLimit(job), "a manifest of this job")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndex(bytes.TrimSuffix(b, []byte("\n")), []byte("\ncrc32c "))
	if i < 0 || len(b)-i != len("\ncrc32c 01234567\n") {
		return nil, fmt.Errorf("%s: %w: no checksum line", path, ErrCorrupt)
	}
	sum, err := strconv.ParseUint(string(b[i+len("\ncrc32c "):len(b)-1]), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(b[:i], castagnoli) {
		return nil, fmt.Errorf("%s: %w: checksum mismatch", path, ErrCorrupt)
	}
	var m manifest
	if err := json.Unmarshal(b[:i], &m); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	switch {
	case m.Format != formatWhole && m.Format != formatPart:
		return nil, fmt.Errorf("%s: format %d, this package reads %d and %d", path, m.Format, formatWhole, formatPart)
	case (m.Format == formatPart) != (m.Whole != nil):
		return nil, fmt.Errorf("%s: %w: a manifest of format %d with the summary %v", path, ErrCorrupt, m.Format, m.Whole)
	case m.Checkpoint != k:
		return nil, fmt.Errorf("%s: %w: manifest of checkpoint %d", path, ErrCorrupt, m.Checkpoint)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// The bound of a manifest's length. A manifest longer than what a job of the
// fingerprint's tasks and locations could write, every piece's entry at its longest
// (manifestEntryMax: a name of maxName bytes each escaped as \u00XX, InlineMax bytes of
// inline data, every number at its longest) with statesPerTask states per task beside its
// locations, and longer than minManifestLimit, is not read: a file of any length (a link
// to /dev/zero, a sparse file) cannot run a restart out of memory. An entry is rarely a
// tenth of its longest, so a task may have hundreds of states. minManifestLimit leaves
// room for the manifest of another, larger job, which is then refused as such
// (MismatchError) rather than taken for damage.
const (
	manifestEntryMax = 6*maxName + (InlineMax+2)/3*4 + 200
	statesPerTask    = 64
	minManifestLimit = 64 << 20
)

// manifestLimit is the most bytes of a manifest of job.
func manifestLimit(job Fingerprint) int64 {
	fp, _ := json.Marshal(job)
	entries := int64(job.Tasks) * int64(len(job.Locations)+statesPerTask)
	return max(minManifestLimit, entries*manifestEntryMax+2*int64(len(fp))+4096)
}

// check says what makes m no manifest that the job of its fingerprint could have
// written: a piece of no task or location of the job, out of order or listed twice, or
// wrong as PieceInfo.checkEntry says. A restart that took such a manifest would fail, or
// allocate what the job never had, where the previous checkpoint may be intact.
func (m *manifest) check() error {
	for i, p := range m.Pieces {
		if err := p.checkEntry(); err != nil {
			return err
		}
		switch {
		case p.Task >= m.Job.Tasks:
			return fmt.Errorf("piece %v: task %d of a job of %d tasks", p.Key, p.Task, m.Job.Tasks)
		case p.Kind == Location && !slices.Contains(m.Job.Locations, p.Name):
			return fmt.Errorf("piece %v: no location %q in this job", p.Key, p.Name)
		case i == 0:
		case m.Pieces[i-1].Key == p.Key:
			return fmt.Errorf("piece %v listed twice", p.Key)
		case m.Pieces[i-1].Key.Compare(p.Key) > 0:
			return fmt.Errorf("piece %v after %v: pieces out of order", p.Key, m.Pieces[i-1].Key)
		}
	}
	return nil
}

// sortedPieces checks a manifest's pieces and returns them sorted by key.
func sortedPieces(pieces []PieceInfo) ([]PieceInfo, error) {
	s := slices.Clone(pieces)
	slices.SortFunc(s, func(a, b PieceInfo) int { return a.Key.Compare(b.Key) })
	for i, p := range s {
		if err := p.checkEntry(); err != nil {
			return nil, err
		}
		if i > 0 && s[i-1].Key == p.Key {
			return nil, fmt.Errorf("checkpoint: piece %v listed twice", p.Key)
		}
	}
	return s, nil
}

// readRegular returns the content of path, a regular file (openFile) of at most limit
// bytes, the most that what (say, "a manifest of this job") can have; a longer one is an
// error before anything is read.
func readRegular(path string, limit int64, what string) ([]byte, error) {
	f, fi, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, min(fi.Size(), limit)+1)) // +1: a file that grew
	switch {
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, fmt.Errorf("%s: %d bytes, more than %s (%d)", path, max(fi.Size(), int64(len(b))), what, limit)
	}
	return b, nil
}

// openFile opens path, a file of a checkpoint's directory, with flag (os.O_RDONLY or
// os.O_WRONLY) when it is a regular file: never through a symbolic link (a link to a file
// outside the directory, or to a device), never waiting for a named pipe's other end.
func openFile(path string, flag int) (*os.File, os.FileInfo, error) {
	fi, err := os.Lstat(path) // a device is not even opened: opening some has effects
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(path, fi.Mode())
	}
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, flag|openFlags, 0) // openFlags: what was checked is opened
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
		err = notRegular(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// notRegular is the error of path, of mode, where a regular file was expected.
func notRegular(path string, mode fs.FileMode) error {
	return fmt.Errorf("%s is not a regular file (%s)", path, kindOf(mode))
}

// kindOf names the kind of file of mode: "a symbolic link", "a named pipe"...
func kindOf(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode.IsDir():
		return "a directory"
	case mode.IsRegular():
		return "a regular file"
	}
	return "of mode " + mode.String()
}

// ckptDir is checkpoint k's directory in dir.
func ckptDir(dir string, k int) string {
	return filepath.Join(dir, dirPrefix+strconv.Itoa(k))
}

// entry is a checkpoint's directory found in a directory.
type entry struct {
	k        int
	complete bool   // its manifest is committed
	odd      string // not "" when the entry is no directory: what it is ("a symbolic link")
}

// list returns the checkpoints' directories in dir, newest first, and the other entries
// named as one (a link, a file), which are never followed, only removed.
func list(dir string) ([]entry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, de := range des {
		num, ok := strings.CutPrefix(de.Name(), dirPrefix)
		k, err := strconv.Atoi(num)
		if !ok || err != nil || k < 1 || strconv.Itoa(k) != num {
			continue
		}
		if !de.IsDir() { // ReadDir does not follow links
			es = append(es, entry{k: k, odd: kindOf(de.Type())})
			continue
		}
		_, err = os.Lstat(filepath.Join(dir, de.Name(), manifestName))
		es = append(es, entry{k: k, complete: err == nil})
	}
	slices.SortFunc(es, func(a, b entry) int { return cmpInt(b.k, a.k) })
	return es, nil
}
