package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// castagnoli is the CRC-32 table of every checksum of the package.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	manifestName  = "MANIFEST"
	formatVersion = 1
	dirPrefix     = "ckpt-"     // a checkpoint's directory: ckpt-K
	tmpPrefix     = ".tmp-"     // a file being written
	trashPrefix   = ".removing" // a checkpoint's directory being removed
	recycleName   = ".recycle"  // the files of the checkpoint pruned last, which new pieces reuse
	lockName      = "LOCK"
)

// manifest is the job-wide list of a checkpoint's pieces. On disk it is its JSON encoding
// followed by a line "crc32c XXXXXXXX" that checks it.
type manifest struct {
	Format     int         `json:"format"`
	Checkpoint int         `json:"checkpoint"`
	Job        Fingerprint `json:"job"`
	Pieces     []PieceInfo `json:"pieces"`
}

// encode returns the manifest's bytes on disk.
func (m *manifest) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(b, "\ncrc32c %08x\n", crc32.Checksum(b, castagnoli)), nil
}

// readManifest reads and checks the manifest at path, the manifest of checkpoint k.
func readManifest(path string, k int) (*manifest, error) {
	b, err := os.ReadFile(path)
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
	if m.Format != formatVersion {
		return nil, fmt.Errorf("%s: format %d, this package reads %d", path, m.Format, formatVersion)
	}
	if m.Checkpoint != k {
		return nil, fmt.Errorf("%s: %w: manifest of checkpoint %d", path, ErrCorrupt, m.Checkpoint)
	}
	return &m, nil
}

// sortedPieces checks a manifest's pieces and returns them sorted by key.
func sortedPieces(pieces []PieceInfo) ([]PieceInfo, error) {
	s := slices.Clone(pieces)
	slices.SortFunc(s, func(a, b PieceInfo) int { return a.Key.Compare(b.Key) })
	for i, p := range s {
		if err := p.Key.check(); err != nil {
			return nil, err
		}
		if p.Size < 0 {
			return nil, fmt.Errorf("checkpoint: piece %v: negative size %d", p.Key, p.Size)
		}
		if p.Inline {
			if _, err := p.content(); err != nil {
				return nil, err
			}
		}
		if i > 0 && s[i-1].Key == p.Key {
			return nil, fmt.Errorf("checkpoint: piece %v listed twice", p.Key)
		}
	}
	return s, nil
}

// ckptDir is checkpoint k's directory in dir.
func ckptDir(dir string, k int) string {
	return filepath.Join(dir, dirPrefix+strconv.Itoa(k))
}

// entry is a checkpoint's directory found in a directory.
type entry struct {
	k        int
	complete bool // its manifest is committed
}

// list returns the checkpoints' directories in dir, newest first.
func list(dir string) ([]entry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, de := range des {
		num, ok := strings.CutPrefix(de.Name(), dirPrefix)
		k, err := strconv.Atoi(num)
		if !ok || err != nil || k < 1 || strconv.Itoa(k) != num || !de.IsDir() {
			continue
		}
		_, err = os.Lstat(filepath.Join(dir, de.Name(), manifestName))
		es = append(es, entry{k: k, complete: err == nil})
	}
	slices.SortFunc(es, func(a, b entry) int { return cmpInt(b.k, a.k) })
	return es, nil
}
