package orwl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/internal/tick"
	"github.com/orwl-go/orwl/transport"
)

// Checkpoints (docs/design.md, rule 16). A location's FIFO serves its iterative handles in rounds, round
// k holding the k-th access of each; the content of every location between round k-1 and
// round k, with every task's kept state as it enters iteration k, is a consistent cut of the
// job. Checkpoint k is taken there, piece by piece, with no barrier: a location is copied
// under its lock when the first request of round k is granted (location.granting), a task's
// kept state when the task enters iteration k (Task.Iterate), into buffers allocated and
// touched at the schedule (checkpointer.allocate); a writer goroutine writes each piece
// into this process's directory (fsync'd) and sends it to a partner process, which keeps a
// copy in its own (package checkpoint does the storage); a piece of at most
// checkpoint.InlineMax bytes (a halo) goes into the manifest instead, which every directory
// keeps. The writers start once every task has copied its kept states, and work with a
// processor of their own (checkpointer.write), so that the tasks wait for nothing but
// their copies.
//
// Rank 0 starts a checkpoint every Checkpoint.Every, in three short exchanges, so that no
// round k is granted anywhere before every location is armed for it:
//
//  1. prepare: every process stops its tasks from entering an iteration past the highest
//     one they have entered plus a slack, and reports that bound B; k is then max(B)+2, so
//     no task has made (nor can make, until step 3) a request of round k. The slack comes
//     from the pace of the last checkpoints, so that the tasks can run through twice the
//     time the hold lasted (prepare to go, measured by each process; 30 ms before the first)
//     without waiting; and it is never less than a count that starts at 1 and doubles after
//     a checkpoint at which a task of the process had to wait all the same.
//  2. arm k: every process arms its locations and its tasks' kept states for k.
//  3. go: the tasks run on. Once its tasks have copied their kept states, every process
//     says so (copied), and rank 0 then tells them all to write the checkpoint (write).
//
// When a process has written its pieces and its partner has stored their copies, it tells
// rank 0 what it wrote; once every process has, rank 0 sends everybody the job's list of
// pieces, which each commits as the checkpoint's manifest. A piece that cannot be written (a
// full disk) is reported once, and the checkpoint is discarded everywhere: the previous one
// stays, and the job goes on.
//
// The snapshot buffers are reused from one checkpoint to the next, so a process never arms
// a checkpoint while a buffer of an earlier one is still read: checkpointer.held counts its
// pieces from their arm until the writer is done with them and, for a piece sent to the
// partner, the partner has said it stored its copy (which it sends once its own writer is
// done with the buffer the copy arrived in). A process whose count is not zero says so in
// its report at prepare, and rank 0 skips that checkpoint (the next comes Every later) and
// says so at debug level. In a checkpoint that completes every piece is released before the
// process reports it done, so only a failed checkpoint, whose pieces may still be queued or
// on their way when it is given up, or a disk slower than Every, ever makes one skipped.

// Checkpoint configures the checkpoints of a job (see Task.Iterate and Task.Keep). They are
// taken only between the iterations of Task.Iterate: a job whose tasks never run it takes
// none, and rank 0 says so when the job ends.
type Checkpoint struct {
	// Dir is where checkpoints are written and, at the start, looked for: a directory
	// pattern in which "{rank}" and "{host}" become this process's rank and host name, so
	// that each process writes to a disk of its node. A Dir without "{rank}" is the job's
	// directory, which its processes share (on one host, or on a file system that every
	// host mounts): each writes into its subdirectory "rank-R" (checkpoint.Expand). At the
	// start each process looks in the directories of the pattern it sees; they need not be
	// shared (restore.go). A directory that another job (or another run of this one) is
	// writing is refused, naming that process. Empty means ORWL_CHECKPOINT_DIR, and when
	// that is empty too the job takes no checkpoints.
	Dir string
	// Every is the time between two checkpoints (0: ORWL_CHECKPOINT_EVERY, else 1 minute).
	Every time.Duration
	// Program names the program in the checkpoints' fingerprint (default: the base name of
	// the executable); Params are the parameters that must be the same for a job to restart
	// from a checkpoint (problem size, iterations...). A job is known by Program, Tasks, the
	// names of Locations and Params (and a kept state by its size): a restart from the
	// checkpoints of another is refused, naming the difference. A changed program whose
	// computation differs, not its shape, is the same job to the checkpoints: give it another
	// Program or Params (a version), or another Dir, so that it does not resume from the
	// old one's. A job that succeeded marks its checkpoints finished: run again on the same
	// Dir, it starts afresh and says why, and a run that fails after a checkpoint of its own
	// resumes from that one.
	Program string
	Params  map[string]string
}

// Environment variables of Config.Checkpoint.
const (
	envCheckpointDir       = "ORWL_CHECKPOINT_DIR"
	envCheckpointEvery     = "ORWL_CHECKPOINT_EVERY"
	defaultCheckpointEvery = time.Minute
)

// keptState is a task's private state registered with Task.Keep.
type keptState struct {
	name string
	buf  []byte // the task's own memory
	// wire is the state's piece as it travels to the partner process, its name then its
	// copy of the armed checkpoint (snap), allocated and touched at the schedule and reused:
	// the copy at a checkpoint's iteration takes no page fault, and none is made to send it.
	wire, snap []byte
}

// checkpointer is this process's part in the checkpoints of the job; nil when the job takes
// none.
type checkpointer struct {
	j       *job
	every   time.Duration
	store   *checkpoint.Store
	restart *restart // the restart from a checkpoint (restore.go)

	entered atomic.Int64 // the highest iteration a task of this process has entered
	minIter atomic.Int64 // the smallest n of this process's Iterate calls
	hold    atomic.Int64 // tasks enter no iteration above it
	armed   atomic.Int64 // the checkpoint whose kept states tasks copy as they enter it; 0: none
	slack   atomic.Int64 // how far past the highest entered iteration a hold lets tasks go
	waited  atomic.Bool  // a task waited at the hold of the checkpoint being prepared
	began   atomic.Int64 // when a task first entered an iteration, in ns since made; 0: none yet
	// held counts this process's pieces of armed checkpoints whose buffers (location.snapBuf,
	// keptState.snap) are not free yet: from the arm until the writer is done with the piece
	// and, if it sent it, the partner said it stored its copy (ckptStored).
	held atomic.Int64
	// owing counts this process's tasks that iterate, keep state and have not copied it for
	// the armed checkpoint yet (Task.owes, under mu too). Once it is zero after the
	// checkpoint's ckptGo, the process sends ckptCopied (copiedDue: the checkpoint whose
	// ckptCopied waits for it, 0: none).
	owing     int
	copiedDue int
	// released is the checkpoint rank 0 said every task of the job has copied its states
	// for (ckptWrite): the writer takes no work while the armed checkpoint is past it.
	released atomic.Int64

	// The pace of the last checkpoints, on the connection's reader that runs handle.
	made     time.Time     // when the checkpointer was made: the origin of began
	prepared time.Time     // when the checkpoint being prepared was
	lastIter int64         // entered then
	window   time.Duration // the longest time the hold lasted (prepare to go) lately
	perIter  time.Duration // the time of an iteration lately (the highest entered)

	mu      sync.Mutex
	lifted  chan struct{} // closed when the hold is lifted
	queue   []func()      // work for the writer
	wake    chan struct{} // tells the writer the queue grew
	k       int           // the checkpoint this process writes; 0: none
	expect  int           // its pieces of this process
	written []checkpoint.PieceInfo
	stored  int  // partner copies of them stored
	failed  bool // a piece could not be written
	told    bool // this process told rank 0 of a full disk (warn)
	full    bool // rank 0: a full disk was reported (report)
	// spare holds the buffers partner copies arrived in, once written: the next copies land
	// in them (copyBuffer), as the same pieces come at every checkpoint, so receiving one
	// takes no page fault, and a piece of any size has a destination.
	spare [][]byte

	replies  chan ckptReply // rank 0: the processes' answers
	armedAt  time.Time      // rank 0: when the checkpoint being taken was armed
	iterated atomic.Bool    // rank 0: a task of the job ran Task.Iterate (ckptIterated)
	setting  string         // where the directory pattern comes from, and the pattern, for messages
}

// pieceJob is a piece for the writer: this process's own (from -1), or a partner copy that
// process from sent.
type pieceJob struct {
	k    int
	key  checkpoint.Key
	data []byte
	wire []byte // a kept state's payload for the partner (keptState.wire); nil: build it
	from int
	buf  []byte // a partner copy's buffer (copyBuffer), given back once data is written
}

// ckptReply is a process's answer to rank 0.
type ckptReply struct {
	from   int
	phase  uint8
	bound  int64 // ckptReport
	minIt  int64 // ckptReport
	busy   bool  // ckptReport
	pieces []checkpoint.PieceInfo
	failed bool // ckptDone
}

// newCheckpointer sets up the checkpoints of j from cfg and the environment, and finds the
// checkpoint the job restarts from. It returns nil when the job takes none.
func newCheckpointer(j *job, cfg Checkpoint) (*checkpointer, error) {
	pattern := cfg.Dir
	if pattern == "" {
		pattern = os.Getenv(envCheckpointDir)
	}
	if pattern == "" {
		return nil, nil
	}
	every, err := duration(cfg.Every, envCheckpointEvery)
	if err != nil {
		return nil, err
	}
	if every == 0 {
		every = defaultCheckpointEvery
	}
	fp := checkpoint.Fingerprint{Program: cfg.Program, Tasks: j.tasks, Locations: j.names, Params: cfg.Params}
	if fp.Program == "" {
		fp.Program = filepath.Base(os.Args[0])
	}
	c := &checkpointer{j: j, every: every, lifted: make(chan struct{}), wake: make(chan struct{}, 1),
		replies: make(chan ckptReply, 4*j.procs), setting: fmt.Sprintf("Config.Checkpoint.Dir %q", pattern)}
	if cfg.Dir == "" {
		c.setting = fmt.Sprintf("%s=%s", envCheckpointDir, pattern)
	}
	c.hold.Store(math.MaxInt64)
	c.minIter.Store(math.MaxInt64)
	c.slack.Store(1)
	c.made = time.Now()
	dirs, err := checkpoint.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("orwl: checkpoints: %w", err)
	}
	c.restart = newRestart(dirs, fp, j.procs) // an error goes to rank 0, which fails the job
	c.entered.Store(-1)
	host, _ := os.Hostname()
	if c.store, err = checkpoint.Create(checkpoint.Expand(pattern, j.rank, host), fp); err != nil {
		return nil, fmt.Errorf("orwl: checkpoints: %w", err)
	}
	return c, nil
}

// close closes the directory of checkpoints.
func (c *checkpointer) close() {
	if c != nil {
		c.store.Close()
	}
}

// round is the round of the request that a handle places after acquires acquires: -1 for a
// one-shot (not iterative) handle.
func (j *job) round(iterative bool, acquires int) int {
	if !iterative {
		return -1
	}
	return j.ckpt.start() + acquires
}

// maxSlack bounds checkpointer.slack: a checkpoint is taken at most this many iterations
// (plus 2) after it is started.
const maxSlack = 1 << 10

// firstWindow is what the hold of the first checkpoint is expected to last, before one was
// measured: the three exchanges, each a message that a connection's reader may have to wait
// for a busy processor to read (the Go scheduler preempts a running goroutine after 10 ms).
const firstWindow = 30 * time.Millisecond

// holdSlack is the slack of the hold of a checkpoint being prepared (now): enough
// iterations, at the pace the tasks enter them, to cover twice the time the hold is expected
// to last, so that no task waits; and at least checkpointer.slack, which doubles after a
// checkpoint at which a task waited all the same. It runs in handle.
func (c *checkpointer) holdSlack() int64 {
	now, entered := time.Now(), c.entered.Load()
	switch {
	case !c.prepared.IsZero() && entered > c.lastIter:
		c.perIter = now.Sub(c.prepared) / time.Duration(entered-c.lastIter)
	case c.prepared.IsZero() && c.began.Load() != 0 && entered > int64(c.start()):
		began := c.made.Add(time.Duration(c.began.Load()))
		c.perIter = now.Sub(began) / time.Duration(entered-int64(c.start()))
	}
	c.prepared, c.lastIter = now, entered
	window := c.window
	if window == 0 {
		window = firstWindow
	}
	return paceSlack(window, c.perIter, c.slack.Load())
}

// paceSlack is the slack that lets tasks entering an iteration every perIter (0: not known)
// run through twice window without waiting, at least least, and at most maxSlack.
func paceSlack(window, perIter time.Duration, least int64) int64 {
	slack := least
	if perIter > 0 {
		slack = max(slack, int64(min(2*window/perIter, maxSlack))+1)
	}
	return min(slack, maxSlack)
}

// enter is called by a task as it enters iteration iter: it waits while iter is past the
// hold of a checkpoint being prepared, and copies the task's kept states for an armed one.
func (c *checkpointer) enter(ctx context.Context, t *Task, iter int) error {
	for {
		e := c.entered.Load()
		if int64(iter) <= e || c.entered.CompareAndSwap(e, int64(iter)) {
			break
		}
	}
	if c.began.Load() == 0 {
		c.began.CompareAndSwap(0, max(1, int64(time.Since(c.made))))
	}
	var held time.Time // when the task was first held up at this iteration
	if int64(iter) > c.hold.Load() {
		held = time.Now()
		c.waited.Store(true)
	}
	for int64(iter) > c.hold.Load() {
		c.mu.Lock()
		lifted := c.lifted
		c.mu.Unlock()
		if int64(iter) <= c.hold.Load() {
			break
		}
		select {
		case <-lifted:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if k := c.armed.Load(); k != 0 && int(k) == iter {
		if held.IsZero() {
			held = time.Now()
		}
		t.ckptEntered++
		for i := range t.kept {
			s := &t.kept[i]
			if len(s.snap) != len(s.buf) { // not allocated at the schedule
				s.wire = append([]byte(s.name), s.buf...)
				s.snap = s.wire[len(s.name):]
			}
			copy(s.snap, s.buf)
			p := pieceJob{k: iter, key: checkpoint.StateKey(t.id, s.name), data: s.snap, wire: s.wire, from: -1}
			c.push(func() { c.writePiece(p) })
		}
		t.paid()
	}
	if !held.IsZero() {
		t.ckptHeld += time.Since(held)
	}
	return nil
}

// allocate gives this process's locations and its tasks' kept states their snapshot
// buffers, at the schedule (after the restore, which may resize locations): touched now, so
// that copying a checkpoint into them takes no page fault on the iteration path (fresh
// memory costs about 2 ms per MiB to touch on a virtual machine), and on huge pages
// (snapBytes). A location resized later gets a larger buffer at its next snapshot. They
// are freed with the job's other buffers (freeSnapshots).
func (c *checkpointer) allocate() {
	if c == nil {
		return
	}
	for _, l := range c.j.owned {
		if l != nil {
			l.mu.Lock()
			l.snapBuf = snapBytes(len(l.data))[:0]
			l.mu.Unlock()
		}
	}
	for _, t := range c.j.local {
		for i := range t.kept {
			s := &t.kept[i]
			s.wire = snapBytes(len(s.name) + len(s.buf))
			copy(s.wire, s.name)
			s.snap = s.wire[len(s.name):]
		}
	}
}

// snapBytes returns n bytes for snapshots, whose pages are all mapped (written once): on
// huge pages when they are large (hugemem.AllocHuge). A checkpoint's copy finds its
// buffer's page translations long gone from the caches; on small pages, a copy of 8 MiB
// then took twice the time of a copy into a buffer just used (measured on a virtual
// machine, which walks the guest's page tables and the host's), on huge pages about the
// same. Give them back with hugemem.Free.
func snapBytes(n int) []byte {
	b := hugemem.AllocHuge(n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// freeSnapshots frees the snapshot buffers, once nothing can use them (job.freeBuffers).
func (c *checkpointer) freeSnapshots() {
	if c == nil {
		return
	}
	for _, l := range c.j.owned {
		if l != nil {
			hugemem.Free(l.snapBuf)
			l.snapBuf = nil
		}
	}
	for _, t := range c.j.local {
		for i := range t.kept {
			s := &t.kept[i]
			hugemem.Free(s.wire)
			s.wire, s.snap = nil, nil
		}
	}
}

// snapshot copies l's data for the armed checkpoint and hands it to the writer; l.mu held.
func (l *location) snapshot() {
	k := l.snapRound
	l.snapRound = 0
	if cap(l.snapBuf) < len(l.data) { // resized since the schedule; no piece uses it (held)
		hugemem.Free(l.snapBuf)
		l.snapBuf = snapBytes(len(l.data))
	}
	l.snapBuf = append(l.snapBuf[:0], l.data...)
	p := pieceJob{k: k, key: checkpoint.LocationKey(l.id.Task, l.id.Name), data: l.snapBuf, from: -1}
	l.j.ckpt.push(func() { l.j.ckpt.writePiece(p) })
}

// arm arms l for checkpoint k: a location that no iterative handle uses never changes
// after the schedule, and is copied now.
func (l *location) arm(k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snapRound = k
	if !l.rounds {
		l.snapshot()
	}
}

// push queues work for the writer (what touches the disk); it never blocks.
func (c *checkpointer) push(work func()) {
	c.mu.Lock()
	c.queue = append(c.queue, work)
	c.mu.Unlock()
	c.nudge()
}

// nudge wakes the writer: its queue grew, or the tasks' copies it waits for are done.
func (c *checkpointer) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write does the queued work until ctx is done: making pieces durable (this process's own,
// then sent on to the partner, and the partner copies of others), committing checkpoints.
// It waits from the arm of a checkpoint until every task of the job has copied its kept
// states for it (released), so that those copies, the only part of a checkpoint the tasks
// wait for, run alone; while it has work, the process has a processor more (writerWorking).
func (c *checkpointer) write(ctx context.Context) {
	working := false
	defer func() {
		if working {
			writerWorking(false)
		}
	}()
	for {
		var q []func()
		c.mu.Lock()
		if c.released.Load() >= c.armed.Load() {
			q, c.queue = c.queue, nil
		}
		c.mu.Unlock()
		if len(q) > 0 {
			if !working {
				working = true
				writerWorking(true)
			}
			for _, work := range q {
				work()
			}
			continue
		}
		if working {
			working = false
			writerWorking(false)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
	}
}

// writerProcs counts the checkpoint writers of this process that have work, and holds the
// GOMAXPROCS they set.
var writerProcs struct {
	sync.Mutex
	working int
	raised  int // GOMAXPROCS as the first of them raised it
}

// writerWorking raises GOMAXPROCS by one when a writer of this process starts working while
// none was, and sets it back when the last one is done (unless it was changed meanwhile). A
// write, an fsync or a rename blocks in the kernel holding its processor until the Go
// runtime's monitor takes it back, 20 µs to 20 ms later; with one processor per process
// (shareCores, orwlrun), the tasks of the process, and their neighbours elsewhere, would wait
// that long, about 50 ms per checkpoint of a 2-process stencil that writes 8 MiB per process.
func writerWorking(on bool) {
	writerProcs.Lock()
	defer writerProcs.Unlock()
	switch {
	case on:
		writerProcs.working++
		if writerProcs.working == 1 {
			writerProcs.raised = runtime.GOMAXPROCS(0) + 1
			runtime.GOMAXPROCS(writerProcs.raised)
		}
	default:
		writerProcs.working--
		if writerProcs.working == 0 && runtime.GOMAXPROCS(0) == writerProcs.raised {
			runtime.GOMAXPROCS(writerProcs.raised - 1)
		}
	}
}

// writePiece writes one piece and does what follows: a partner copy is acknowledged to its
// sender; an own piece is sent to the partner, and the checkpoint reported done when all are.
// An own piece small enough for the manifest (checkpoint.InlinePiece) is neither written
// nor sent: every process's manifest will hold it.
func (c *checkpointer) writePiece(p pieceJob) {
	inline := p.from < 0 && len(p.data) <= checkpoint.InlineMax
	var info checkpoint.PieceInfo
	var err error
	if inline {
		info, err = checkpoint.InlinePiece(p.key, p.data)
	} else {
		info, err = c.writeFile(p)
	}
	if err != nil {
		c.warn(p.k, err)
	}
	if p.from >= 0 {
		c.mu.Lock()
		c.spare = append(c.spare, p.buf)
		c.mu.Unlock()
		c.send(p.from, ckptMsg{phase: ckptStored, k: p.k, failed: err != nil}, nil)
		return
	}
	c.mu.Lock()
	if p.k == c.k { // not a piece of a checkpoint already given up
		c.failed = c.failed || err != nil
		if err == nil {
			c.written = append(c.written, info)
		}
	}
	c.mu.Unlock()
	if partner := c.partner(); partner >= 0 && err == nil && !inline {
		loc, _ := c.j.locIndex(Location{Task: p.key.Task, Name: p.key.Name}) // a state's is not used
		var m ckptMsg
		var payload []byte
		if p.wire != nil { // the name and the data as pieceMsg makes them, with no copy
			m, _ = pieceMsg(p.k, p.key, nil, loc)
			payload = p.wire
		} else {
			m, payload = pieceMsg(p.k, p.key, p.data, loc)
		}
		c.send(partner, m, payload)
	} else {
		c.held.Add(-1) // not sent: its buffer is free
		c.mu.Lock()
		if p.k == c.k && err == nil {
			c.stored++ // in the manifest, or no partner: one copy is all there is
		}
		c.mu.Unlock()
	}
	c.maybeDone()
}

// writeChunk is the most writeFile writes at once.
const writeChunk = 1 << 20

// chunkHook, when set (by a test), is called before writeFile writes each chunk of a piece;
// an error it returns fails the piece's write as the disk's would.
var chunkHook func(p pieceJob, chunk []byte) error

// writeFile writes p durably into this process's directory (checkpoint.Store.WritePiece), in
// large sequential writes of at most writeChunk bytes, letting the tasks run between them:
// with one processor per process (shareCores), a write of the whole piece, and its
// checksum, would hold the task of this process, and its neighbours, up for milliseconds.
func (c *checkpointer) writeFile(p pieceJob) (checkpoint.PieceInfo, error) {
	w, err := c.store.NewPiece(p.k, p.key)
	if err != nil {
		return checkpoint.PieceInfo{}, err
	}
	for data := p.data; len(data) > 0; {
		n := min(len(data), writeChunk)
		if chunkHook != nil {
			if err := chunkHook(p, data[:n]); err != nil {
				w.Abort()
				return checkpoint.PieceInfo{}, err
			}
		}
		if _, err := w.Write(data[:n]); err != nil {
			return checkpoint.PieceInfo{}, err
		}
		data = data[n:]
		runtime.Gosched()
	}
	return w.Finish()
}

// warn reports a piece or a commit of checkpoint k that failed to rank 0, which logs it
// (report): the job goes on. A process tells rank 0 of a full disk once.
func (c *checkpointer) warn(k int, err error) {
	full := errors.Is(err, checkpoint.ErrNoSpace)
	c.mu.Lock()
	tell := !full || !c.told
	c.told = c.told || full
	c.mu.Unlock()
	if tell {
		c.send(0, ckptMsg{phase: ckptWarn, k: k, failed: full}, []byte(err.Error()))
	}
}

// report is rank 0's part of warn: it logs what rank from could not write of checkpoint k
// (m.failed: a full disk), and why. A full disk is logged once for the whole job, however
// many processes find it, at however many checkpoints; any other trouble each time.
func (c *checkpointer) report(from int, m ckptMsg, why string) {
	c.mu.Lock()
	first := !m.failed || !c.full
	c.full = c.full || m.failed
	c.mu.Unlock()
	if !first {
		return
	}
	msg := fmt.Sprintf("orwl: checkpoint %d not written (rank %d); the job goes on and the previous checkpoint stays: %s", m.k, from, why)
	if m.failed {
		msg += " (a full disk is reported once per job)"
	}
	c.j.log.Warn(msg)
}

// ended tells rank 0, once the tasks of this process have returned, whether one of them ran
// Task.Iterate: before the job's final agreement, which brings rank 0 every message sent
// before it.
func (c *checkpointer) ended() {
	if c != nil && c.minIter.Load() != math.MaxInt64 {
		c.send(0, ckptMsg{phase: ckptIterated}, nil)
	}
}

// finish is this process's part in the end of a job that succeeded, once its writer is
// done: it marks the checkpoints of its directory as those of a finished job
// (checkpoint.Store.MarkFinished), so that the job run again starts afresh; and rank 0 warns
// when no task of the job ran Task.Iterate, the only place where checkpoints are taken.
func (c *checkpointer) finish() {
	if c == nil {
		return
	}
	if err := c.store.MarkFinished(); err != nil {
		c.j.log.Warn(fmt.Sprintf("orwl: rank %d: the job finished, and its checkpoints could not be marked so (a run of the job again would resume from them): %v", c.j.rank, err))
	}
	if c.j.rank == 0 && !c.iterated.Load() {
		c.j.log.Warn(fmt.Sprintf("orwl: checkpoints are on (%s), and no task of the job ran Task.Iterate: no checkpoint was taken. Checkpoints are taken between the iterations of Task.Iterate, with the state each task registers with Task.Keep: run the iterations with them, or turn checkpoints off", c.setting))
	}
}

// partner is the process that keeps copies of this one's pieces: the next rank; -1 alone.
func (c *checkpointer) partner() int {
	if c.j.procs == 1 {
		return -1
	}
	return (c.j.rank + 1) % c.j.procs
}

// maybeDone tells rank 0 that this process's part of the checkpoint is written (fsync'd)
// on two processes, or that it failed.
func (c *checkpointer) maybeDone() {
	c.mu.Lock()
	k, failed := c.k, c.failed
	done := k != 0 && (failed || len(c.written) == c.expect && c.stored == c.expect)
	pieces := c.written
	if done {
		c.k = 0
	}
	c.mu.Unlock()
	if !done {
		return
	}
	payload, _ := json.Marshal(pieces)
	c.send(0, ckptMsg{phase: ckptDone, k: k, failed: failed}, payload)
}

// copyBuffer returns the buffer a partner copy of n bytes (a ckptPiece's payload) lands in:
// the smallest spare one that is large enough, else a new one. It runs on a connection's
// reader.
func (c *checkpointer) copyBuffer(n uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := -1
	for i, b := range c.spare {
		if uint64(cap(b)) >= n && (best < 0 || cap(b) < cap(c.spare[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]byte, n)
	}
	b := c.spare[best]
	c.spare = slices.Delete(c.spare, best, best+1)
	return b[:n]
}

// send sends m to rank to, or hands it to this process's own handler.
func (c *checkpointer) send(to int, m ckptMsg, payload []byte) {
	if to == c.j.rank {
		c.handle(to, m, payload)
		return
	}
	c.j.mesh.Send(to, transport.Requester, m.header(), payload) // a failure fails the job
}

// handle runs a checkpoint message of process from. It never blocks: it runs on a
// connection's reader.
func (c *checkpointer) handle(from int, m ckptMsg, payload []byte) {
	switch m.phase {
	case ckptPrepare:
		bound := c.entered.Load() + c.holdSlack()
		c.hold.Store(bound)
		bound = max(bound, c.entered.Load()) // a task that entered meanwhile saw no hold
		c.send(0, ckptMsg{phase: ckptReport, bound: bound, minIter: c.minIter.Load(), busy: c.held.Load() > 0}, nil)
	case ckptArm:
		c.arm(m.k)
		c.send(0, ckptMsg{phase: ckptArmed, k: m.k}, nil)
	case ckptGo:
		if c.waited.Swap(false) { // let the tasks run further during the next exchanges
			c.slack.Store(min(2*c.slack.Load(), maxSlack))
		}
		c.window = max(time.Since(c.prepared), c.window*3/4) // forgets a slow one gently
		c.hold.Store(math.MaxInt64)
		c.mu.Lock()
		close(c.lifted)
		c.lifted = make(chan struct{})
		copied := m.k != 0 && c.owing == 0
		if m.k != 0 && !copied {
			c.copiedDue = m.k
		}
		c.mu.Unlock()
		if copied {
			c.send(0, ckptMsg{phase: ckptCopied, k: m.k}, nil)
		}
	case ckptWrite:
		c.released.Store(int64(m.k))
		c.mu.Lock()
		empty := m.k == c.k && c.expect == 0
		c.mu.Unlock()
		if empty { // no piece here: done at once
			c.maybeDone()
		}
		c.nudge()
	case ckptPiece:
		if int(m.loc) >= c.j.tasks*len(c.j.names) {
			c.j.fail(fmt.Errorf("orwl: checkpoint piece from rank %d for location %d, which does not exist", from, m.loc))
			return
		}
		key, data, err := pieceKey(m, payload, c.j.locationAt)
		if err != nil {
			c.j.fail(fmt.Errorf("orwl: rank %d: %w", from, err))
			return
		}
		c.push(func() { c.writePiece(pieceJob{k: m.k, key: key, data: data, from: from, buf: payload}) })
	case ckptStored:
		c.held.Add(-1) // the partner is done with the piece, whatever its checkpoint
		c.mu.Lock()
		if m.k == c.k { // not a late answer about a checkpoint already given up
			c.stored++
			c.failed = c.failed || m.failed
		}
		c.mu.Unlock()
		c.maybeDone()
	case ckptCommit:
		var pieces []checkpoint.PieceInfo
		err := json.Unmarshal(payload, &pieces)
		took := time.Since(c.armedAt) // rank 0 runs its own messages at once, in coordinate
		c.push(func() {
			if err == nil {
				err = c.store.Commit(m.k, pieces)
			}
			if err != nil {
				c.warn(m.k, err)
			} else if c.j.rank == 0 {
				c.j.log.Info("orwl: checkpoint complete", "iteration", m.k, "seconds", took.Seconds())
			}
		})
	case ckptDiscard:
		c.push(func() { c.store.Discard(m.k) })
	case ckptWarn:
		c.report(from, m, string(payload))
	case ckptIterated:
		c.iterated.Store(true)
	case ckptInventory, ckptPlan, ckptPart:
		c.restartMessage(from, m, payload)
	default: // answers to rank 0
		r := ckptReply{from: from, phase: m.phase, bound: m.bound, minIt: m.minIter, failed: m.failed, busy: m.busy}
		if m.phase == ckptDone {
			json.Unmarshal(payload, &r.pieces)
		}
		select {
		case c.replies <- r:
		default:
			c.j.fail(fmt.Errorf("orwl: checkpoint: rank %d answered out of turn", from))
		}
	}
}

// arm arms this process's locations and tasks for checkpoint k.
func (c *checkpointer) arm(k int) {
	expect := 0
	for _, t := range c.j.local {
		expect += len(t.kept)
	}
	for _, l := range c.j.owned {
		if l != nil {
			expect++
		}
	}
	c.held.Add(int64(expect)) // zero before: rank 0 skips a checkpoint while it is not
	c.mu.Lock()
	c.k, c.expect, c.written, c.stored, c.failed = k, expect, nil, 0, false
	// A task leaving Iterate now pays under c.mu after this (Task.paid). One that owes a
	// copy already pays both at once.
	for _, t := range c.j.local {
		if len(t.kept) > 0 && t.iterating.Load() && !t.owes {
			c.owing++
			t.owes = true
		}
	}
	c.mu.Unlock()
	c.armed.Store(int64(k))
	for _, l := range c.j.owned {
		if l != nil {
			l.arm(k)
		}
	}
}

// coordinate is rank 0's part: a checkpoint every c.every until ctx is done.
func (c *checkpointer) coordinate(ctx context.Context) {
	tick.Every(ctx, c.every, func() bool { return c.take(ctx) })
}

// take takes one checkpoint; it returns false when ctx ended first.
func (c *checkpointer) take(ctx context.Context) bool {
	reports, ok := c.exchange(ctx, ckptMsg{phase: ckptPrepare}, ckptReport)
	if !ok {
		return false
	}
	var busy []int
	for _, r := range reports {
		if r.busy {
			busy = append(busy, r.from)
		}
	}
	if len(busy) > 0 {
		slices.Sort(busy)
		c.j.log.Debug(fmt.Sprintf("orwl: checkpoint skipped: ranks %v still write pieces of an earlier checkpoint (a slow disk, or one that failed)", busy))
	}
	k, ok := nextCheckpoint(reports, c.start())
	if !ok || len(busy) > 0 {
		c.broadcast(ckptMsg{phase: ckptGo}, nil)
		return true
	}
	c.armedAt = time.Now()
	if _, ok := c.exchange(ctx, ckptMsg{phase: ckptArm, k: int(k)}, ckptArmed); !ok {
		return false
	}
	c.broadcast(ckptMsg{phase: ckptGo, k: int(k)}, nil)
	if _, ok := c.gather(ctx, ckptCopied); !ok {
		return false
	}
	c.broadcast(ckptMsg{phase: ckptWrite, k: int(k)}, nil)
	done, ok := c.gather(ctx, ckptDone)
	if !ok {
		return false
	}
	var pieces []checkpoint.PieceInfo
	for _, r := range done {
		if r.failed {
			c.broadcast(ckptMsg{phase: ckptDiscard, k: int(k)}, nil)
			return true
		}
		pieces = append(pieces, r.pieces...)
	}
	payload, _ := json.Marshal(pieces)
	c.broadcast(ckptMsg{phase: ckptCommit, k: int(k)}, payload)
	return true
}

// nextCheckpoint returns the number of the checkpoint the processes' reports allow: one past
// the iteration after the highest any task may enter, and never one at or below start, the
// checkpoint the job resumed from (a Store removes its checkpoints numbered as high or higher
// at the first write of a number). ok is false when the job ends first, or iterates without
// Iterate.
func nextCheckpoint(reports []ckptReply, start int) (k int64, ok bool) {
	bound, minIter := int64(-1), int64(math.MaxInt64)
	for _, r := range reports {
		bound, minIter = max(bound, r.bound), min(minIter, r.minIt)
	}
	k = max(bound+2, int64(start)+1)
	return k, k < minIter && minIter != math.MaxInt64
}

// exchange sends m to every process and gathers their answers of phase want.
func (c *checkpointer) exchange(ctx context.Context, m ckptMsg, want uint8) ([]ckptReply, bool) {
	c.broadcast(m, nil)
	return c.gather(ctx, want)
}

// broadcast sends m to every process, this one included.
func (c *checkpointer) broadcast(m ckptMsg, payload []byte) {
	for r := range c.j.procs {
		c.send(r, m, payload)
	}
}

// gather waits for the answer of phase want of every process.
func (c *checkpointer) gather(ctx context.Context, want uint8) ([]ckptReply, bool) {
	var got []ckptReply
	for len(got) < c.j.procs {
		select {
		case <-ctx.Done():
			return nil, false
		case r := <-c.replies:
			if r.phase != want {
				c.j.fail(fmt.Errorf("orwl: checkpoint: rank %d answered %d, expected %d", r.from, r.phase, want))
				return nil, false
			}
			got = append(got, r)
		}
	}
	return got, true
}

// Keep registers state, memory of the task's own that it keeps across iterations, as part
// of the task's checkpoints: it is copied when the task enters a checkpoint's iteration and
// restored before Schedule returns when the job restarts. name tells the task's states
// apart. It belongs to the init phase and does nothing in a job without checkpoints.
func (t *Task) Keep(name string, state []byte) {
	switch {
	case t.scheduled:
		t.complain(fmt.Errorf("task %d: Keep(%q) after Schedule", t.id, name))
		return
	case name == "":
		t.complain(fmt.Errorf("task %d: Keep with an empty name", t.id))
		return
	}
	for _, s := range t.kept {
		if s.name == name {
			t.complain(fmt.Errorf("task %d: Keep(%q) twice", t.id, name))
			return
		}
	}
	t.kept = append(t.kept, keptState{name: name, buf: state})
}

// Iterate runs body for iterations 0 to n-1 of the task, in order, and returns the first
// error. Every iteration must acquire each of the task's iterative handles once, as the
// schedule's discipline has it, so that the k-th round of every location is its iteration
// k; handles used in turn, one every S iterations, belong in one iteration of S steps.
// Iterate checks it as each iteration begins, in every job, and fails naming the handle and
// the iteration that acquired it another number of times (nothing follows the last
// iteration: it may leave handles out).
//
// In a job that takes checkpoints (Config.Checkpoint), a restarted job resumes at the
// iteration k of its checkpoint (Resumed), with its locations and kept states as they were
// then; a checkpoint of iteration n or later belongs to a longer run, and Iterate fails.
// Body's iterations are where checkpoints are taken: a task may wait at the start of one for
// a checkpoint being prepared (a few messages), and copies its kept states at the start of
// a checkpoint's iteration.
func (t *Task) Iterate(ctx context.Context, n int, body func(iter int) error) error {
	c := t.job.ckpt
	start := c.start()
	if start > 0 && start >= n {
		return fmt.Errorf("orwl: task %d: the job resumed from the checkpoint of iteration %d, and Iterate's last iteration is %d (n = %d): the checkpoints in %s belong to a longer run; give this run another directory (Config.Checkpoint.Dir, ORWL_CHECKPOINT_DIR), and declare the iteration count in Config.Checkpoint.Params so that a run of another length refuses them",
			t.id, start, n-1, n, c.store.Dir())
	}
	if c != nil {
		for {
			m := c.minIter.Load()
			if int64(n) >= m || c.minIter.CompareAndSwap(m, int64(n)) {
				break
			}
		}
		t.iterating.Store(true)
		defer func() {
			t.iterating.Store(false)
			t.paid()
		}()
	}
	base := make([]int, len(t.iterative)) // their acquires before the first iteration
	for i, h := range t.iterative {
		base[i] = h.Acquires()
	}
	for iter := start; iter < n; iter++ {
		if iter > start {
			if err := t.checkRounds(base, iter-start); err != nil {
				return err
			}
		}
		if c != nil {
			if err := c.enter(ctx, t, iter); err != nil {
				return err
			}
		}
		if err := body(iter); err != nil {
			return err
		}
	}
	return nil
}

// checkRounds reports an iterative handle of t that was not acquired once in each of the
// done iterations of Iterate, given its acquires before them (base, in the order of
// t.iterative); every iteration is checked as the next begins, so it is the last one that
// did not. The rounds of the handle's location would no longer be iterations: its other
// handles would see the accesses of other iterations, and no checkpoint would be
// consistent, nor complete.
func (t *Task) checkRounds(base []int, done int) error {
	for i, h := range t.iterative {
		if got := h.Acquires() - base[i]; got != done {
			s := h.Spec()
			return fmt.Errorf("orwl: task %d: iteration %d of Iterate acquired the iterative handle on %s (position %d) %d times: every iteration must acquire each iterative handle of the task once, or the rounds of its location no longer follow the iterations (group the iterations of handles used in turn into one)",
				t.id, t.job.ckpt.start()+done-1, s.Location, s.Pos, got-done+1)
		}
	}
	return nil
}

// paid records that t no longer owes a copy of its kept states to the armed checkpoint: it
// made it, or it left Iterate. The last of the process's tasks to pay after the go sends
// the process's ckptCopied.
func (t *Task) paid() {
	c := t.job.ckpt
	c.mu.Lock()
	k := 0
	if t.owes {
		t.owes = false
		if c.owing--; c.owing == 0 {
			k, c.copiedDue = c.copiedDue, 0
		}
	}
	c.mu.Unlock()
	if k != 0 {
		c.send(0, ckptMsg{phase: ckptCopied, k: k}, nil)
	}
}

// CheckpointHold returns how many checkpoints the task entered in Iterate (copying its kept
// states), and the time checkpoints held it up there: waiting at the start of an iteration
// for a checkpoint being prepared, and copying its kept states. A location's copy, taken
// under its lock when its round is granted, is not in it. It is meant for the task itself
// (it is not safe to call from another goroutine while the task iterates).
func (t *Task) CheckpointHold() (checkpoints int, held time.Duration) {
	return t.ckptEntered, t.ckptHeld
}

// Resumed returns the iteration at which the job restarted from a checkpoint, 0 for a job
// that started afresh. It is known from the start of the task, init phase included. A
// resumed job's locations hold the checkpoint's data when Schedule returns: its
// initialisation, and the one-shot write handles declared for it, belong to a fresh start
// only (if t.Resumed() == 0 { ... }). Schedule refuses a one-shot write declared in the
// init phase (WriteInsertOnce) on a location that iterative handles use, in a resumed job:
// it would replace the restored data with an initial value.
func (t *Task) Resumed() int { return t.job.ckpt.start() }

// refuseInitialWrites reports, in a job resumed from a checkpoint, the one-shot writes
// declared in the init phase (WriteInsertOnce) on this process's locations that iterative
// handles use: the schedule would place them among the requests of the checkpoint's round,
// and they would replace the restored data, mid-iteration, with initial values. It runs at
// the schedule, once every initial request of the job is with its owner.
func (c *checkpointer) refuseInitialWrites() error {
	k := c.start()
	if k == 0 {
		return nil
	}
	var errs []error
	for _, l := range c.j.owned {
		if l == nil {
			continue
		}
		l.mu.Lock()
		var writes []pendingRequest
		for _, p := range l.pending {
			if l.rounds && p.initial && p.mode == fifo.Write && p.req.Tag.(queued).round() < 0 {
				writes = append(writes, p)
			}
		}
		l.mu.Unlock()
		slices.SortFunc(writes, func(a, b pendingRequest) int { return cmp.Or(a.task-b.task, a.pos-b.pos) })
		for _, p := range writes {
			errs = append(errs, fmt.Errorf("orwl: task %d: WriteInsertOnce on %s at position %d in a job resumed from the checkpoint of iteration %d: the location's data is restored from the checkpoint and iterative handles use it, so this write would replace the data of iteration %d with an initial value; declare initialisation handles, and run their sections, only on a fresh start (if t.Resumed() == 0 { ... })",
				p.task, l.id, p.pos, k, k))
		}
	}
	return errors.Join(errs...)
}
