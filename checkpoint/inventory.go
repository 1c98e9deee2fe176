package checkpoint

import (
	"cmp"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Inventory is what the directories one process can see hold, as it reports it when the
// processes of a job do not all see the same directories (a disk per node): the manifests
// committed there and every copy of a piece, with the size and checksum of its content as
// read. It is plain data, meant to be sent (encoding/json) to the process that chooses.
type Inventory struct {
	Manifests []Manifest `json:"manifests"` // one intact per checkpoint (its parts united) and every damaged one, newest first
	Copies    []Copy     `json:"copies"`    // every piece found, by checkpoint then directory and key
	Notes     []string   `json:"notes,omitempty"`
	// Memory is the most bytes the process can hold (its host's memory, or its control
	// group's limit when lower); 0 when it cannot tell. Choose passes over a checkpoint
	// whose pieces would not fit.
	Memory int64 `json:"memory,omitempty"`
}

// Manifest is the list of the pieces of a committed checkpoint, as a directory holds it,
// or why the one there cannot be used.
type Manifest struct {
	Checkpoint int         `json:"checkpoint"`
	Dir        string      `json:"dir"`
	Pieces     []PieceInfo `json:"pieces"` // sorted by key
	// Whole, when set, says that Pieces are a part of the checkpoint (the union of the
	// manifests of CommitPart found), and what the whole checkpoint's pieces add up to.
	Whole *Summary `json:"whole,omitempty"`
	// Damage, when not "", says why the manifest in Dir cannot be used (it is not a
	// regular file, its checksum differs, a piece is of no task of the job...); Pieces is
	// then empty.
	Damage string `json:"damage,omitempty"`
}

// Copy is one copy of a piece in a directory: Size and CRC are those of its content as
// read, to be compared with the manifest's.
type Copy struct {
	Checkpoint int    `json:"checkpoint"`
	Dir        string `json:"dir"`
	PieceInfo
}

// Survey reads what dirs hold: the manifests of job's checkpoints and the checksum of every
// piece of every checkpoint's directory, complete or not (a process killed before a commit
// may hold pieces of a checkpoint that others committed). It reads every piece once, several
// at a time. A directory holding a checkpoint of another job is an error, a *MismatchError.
//
// A directory is read as untrusted input: Survey opens only regular files, never through a
// symbolic link nor waiting on a named pipe, reads a manifest only up to the length a
// manifest of job can have, and lists as damaged (Manifest.Damage) a manifest that is not
// one job could have written (a piece of no task or location of job, out of order...), so
// that Choose falls back to an older checkpoint rather than fail the restart.
func Survey(dirs []string, job Fingerprint) (*Inventory, error) {
	dirs = slices.Compact(slices.Sorted(slices.Values(dirs)))
	sc, err := scan(dirs, job)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Notes: sc.notes, Memory: memory()}
	for _, k := range sc.order {
		inv.Manifests = append(inv.Manifests, *sc.manifests[k])
	}
	inv.Manifests = append(inv.Manifests, sc.damaged...)
	slices.SortStableFunc(inv.Manifests, func(a, b Manifest) int { return cmp.Compare(b.Checkpoint, a.Checkpoint) })
	for _, k := range slices.Sorted(func(yield func(int) bool) {
		for k := range sc.holders {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, dir := range sc.holders[k] {
			copies, err := listCopies(dir, k)
			if err != nil {
				inv.Notes = append(inv.Notes, fmt.Sprintf("checkpoint %d: directory in %s unreadable (%v); not used", k, dir, err))
			}
			inv.Copies = append(inv.Copies, copies...)
		}
	}
	inv.Notes = append(inv.Notes, checksumCopies(inv.Copies, inv.Memory)...)
	return inv, nil
}

// scanned is what Survey found in its directories.
type scanned struct {
	order     []int             // checkpoints with an intact manifest, newest first
	manifests map[int]*Manifest // the intact manifests of each, combined
	holders   map[int][]string  // the directories holding a directory of each checkpoint
	damaged   []Manifest        // the manifests that cannot be used, and why
	notes     []string
}

// scan reads the manifests of every directory and refuses another job's. A manifest that
// cannot be read as one of job's (not a regular file, too long, its checksum, its
// pieces) and an entry named as a checkpoint's directory that is none (a link) are
// damaged: listed, never followed.
func scan(dirs []string, job Fingerprint) (*scanned, error) {
	sc := &scanned{manifests: make(map[int]*Manifest), holders: make(map[int][]string)}
	for _, dir := range dirs {
		es, err := list(dir)
		if err != nil {
			sc.notes = append(sc.notes, fmt.Sprintf("checkpoint directory %s unreadable (%v); not used", dir, err))
			continue
		}
		for _, e := range es {
			if e.odd != "" {
				sc.damaged = append(sc.damaged, Manifest{Checkpoint: e.k, Dir: dir,
					Damage: fmt.Sprintf("%s is not a directory (%s)", ckptDir(dir, e.k), e.odd)})
				continue
			}
			sc.holders[e.k] = append(sc.holders[e.k], dir)
			if !e.complete {
				continue
			}
			m, err := readManifest(filepath.Join(ckptDir(dir, e.k), manifestName), e.k, job)
			if err != nil {
				sc.damaged = append(sc.damaged, Manifest{Checkpoint: e.k, Dir: dir, Damage: err.Error()})
				continue
			}
			if d := m.Job.Diff(job); d != "" {
				return sc, &MismatchError{Dir: dir, Checkpoint: e.k, Diff: d}
			}
			if sc.manifests[e.k] == nil {
				sc.order = append(sc.order, e.k)
			}
			c, notes := combine(sc.manifests[e.k], Manifest{Checkpoint: e.k, Dir: dir, Pieces: m.Pieces, Whole: m.Whole})
			sc.manifests[e.k] = &c
			sc.notes = append(sc.notes, notes...)
		}
	}
	slices.SortFunc(sc.order, func(a, b int) int { return cmpInt(b, a) })
	return sc, nil
}

// listCopies returns the pieces in checkpoint k's directory in dir, their size and checksum
// not yet known.
func listCopies(dir string, k int) ([]Copy, error) {
	des, err := os.ReadDir(ckptDir(dir, k))
	var copies []Copy
	for _, de := range des {
		if key, ok := parseFileName(de.Name()); ok && de.Type().IsRegular() {
			copies = append(copies, Copy{Checkpoint: k, Dir: dir, PieceInfo: PieceInfo{Key: key, Size: -1}})
		}
	}
	slices.SortFunc(copies, func(a, b Copy) int { return a.Key.Compare(b.Key) })
	return copies, err
}

// checksumCopies reads every copy and sets its size and checksum; an unreadable copy keeps
// the size -1, and so does a copy longer than limit (when not 0), which this process could
// not hold (Inventory.Memory) and is not read: a sparse file of any length takes no time.
// It returns a note for each of those.
func checksumCopies(copies []Copy, limit int64) []string {
	tooLong := make([]int64, len(copies)) // the length of a copy not read, by index
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(copies), runtime.GOMAXPROCS(0), 8) {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for i := int(next.Add(1) - 1); i < len(copies); i = int(next.Add(1) - 1) {
				c := &copies[i]
				c.Size, c.CRC, tooLong[i] = checksumFile(c.Dir, c.Checkpoint, c.Key, buf, limit)
			}
		})
	}
	wg.Wait()
	var notes []string
	for i, n := range tooLong {
		if c := copies[i]; n > 0 {
			notes = append(notes, fmt.Sprintf("checkpoint %d: piece %v in %s of %d bytes, more than this process can hold (%d bytes); not read",
				c.Checkpoint, c.Key, c.Dir, n, limit))
		}
	}
	return notes
}

// checksumFile reads the copy of key of checkpoint k in dir, a regular file (openFile): its
// size and CRC-32C, or a size of -1 when it cannot be read; or, when it is longer than
// limit (not 0), a size of -1 and that length, without reading it.
func checksumFile(dir string, k int, key Key, buf []byte, limit int64) (size int64, crc uint32, tooLong int64) {
	f, fi, err := openFile(ckptDir(dir, k)+string(os.PathSeparator)+key.fileName(), os.O_RDONLY)
	switch {
	case err != nil:
		return -1, 0, 0
	case limit > 0 && fi.Size() > limit:
		f.Close()
		return -1, 0, fi.Size()
	}
	defer f.Close()
	for {
		n, err := f.Read(buf)
		crc = crc32.Update(crc, castagnoli, buf[:n])
		size += int64(n)
		switch {
		case err == io.EOF:
			return size, crc, 0
		case err != nil:
			return -1, 0, 0
		}
	}
}

// parseFileName is the inverse of Key.fileName: ok is false for any other name (a
// temporary file, the manifest).
func parseFileName(name string) (key Key, ok bool) {
	kind, rest, _ := strings.Cut(name, ".")
	task, escaped, found := strings.Cut(rest, ".")
	if err := key.Kind.UnmarshalText([]byte(kind)); err != nil || !found {
		return Key{}, false
	}
	t, err := strconv.Atoi(task)
	if err != nil || strconv.Itoa(t) != task {
		return Key{}, false
	}
	var b strings.Builder
	for i := 0; i < len(escaped); i++ {
		if escaped[i] != '%' {
			b.WriteByte(escaped[i])
			continue
		}
		v, err := strconv.ParseUint(escaped[i+1:min(i+3, len(escaped))], 16, 8)
		if err != nil || i+3 > len(escaped) {
			return Key{}, false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	key.Task, key.Name = t, b.String()
	return key, key.check() == nil && key.fileName() == name
}

// Plan is the checkpoint a job restarts from, chosen across the inventories of its
// processes, and where each piece is read.
type Plan struct {
	Checkpoint int         `json:"checkpoint"` // 0: none, the job starts afresh
	Pieces     []PieceInfo `json:"pieces"`     // its manifest, sorted by key
	From       []int       `json:"from"`       // From[i]: the inventory whose copy of Pieces[i] is read
	Dirs       []string    `json:"dirs"`       // Dirs[i]: the directory of that copy
}

// Choose picks the newest checkpoint complete across invs (the inventories of a job's
// processes, by rank): its manifest in some inventory (or, for manifests that list parts
// of it, CommitPart, the union of those found, which must have the whole's Summary), an
// intact copy (the manifest's size and checksum) of each of its pieces in at least one, and
// pieces that fit in memory: those
// of the tasks of process i, dest(key) == i, in invs[i].Memory bytes together, and each
// piece in the Memory of the process that reads it. A manifest's sizes are not trusted:
// one whose piece is larger than any the job could hold (an edited size, with a sparse
// file to match) is passed over before anybody allocates for it. For each piece it chooses the
// copy of inventory dest(key) when that one has an intact copy (the process that needs the
// piece reads its own disk), else the copy of the inventory with the fewest bytes chosen
// so far (the lowest index on a tie), spreading the sending. It returns a Plan with
// Checkpoint 0 when no checkpoint is complete.
//
// The notes say, one line each, what Choose found wrong and what it did instead, as Find's
// do: a damaged manifest, a copy that is corrupted, truncated or too long, a piece missing
// everywhere, a checkpoint passed over for an older one; the inventories' own notes come
// first.
func Choose(invs []*Inventory, dest func(Key) int) (*Plan, []string) {
	var notes, pending []string
	manifests := make(map[int]*Manifest)
	damaged := make(map[int][]Manifest)
	copies := make(map[int]map[Key][]holder) // by checkpoint and key
	for i, inv := range invs {
		notes = append(notes, inv.Notes...)
		for _, m := range inv.Manifests {
			if m.Damage != "" {
				damaged[m.Checkpoint] = append(damaged[m.Checkpoint], m)
				continue
			}
			c, differ := combine(manifests[m.Checkpoint], m)
			manifests[m.Checkpoint] = &c
			notes = append(notes, differ...)
		}
		for _, c := range inv.Copies {
			if copies[c.Checkpoint] == nil {
				copies[c.Checkpoint] = make(map[Key][]holder)
			}
			copies[c.Checkpoint][c.Key] = append(copies[c.Checkpoint][c.Key], holder{i, c})
		}
	}
	order := slices.SortedFunc(func(yield func(int) bool) {
		for k := range manifests {
			if !yield(k) {
				return
			}
		}
		for k := range damaged {
			if _, ok := manifests[k]; !ok && !yield(k) {
				return
			}
		}
	}, func(a, b int) int { return cmp.Compare(b, a) })
	for _, k := range order {
		mp, ok := manifests[k]
		for _, d := range damaged[k] {
			note := fmt.Sprintf("checkpoint %d: manifest in %s unreadable (%s)", k, d.Dir, d.Damage)
			if ok { // another directory's is intact
				notes = append(notes, note+"; not used")
			} else {
				pending = append(pending, note)
			}
		}
		if !ok {
			continue
		}
		if why := mp.complete(); why != "" {
			pending = append(pending, why)
			continue
		}
		plan, replaced, bad := choose(*mp, copies[k], dest, invs)
		if len(bad) == 0 {
			notes = append(notes, resolve(pending, fmt.Sprintf("using checkpoint %d", k))...)
			return plan, append(notes, replaced...)
		}
		pending = append(pending, bad...)
	}
	return &Plan{}, append(notes, resolve(pending, "no complete checkpoint left: starting afresh")...)
}

// holder is a copy of a piece in the inventory of index inv.
type holder struct {
	inv int
	Copy
}

// choose chooses a copy of each piece of m among copies (by key), of the inventories invs;
// bad says why m is not complete or does not fit in memory, replaced which copies were
// passed over for another.
func choose(m Manifest, copies map[Key][]holder, dest func(Key) int, invs []*Inventory) (plan *Plan, replaced, bad []string) {
	n := len(invs)
	plan = &Plan{Checkpoint: m.Checkpoint, Pieces: m.Pieces, From: make([]int, len(m.Pieces)), Dirs: make([]string, len(m.Pieces))}
	load := make(map[int]int64) // bytes chosen from each inventory
	for i, p := range m.Pieces {
		if p.Inline { // every manifest holds it: the process that needs it reads it there
			if d := dest(p.Key); d >= 0 && d < n {
				plan.From[i] = d
			}
			plan.Dirs[i] = m.Dir
			continue
		}
		var good []holder
		var wrong []string
		for _, h := range copies[p.Key] {
			if what := h.wrong(p); what != "" {
				wrong = append(wrong, fmt.Sprintf("checkpoint %d: piece %v in %s %s", m.Checkpoint, p.Key, h.Dir, what))
			} else {
				good = append(good, h)
			}
		}
		if len(good) == 0 {
			if len(wrong) == 0 {
				wrong = append(wrong, fmt.Sprintf("checkpoint %d: piece %v missing in every directory", m.Checkpoint, p.Key))
			}
			bad = append(bad, wrong...)
			continue
		}
		want := dest(p.Key)
		pick := good[0]
		for _, h := range good {
			if h.inv == want || pick.inv != want && load[h.inv] < load[pick.inv] {
				pick = h
			}
		}
		load[pick.inv] += p.Size
		plan.From[i], plan.Dirs[i] = pick.inv, pick.Dir
		for _, w := range wrong {
			replaced = append(replaced, w+"; using the copy in "+pick.Dir)
		}
	}
	if len(bad) == 0 {
		bad = overflows(plan, dest, invs)
	}
	return plan, replaced, bad
}

// overflows says which processes the pieces of plan would not fit in: the pieces of a
// process's tasks, together, or a piece it reads.
func overflows(plan *Plan, dest func(Key) int, invs []*Inventory) []string {
	var out []string
	held := make([]int64, len(invs))
	largest := make([]int, len(invs)) // the index of each process's largest piece
	for i, p := range plan.Pieces {
		d := dest(p.Key)
		if d >= 0 && d < len(invs) {
			held[d] += p.Size
			if p.Size > plan.Pieces[largest[d]].Size {
				largest[d] = i
			}
		}
		if r := plan.From[i]; r != d && invs[r].Memory > 0 && p.Size > invs[r].Memory {
			out = append(out, fmt.Sprintf("checkpoint %d: piece %v of %d bytes, more than the memory of process %d that reads it (%d bytes)",
				plan.Checkpoint, p.Key, p.Size, r, invs[r].Memory))
		}
	}
	for d, inv := range invs {
		if inv.Memory > 0 && held[d] > inv.Memory {
			p := plan.Pieces[largest[d]]
			out = append(out, fmt.Sprintf("checkpoint %d: the pieces of the tasks of process %d make %d bytes (piece %v %d), more than its memory (%d bytes)",
				plan.Checkpoint, d, held[d], p.Key, p.Size, inv.Memory))
		}
	}
	return out
}

// wrong says what is wrong with the copy h of p, or "".
func (h holder) wrong(p PieceInfo) string {
	switch {
	case h.Size < 0:
		return "unreadable"
	case h.Size < p.Size:
		return fmt.Sprintf("truncated (%d of %d bytes)", h.Size, p.Size)
	case h.Size > p.Size:
		return fmt.Sprintf("too long (%d bytes, manifest %d)", h.Size, p.Size)
	case h.CRC != p.CRC:
		return fmt.Sprintf("corrupted (crc32c %08x, manifest %08x)", h.CRC, p.CRC)
	}
	return ""
}

// LoadCopy reads the copy of piece p of checkpoint k in dir (a directory a Plan names) into
// dst, whose length must be p.Size, and checks it against p's size and checksum: a copy
// that differs is an error matching ErrCorrupt.
func LoadCopy(dir string, k int, p PieceInfo, dst []byte) error {
	if int64(len(dst)) != p.Size {
		return fmt.Errorf("checkpoint %d: piece %v has %d bytes, not %d", k, p.Key, p.Size, len(dst))
	}
	return loadCopy(dir, k, p, dst)
}

// loadCopy reads the copy of p of checkpoint k in dir into dst, of p's size, checking it.
// An inline piece is read from p itself.
func loadCopy(dir string, k int, p PieceInfo, dst []byte) error {
	if p.Inline {
		b, err := p.content()
		copy(dst, b)
		return err
	}
	r, err := openCopy(dir, k, p)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err = io.ReadFull(r, dst); err != nil {
		return err
	}
	if _, err = r.Read(dst[:0]); err != io.EOF { // ReadFull drops an error that comes with the last bytes
		return err
	}
	return nil
}

// Checksum returns the CRC-32 (Castagnoli) of b, the checksum a PieceInfo holds.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
