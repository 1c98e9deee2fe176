package checkpoint

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrNoSpace is matched (errors.Is) by the error of a write that found the file system
// full (ENOSPC, or the user's quota: EDQUOT); so is syscall.ENOSPC or EDQUOT itself.
var ErrNoSpace = errors.New("disk full")

// ErrClosed is returned by the methods of a closed Store.
var ErrClosed = errors.New("checkpoint: store closed")

// Store is one process's directory of checkpoints, open for writing. It holds the pieces
// the process writes, its own and the partner copies it keeps for others, and the manifest
// of every checkpoint the job commits.
//
// A Store is safe for concurrent use: pieces of one or several checkpoints may be written
// at once from several goroutines, but one piece (one checkpoint and key) by one writer at
// a time, and not while its checkpoint is committed or discarded.
type Store struct {
	dir  string
	job  Fingerprint
	lock *os.File // LOCK, flocked while the Store is open; it names the holder

	mu       sync.Mutex
	begun    map[int]*session // checkpoints this Store has written to
	finished bool             // the directory holds the mark of a finished job (MarkFinished)
}

// session is what a Store wrote of one checkpoint.
type session struct {
	pieces    map[Key]PieceInfo
	committed bool
}

// Create opens dir for writing checkpoints of job, creating it if needed. It fails at once,
// naming dir, when dir cannot be written, when another Store (of any process) has it open
// (the error names that process: its id, host, program and start, which the LOCK file
// records while it holds it), or when it holds a committed checkpoint of another job (a
// *MismatchError; the directory is left untouched). Close releases it.
func Create(dir string, job Fingerprint) (*Store, error) {
	if dir == "" {
		return nil, errors.New("checkpoint: no directory given")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: directory %s: %w", dir, fsError(err))
	}
	lock, err := openLock(filepath.Join(dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: directory %s not usable: %w", dir, fsError(err))
	}
	s := &Store{dir: dir, job: job, lock: lock, begun: make(map[int]*session)}
	if err := s.check(); err != nil {
		lock.Close()
		return nil, err
	}
	removeTrash(dir)
	return s, nil
}

// openLock opens (creating it) path, a directory's LOCK, for writing its holder there: only
// a regular file, never through a link (to a file outside the directory) nor waiting on a
// named pipe.
func openLock(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openFlags, 0o644)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(path, fi.Mode())
		}
		return nil, err
	}
	return f, nil
}

// check locks s's directory, proves it writable and refuses another job's checkpoints.
func (s *Store) check() error {
	switch ok, err := lockFile(s.lock); {
	case err != nil:
		return fmt.Errorf("checkpoint: locking directory %s: %w", s.dir, err)
	case !ok:
		holder, _ := io.ReadAll(io.LimitReader(s.lock, 512))
		if len(holder) == 0 {
			holder = []byte("another process")
		}
		return fmt.Errorf("checkpoint: directory %s is in use by %s: another job, or another run of this one, keeps its checkpoints there; give this job a directory of its own",
			s.dir, strings.TrimSpace(string(holder)))
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d on host %s (program %s, since %s)\n", os.Getpid(), host, s.job.Program, time.Now().Format(time.RFC3339))
	if err := s.lock.Truncate(0); err == nil { // the holder, for the message of a process refused
		s.lock.WriteAt([]byte(holder), 0)
	}
	_, err := os.Lstat(filepath.Join(s.dir, finishedName))
	s.finished = err == nil
	probe, err := os.CreateTemp(s.dir, tmpPrefix+"probe-*")
	if err == nil {
		_, err = probe.Write([]byte{0})
		err = errors.Join(err, probe.Close(), os.Remove(probe.Name()))
	}
	if err != nil {
		return fmt.Errorf("checkpoint: directory %s not writable: %w", s.dir, fsError(err))
	}
	es, err := list(s.dir)
	if err != nil {
		return fmt.Errorf("checkpoint: directory %s: %w", s.dir, err)
	}
	for _, e := range es {
		if !e.complete {
			continue
		}
		m, err := readManifest(filepath.Join(ckptDir(s.dir, e.k), manifestName), e.k, s.job)
		if err != nil {
			continue // unreadable: Find reports it; it is replaced in time
		}
		if d := m.Job.Diff(s.job); d != "" {
			return &MismatchError{Dir: s.dir, Checkpoint: e.k, Diff: d}
		}
	}
	return nil
}

// Dir returns the Store's directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the directory. The checkpoints stay.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	err := s.lock.Close()
	s.lock = nil
	return err
}

// begin returns the session of checkpoint k, starting it if needed. The first write of k
// by this Store removes whatever checkpoints numbered k or more the directory holds from an
// earlier run (a job writes its checkpoints in increasing order, so they are the leftovers of
// a run that was restarted from an older one, or of a finished one), then the mark of a
// finished job (MarkFinished), then creates k's directory.
func (s *Store) begin(k int) (*session, error) {
	switch {
	case s.lock == nil:
		return nil, ErrClosed
	case k < 1:
		return nil, fmt.Errorf("checkpoint %d: numbers start at 1", k)
	}
	if ss := s.begun[k]; ss != nil {
		if ss.committed {
			return nil, fmt.Errorf("checkpoint %d in %s: already committed", k, s.dir)
		}
		return ss, nil
	}
	es, err := list(s.dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d: %w", k, err)
	}
	for _, e := range es {
		if e.k >= k && s.begun[e.k] == nil {
			if err := removeCheckpoint(s.dir, e.k); err != nil {
				return nil, fmt.Errorf("checkpoint %d: removing the old checkpoint %d: %w", k, e.k, err)
			}
		}
	}
	if err := s.unmark(); err != nil { // once the finished run's later checkpoints are gone
		return nil, fmt.Errorf("checkpoint %d: %w", k, err)
	}
	if err := os.Mkdir(ckptDir(s.dir, k), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint %d: %w", k, fsError(err))
	}
	if err := syncDir(s.dir); err != nil {
		return nil, fmt.Errorf("checkpoint %d: %w", k, fsError(err))
	}
	ss := &session{pieces: make(map[Key]PieceInfo)}
	s.begun[k] = ss
	return ss, nil
}

// PieceWriter streams one piece into a Store: Write its content (it is an io.Writer), then
// Finish, or Abort. It is not safe for concurrent use.
type PieceWriter struct {
	s    *Store
	k    int
	key  Key
	file *atomicFile
	info PieceInfo
	err  error
}

// NewPiece starts writing the piece key of checkpoint k: this process's own or a partner
// copy of another process's. Writing a piece again before the checkpoint is committed
// replaces it.
func (s *Store) NewPiece(k int, key Key) (*PieceWriter, error) {
	if err := key.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	_, err := s.begin(k)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	f, err := createAtomic(ckptDir(s.dir, k), key.fileName(), filepath.Join(s.dir, recycleName))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d: writing piece %v in %s: %w", k, key, s.dir, err)
	}
	return &PieceWriter{s: s, k: k, key: key, file: f, info: PieceInfo{Key: key}}, nil
}

// Write appends p to the piece. After an error the piece is abandoned (its temporary file
// removed) and every later call returns that error.
func (w *PieceWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.file.f.Write(p)
	w.info.CRC = crc32.Update(w.info.CRC, castagnoli, p[:n])
	w.info.Size += int64(n)
	if err != nil {
		w.fail(err)
	}
	return n, w.err
}

// fail abandons the piece with err.
func (w *PieceWriter) fail(err error) {
	w.file.abort()
	w.err = fmt.Errorf("checkpoint %d: writing piece %v in %s: %w", w.k, w.key, w.s.dir, fsError(err))
}

// Finish makes the piece's content durable (fsync) and renames it into place, and returns
// its size and checksum, which the job's manifest lists; its name is made durable with the
// others of the checkpoint, by Commit. On error nothing of the piece remains.
func (w *PieceWriter) Finish() (PieceInfo, error) {
	if w.err != nil {
		return PieceInfo{}, w.err
	}
	if err := w.file.commit(w.info.Size, false); err != nil {
		w.fail(err)
		return PieceInfo{}, w.err
	}
	w.err = errors.New("checkpoint: piece already finished")
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if ss := w.s.begun[w.k]; ss != nil {
		ss.pieces[w.key] = w.info
	}
	return w.info, nil
}

// Abort abandons the piece, removing what was written of it.
func (w *PieceWriter) Abort() {
	if w.err == nil {
		w.file.abort()
		w.err = errors.New("checkpoint: piece aborted")
	}
}

// WritePiece writes data, whole, as the piece key of checkpoint k, durably, and returns
// its size and checksum. data is not copied.
func (s *Store) WritePiece(k int, key Key, data []byte) (PieceInfo, error) {
	w, err := s.NewPiece(k, key)
	if err != nil {
		return PieceInfo{}, err
	}
	if _, err := w.Write(data); err != nil {
		return PieceInfo{}, err
	}
	return w.Finish()
}

// Commit makes checkpoint k complete in this directory: it writes the manifest, which
// lists pieces (every piece of the whole job, as WritePiece or InlinePiece returned them,
// in any order) and the job's fingerprint, atomically. The caller commits only once every
// piece is durable in some directory of the job, and commits in every directory. The
// pieces this Store wrote for k must be listed as written. Once k is committed, only the
// two newest complete checkpoints of the directory are kept: older ones, and incomplete
// ones older than k, are removed (a failure to remove is tried again at the next Commit),
// but for the newest of them, whose files the next pieces overwrite (DIR/.recycle).
func (s *Store) Commit(k int, pieces []PieceInfo) error {
	return s.commit(k, pieces, nil)
}

// CommitPart is Commit with a manifest that lists only pieces, a part of checkpoint k,
// whose pieces together have the Summary whole: those this directory holds (its own and
// the partner copies it keeps), so that a manifest's length does not grow with the job.
// A restart then unites the manifests it finds, and uses k only when the union is whole
// (Choose). The pieces this Store wrote for k must be listed as written, and pieces may
// not be more than whole's.
func (s *Store) CommitPart(k int, pieces []PieceInfo, whole Summary) error {
	if len(pieces) > whole.Pieces {
		return fmt.Errorf("checkpoint %d: committing %d pieces in %s, of a checkpoint of %d", k, len(pieces), s.dir, whole.Pieces)
	}
	return s.commit(k, pieces, &whole)
}

// commit writes the manifest of k: every piece (whole nil), or a part of the whole.
func (s *Store) commit(k int, pieces []PieceInfo, whole *Summary) error {
	sorted, err := sortedPieces(pieces)
	if err != nil {
		return fmt.Errorf("checkpoint %d: %w", k, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.begin(k)
	if err != nil {
		return err
	}
	for _, key := range slices.SortedFunc(maps.Keys(ss.pieces), Key.Compare) {
		have := ss.pieces[key]
		i, ok := slices.BinarySearchFunc(sorted, key, func(p PieceInfo, k Key) int { return p.Key.Compare(k) })
		if !ok || sorted[i] != have {
			return fmt.Errorf("checkpoint %d: piece %v written in %s (%d bytes, crc32c %08x) is not in the manifest as such",
				k, key, s.dir, have.Size, have.CRC)
		}
	}
	m := &manifest{Format: formatWhole, Checkpoint: k, Job: s.job, Pieces: sorted, Whole: whole}
	if whole != nil {
		m.Format = formatPart
	}
	b, err := m.encode()
	if err == nil { // the pieces' names are durable before the manifest's
		err = fsError(syncDir(ckptDir(s.dir, k)))
	}
	if err == nil {
		err = writeAtomic(ckptDir(s.dir, k), manifestName, b)
	}
	if err != nil {
		return fmt.Errorf("checkpoint %d: committing in %s: %w", k, s.dir, err)
	}
	ss.committed = true
	s.prune(k)
	return nil
}

// prune removes, after k's commit, the complete checkpoints but the two newest and the
// incomplete ones older than k. The newest of them is recycled rather than deleted: the
// pieces of the next checkpoints reuse its files.
func (s *Store) prune(k int) {
	es, err := list(s.dir)
	if err != nil {
		return
	}
	kept, recycled := 0, false
	for _, e := range es {
		switch {
		case e.complete && kept < 2:
			kept++
		case e.complete || e.k < k:
			if !recycled && e.odd == "" { // a link is removed, never followed
				err, recycled = recycle(s.dir, e.k), true
			} else {
				err = removeCheckpoint(s.dir, e.k)
			}
			if err == nil {
				delete(s.begun, e.k)
			}
		}
	}
}

// Discard removes the incomplete checkpoint k from the directory (what was written of it
// before a full disk, say). A complete checkpoint is never discarded.
func (s *Store) Discard(k int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	if _, err := os.Lstat(filepath.Join(ckptDir(s.dir, k), manifestName)); err == nil {
		return fmt.Errorf("checkpoint %d in %s is complete: not discarded", k, s.dir)
	}
	delete(s.begun, k)
	return removeCheckpoint(s.dir, k)
}

// removeCheckpoint removes checkpoint k's directory from dir: renamed away at once (so it
// is never seen half removed), then deleted.
func removeCheckpoint(dir string, k int) error {
	name := ckptDir(dir, k)
	trash := filepath.Join(dir, fmt.Sprintf("%s-%d-%d", trashPrefix, k, rand.Uint64()))
	err := os.Rename(name, trash)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil: // no room for a new name, say: remove it in place
		return os.RemoveAll(name)
	}
	return errors.Join(syncDir(dir), os.RemoveAll(trash))
}

// recycle makes checkpoint k's directory in dir the recycled files (recycleName), in place
// of the previous ones. A piece written later takes the file of its name there (see
// createAtomic) rather than a new one: overwriting a file of the same size, as the pieces
// of one job are from one checkpoint to the next, allocates no inode, no disk block and,
// while the file is cached, no page, where a new file costs all three, and the deletion of
// an old one as much again. The directory is renamed durably before any file of it is
// reused, so it is never seen as a checkpoint again, even after a crash.
func recycle(dir string, k int) error {
	bin := filepath.Join(dir, recycleName)
	if err := os.RemoveAll(bin); err != nil {
		return removeCheckpoint(dir, k)
	}
	if err := os.Rename(ckptDir(dir, k), bin); err != nil {
		return removeCheckpoint(dir, k)
	}
	return syncDir(dir)
}

// removeTrash removes what removals interrupted by a crash left.
func removeTrash(dir string) {
	trash, _ := filepath.Glob(filepath.Join(dir, trashPrefix+"-*"))
	for _, t := range trash {
		os.RemoveAll(t)
	}
}

// fsError marks a full file system's error with ErrNoSpace.
func fsError(err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// atomicFile is a file written under a temporary name and renamed into place.
type atomicFile struct {
	f           *os.File
	dir, target string
	reused      bool // a recycled file, whose old content is overwritten
}

// createAtomic starts writing file name in dir: in the file of that name in directory
// recycled when there is one (moved into dir under a temporary name, see reuse), else in a
// new one.
func createAtomic(dir, name, recycled string) (*atomicFile, error) {
	a := &atomicFile{dir: dir, target: filepath.Join(dir, name)}
	if recycled != "" {
		tmp := filepath.Join(dir, fmt.Sprintf("%s%s-%d", tmpPrefix, name, rand.Uint64()))
		if f := reuse(recycled, name, tmp); f != nil {
			a.f, a.reused = f, true
			return a, nil
		}
	}
	f, err := os.CreateTemp(dir, tmpPrefix+name+"-*")
	if err != nil {
		return nil, fsError(err)
	}
	a.f = f
	return a, nil
}

// commit cuts the file at size bytes (a recycled file may have had more), syncs it and
// renames it into place, then, with syncName, syncs the directory, which makes the new name
// durable; on error the temporary file is removed.
func (a *atomicFile) commit(size int64, syncName bool) error {
	var err error
	if a.reused {
		err = a.f.Truncate(size)
	}
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(a.f.Name(), a.target)
	}
	if err != nil {
		os.Remove(a.f.Name())
		return fsError(err)
	}
	if !syncName {
		return nil
	}
	if err := syncDir(a.dir); err != nil {
		os.Remove(a.target)
		return fsError(err)
	}
	return nil
}

// reuse moves the file name of directory recycled to tmp and opens it for writing, or
// returns nil. Only what lies inside the Store's directory is moved and overwritten:
// recycled must be a directory, not a symbolic link (to elsewhere), and the file a regular
// file of one name, not a link, a named pipe, nor a hard link whose other name, outside,
// would see the new content.
func reuse(recycled, name, tmp string) *os.File {
	if fi, err := os.Lstat(recycled); err != nil || !fi.IsDir() {
		return nil
	}
	old := filepath.Join(recycled, name)
	if fi, err := os.Lstat(old); err != nil || !fi.Mode().IsRegular() || links(fi) > 1 {
		return nil
	}
	if os.Rename(old, tmp) != nil {
		return nil
	}
	f, fi, err := openFile(tmp, os.O_WRONLY)
	if err == nil && links(fi) == 1 {
		return f
	}
	if f != nil {
		f.Close()
	}
	os.Remove(tmp)
	return nil
}

// abort removes the temporary file.
func (a *atomicFile) abort() {
	a.f.Close()
	os.Remove(a.f.Name())
}

// writeAtomic writes b as file name in dir, durably and atomically.
func writeAtomic(dir, name string, b []byte) error {
	a, err := createAtomic(dir, name, "")
	if err != nil {
		return err
	}
	if _, err := a.f.Write(b); err != nil {
		a.abort()
		return fsError(err)
	}
	return a.commit(int64(len(b)), true)
}
