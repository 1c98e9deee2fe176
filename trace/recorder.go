// Package trace records what an ORWL job did — requests, grants, acquire
// waits, critical sections, releases, data transfers and the schedule barrier
// — and turns it into something a person can look at: Chrome trace event JSON
// (opens in Perfetto UI and chrome://tracing), a short text summary, and
// (package gantt) an SVG Gantt chart.
//
// # Recording
//
// Each process owns one [Recorder] (see [New]). The runtime obtains a [Track]
// per task once (see [Recorder.TaskTrack]) and a [FIFO] per owned location
// (see [Recorder.FIFO]), keeps the pointers, and calls their methods on the hot
// path. Recording an event is an uncontended per-track lock, a monotonic clock
// read and an append of 56 pointer-free bytes into a chunked buffer: well
// under 100 ns even on a slow shared VM (BenchmarkRecord), so tracing can be
// left on. Tracing off is a nil *Recorder: every method of a
// nil *Recorder, *Track, *FIFO and a zero [Span] is a valid no-op, so the cost
// of "off" is one nil check.
//
// Timestamps are monotonic nanoseconds since the recorder was created. Each
// process also remembers its wall-clock start and a clock offset to rank 0
// ([Recorder.SetClockOffset]); [Merge] uses both to put the parts of all
// processes on one time line.
//
// # Flows
//
// A release causes grants, possibly in another process. [Track.Release]
// returns a [FlowID], unique across the job (rank<<40 | sequence); the runtime
// carries it with the grant (across the wire for a remote grant) and passes
// it to [Track.Grant], which draws the arrow from the release to the grant.
//
// # Events
//
// On a task track: "request" (instant; args loc, owner, mode, pos), "grant"
// and "release" (zero-length spans, so flow arrows bind to them), "wait"
// (span; loc, owner, mode, pos), sections (span named after the location,
// category "section", so that viewers colour them by location), and free
// spans and instants. On a transfer lane: "transfer in"/"transfer out"
// (span; loc, owner, dir, peer, bytes). On a FIFO track: "request", "grant",
// "release", "cancel" (instants; task, mode, pos). On the process track: the
// barrier span. Flow arrows are 's'/'f' events named "grant", category
// "flow".
//
// # Output
//
// Each process serialises its part ([Recorder.Part] or [Recorder.WritePart]);
// rank 0 merges the parts ([Merge]) and writes one trace ([Trace.WriteJSON]).
// A single-process job can use [Recorder.Trace] directly. In the JSON, pid is
// the process rank and tid is a track, unique across the job: tid = task id
// for a task track, TransferTidBase+task*Lanes+k for its k-th transfer lane,
// FIFOTidBase+owner*256+n for the FIFO of the n-th location of an owner task
// seen by the recorder, and ProcessTidBase+rank for the process track
// (schedule barrier).
//
// # Reading
//
// [Parse] and [Merge] read traces back. [NewTimeline] sorts a trace into one
// row per task (sections, waits, transfers) with the processes' barriers: it
// is the view that [Summarize] prints where time went from, that
// [github.com/orwl-go/orwl/trace/gantt.Render] draws a Gantt chart from, and
// that other views of a trace can be made from.
//
// # What it must not do
//
// This package imports no other package of this module but fifo, whose Mode
// (read or write) is the one access mode of the whole module, and its own
// internal/units, which prints figures as package gantt does: the ORWL runtime
// depends on it, never the reverse. It does no I/O of its own except
// into the writers it is given, starts no goroutines, and never blocks a task
// beyond the per-track lock of the event it records.
package trace

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/fifo"
)

// modeName is the name of an event's mode in the JSON: "read", "write", or "" for an event
// without one (a transfer).
func modeName(m fifo.Mode) string {
	if m == 0 {
		return ""
	}
	return m.String()
}

// Dir is the direction of a data transfer, seen from the process that records
// it.
type Dir uint8

// Transfer directions.
const (
	In  Dir = 1 // data arrived in this process (a grant's payload, a write-back received)
	Out Dir = 2 // data left this process
)

// String returns "in", "out", or "" for an unknown direction.
func (d Dir) String() string {
	switch d {
	case In:
		return "in"
	case Out:
		return "out"
	}
	return ""
}

// Loc names a location: the Name location of task Task. It has the same
// fields as orwl.Location, so the runtime converts with trace.Loc(l).
type Loc struct {
	Task int
	Name string
}

// String returns "name@task", the form used in traces and summaries.
func (l Loc) String() string { return l.Name + "@" + strconv.Itoa(l.Task) }

// FlowID identifies one arrow from a release to a grant. It is unique across
// the job: the rank of the process that created it in bits 40..55 and a
// per-process sequence number (starting at 1) in bits 0..39. Zero means "no
// flow".
type FlowID uint64

// Track id ranges (the tid of Chrome trace events). Task tracks use tid = task
// id, which must be below TransferTidBase.
const (
	TransferTidBase = 1 << 20 // tid of task t's k-th transfer lane: TransferTidBase + t*Lanes + k
	FIFOTidBase     = 1 << 22 // tid of location FIFO tracks: FIFOTidBase + owner*256 + n
	ProcessTidBase  = 1 << 30 // tid of a process's own track: ProcessTidBase + rank

	// Lanes is the number of transfer lanes of a task: transfers of one
	// task that overlap in time go to different lanes, so that spans on
	// every track nest. Past Lanes concurrent transfers, the last lane is
	// shared (and its spans may overlap).
	Lanes = 4
)

// Event kinds stored in a track.
const (
	kRequest uint8 = iota + 1
	kGrant
	kWait
	kSection
	kRelease
	kTransfer
	kFlowOut
	kFlowIn
	kSpan
	kInstant
	kBarrier
	kFIFORequest
	kFIFOGrant
	kFIFORelease
	kFIFOCancel
)

// rec is one recorded event, 56 bytes without pointers: chunks of them are
// not scanned by the garbage collector and appending needs no write barrier.
type rec struct {
	ts, dur int64
	flow    FlowID
	bytes   int64
	name    uint32 // interned location name, or name of a generic span/instant
	a, b, c int32  // owner task or requesting task; position; peer
	kind    uint8
	mode    fifo.Mode
	dir     Dir
}

const chunkSize = 1024

// Recorder collects the trace events of one process. Create it with [New]
// before the tasks start. All its methods are safe for concurrent use, and
// all are no-ops on a nil *Recorder (tracing off).
type Recorder struct {
	rank      int
	start     time.Time // carries a monotonic reading
	startUnix int64
	offset    atomic.Int64
	flowSeq   atomic.Uint64
	limit     atomic.Int64

	mu     sync.Mutex
	name   string
	tasks  map[int]*Track
	fifos  map[Loc]*FIFO
	nfifo  map[int]int
	proc   *Track
	tracks []*Track // in creation order
	names  []string // interned names; names[0] == ""
	nameID map[string]uint32
}

// New returns a recorder for the process of the given rank, with its clock
// started now. Tracks are created on demand.
func New(rank int) *Recorder {
	now := time.Now()
	return &Recorder{
		rank:      rank,
		start:     now,
		startUnix: now.UnixNano(),
		name:      "rank " + strconv.Itoa(rank),
		tasks:     make(map[int]*Track),
		fifos:     make(map[Loc]*FIFO),
		nfifo:     make(map[int]int),
		names:     []string{""},
		nameID:    map[string]uint32{"": 0},
	}
}

// intern returns the id of a name, adding it to the recorder's table.
func (r *Recorder) intern(name string) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.nameID[name]
	if !ok {
		id = uint32(len(r.names))
		r.names = append(r.names, name)
		r.nameID[name] = id
	}
	return id
}

// Rank returns the rank given to [New], or -1 for a nil recorder.
func (r *Recorder) Rank() int {
	if r == nil {
		return -1
	}
	return r.rank
}

// Now returns the recorder's clock: monotonic nanoseconds since [New]. It is
// 0 for a nil recorder. Use it to take timestamps for [Track.GrantAt].
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return int64(time.Since(r.start))
}

// SetClockOffset records how far rank 0's wall clock is ahead of this
// process's wall clock (rank 0's time.Now() minus this process's time.Now()
// at the same instant), as measured by the distributed runtime at start.
// It is 0 on rank 0 and may stay 0 when all processes share one host.
// [Merge] adds it to this process's timestamps.
func (r *Recorder) SetClockOffset(d time.Duration) {
	if r == nil {
		return
	}
	r.offset.Store(int64(d))
}

// SetProcessName sets the name shown for this process (default "rank N"),
// for example "rank 1 (node7)".
func (r *Recorder) SetProcessName(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.name = name
	r.mu.Unlock()
}

// SetEventLimit caps the number of events kept per track for tracks created
// after the call; further events are counted as dropped. n <= 0 means no cap
// (the default).
func (r *Recorder) SetEventLimit(n int) {
	if r == nil {
		return
	}
	r.limit.Store(int64(n))
}

// NewFlowID returns a flow id unique across the job (see [FlowID]), or 0 for
// a nil recorder. Use it with [Track.FlowOut] and [Track.FlowIn] when
// [Track.Release] and [Track.Grant] do not fit.
func (r *Recorder) NewFlowID() FlowID {
	if r == nil {
		return 0
	}
	return FlowID(uint64(r.rank)&0xffff<<40 | r.flowSeq.Add(1)&(1<<40-1))
}

func (r *Recorder) newTrack(tid, sort, task int, name string) *Track {
	t := &Track{r: r, tid: tid, sort: sort, task: task, name: name, limit: int(r.limit.Load())}
	r.tracks = append(r.tracks, t)
	return t
}

// TaskTrack returns the track of a task (task >= 0 and below
// TransferTidBase), creating it on first use; later calls return the same
// *Track. The lookup takes the recorder's lock: call it once per task and
// keep the pointer. It returns nil for a nil recorder.
func (r *Recorder) TaskTrack(task int) *Track {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tasks[task]
	if t == nil {
		t = r.newTrack(task, 2*task, task, "task "+strconv.Itoa(task))
		r.tasks[task] = t
	}
	return t
}

func (r *Recorder) transferLane(owner *Track, k int) *Track {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x := owner.lanes[k].Load(); x != nil {
		return x
	}
	name := "task " + strconv.Itoa(owner.task) + " transfers"
	if k > 0 {
		name += " " + strconv.Itoa(k+1)
	}
	x := r.newTrack(TransferTidBase+owner.task*Lanes+k, 2*owner.task+1, owner.task, name)
	x.owner, x.lane = owner, k
	owner.lanes[k].Store(x)
	return x
}

// FIFO returns the track of the FIFO of location l (a location this process
// owns), creating it on first use; later calls return the same *FIFO. Call it
// once per location and keep the pointer. It returns nil for a nil recorder.
func (r *Recorder) FIFO(l Loc) *FIFO {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fifos[l]
	if f == nil {
		n := r.nfifo[l.Task]
		r.nfifo[l.Task] = n + 1
		tid := FIFOTidBase + l.Task*256 + n%256
		f = &FIFO{t: r.newTrack(tid, tid, l.Task, "fifo "+l.String())}
		r.fifos[l] = f
	}
	return f
}

func (r *Recorder) procTrack() *Track {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		r.proc = r.newTrack(ProcessTidBase+r.rank, -1, -1, "process")
	}
	return r.proc
}

// BeginBarrier starts a span on the process's own track for a job-wide
// barrier (name is typically "schedule"); End the returned span when the
// barrier returns. A nil recorder returns a zero Span.
func (r *Recorder) BeginBarrier(name string) Span {
	if r == nil {
		return Span{}
	}
	t := r.procTrack()
	return Span{t: t, start: t.now(), kind: kBarrier, name: name}
}

// Track is the event buffer of one task (or of one of its transfer lanes, a
// FIFO, or the process). Its methods are safe for concurrent use; they are
// meant to be called mostly by the goroutine of its task, so its lock is
// uncontended. All methods are no-ops on a nil *Track.
//
// Locations are given as [Loc]; mode is [Read] or [Write]; pos is the FIFO
// position of the request as the runtime knows it (the declared position of
// an initial request).
//
// The hot methods are split in two: the exported one only checks for nil and
// is small enough to be inlined, so that tracing off costs the caller one nil
// check and no call; its unexported xxxSlow half does the recording.
type Track struct {
	r     *Recorder
	tid   int
	sort  int
	task  int
	name  string
	limit int
	lanes [Lanes]atomic.Pointer[Track] // transfer lanes of a task track
	busy  atomic.Uint32                // bit k: lane k holds an open transfer
	owner *Track                       // of a transfer lane
	lane  int                          // of a transfer lane

	mu      sync.Mutex
	full    [][]rec
	cur     []rec
	dropped int64
	cache   [8]nameCache // recently used names, so that add rarely interns
	ncache  int
}

type nameCache struct {
	s  string
	id uint32
}

func (t *Track) now() int64 { return int64(time.Since(t.r.start)) }

func (t *Track) add(e rec, name string) {
	t.mu.Lock()
	if t.limit > 0 && t.n() >= t.limit {
		t.dropped++
		t.mu.Unlock()
		return
	}
	if name != "" {
		e.name = t.nameID(name)
	}
	if len(t.cur) == cap(t.cur) {
		if t.cur != nil {
			t.full = append(t.full, t.cur)
		}
		t.cur = make([]rec, 0, chunkSize)
	}
	t.cur = append(t.cur, e)
	t.mu.Unlock()
}

// nameID looks a name up in the track's small cache (a task uses few
// location names), then in the recorder's table. Called under t.mu.
func (t *Track) nameID(name string) uint32 {
	for i := 0; i < t.ncache; i++ {
		if t.cache[i].s == name {
			return t.cache[i].id
		}
	}
	id := t.r.intern(name)
	if t.ncache < len(t.cache) {
		t.cache[t.ncache] = nameCache{name, id}
		t.ncache++
	} else {
		copy(t.cache[1:], t.cache[:len(t.cache)-1])
		t.cache[0] = nameCache{name, id}
	}
	return id
}

func (t *Track) n() int { return len(t.full)*chunkSize + len(t.cur) }

// Now returns the recorder's clock (see [Recorder.Now]); 0 on a nil Track.
func (t *Track) Now() int64 {
	if t == nil {
		return 0
	}
	return t.now()
}

// Request records, as an instant, that the task placed a request on l in
// mode m at FIFO position pos.
func (t *Track) Request(l Loc, m fifo.Mode, pos int) {
	if t == nil {
		return
	}
	t.requestSlow(l, m, pos)
}

func (t *Track) requestSlow(l Loc, m fifo.Mode, pos int) {
	t.add(rec{ts: t.now(), a: int32(l.Task), b: int32(pos), kind: kRequest, mode: m}, l.Name)
}

// Grant records, as a zero-length span now, that the task's request on l was
// granted, and ends the flow arrow from the release that caused it when from
// is not 0 (the id that [Track.Release] returned, carried by the runtime,
// across the wire for a remote grant). It may be called from any goroutine.
func (t *Track) Grant(l Loc, m fifo.Mode, from FlowID) {
	if t == nil {
		return
	}
	t.grantSlow(l, m, from)
}

func (t *Track) grantSlow(l Loc, m fifo.Mode, from FlowID) {
	t.grantAtSlow(t.now(), l, m, from)
}

// GrantAt is [Track.Grant] at time ts of the recorder's clock (from
// [Recorder.Now] or [Track.Now]), for a runtime that stamps the grant where
// it happens and records it later, for example when the task acquires.
func (t *Track) GrantAt(ts int64, l Loc, m fifo.Mode, from FlowID) {
	if t == nil {
		return
	}
	t.grantAtSlow(ts, l, m, from)
}

func (t *Track) grantAtSlow(ts int64, l Loc, m fifo.Mode, from FlowID) {
	t.add(rec{ts: ts, flow: from, a: int32(l.Task), kind: kGrant, mode: m}, l.Name)
}

// Release records, as a zero-length span, that the task released its access
// to l, starts a flow arrow, and returns the flow's id for the runtime to
// carry to the grant(s) this release causes (every member of a read group it
// grants gets its own arrow). Call it before the FIFO grants the next entry,
// so that no arrow points back in time. It returns 0 on a nil Track.
func (t *Track) Release(l Loc, m fifo.Mode) FlowID {
	if t == nil {
		return 0
	}
	return t.releaseSlow(l, m)
}

func (t *Track) releaseSlow(l Loc, m fifo.Mode) FlowID {
	id := t.r.NewFlowID()
	t.add(rec{ts: t.now(), flow: id, a: int32(l.Task), kind: kRelease, mode: m}, l.Name)
	return id
}

// FlowOut starts the flow arrow id (from [Recorder.NewFlowID]) at a
// zero-length marker on this track now. Zero id records nothing.
func (t *Track) FlowOut(id FlowID) {
	if t == nil || id == 0 {
		return
	}
	t.add(rec{ts: t.now(), flow: id, kind: kFlowOut}, "")
}

// FlowIn ends the flow arrow id at a zero-length marker on this track now.
// Zero id records nothing.
func (t *Track) FlowIn(id FlowID) {
	if t == nil || id == 0 {
		return
	}
	t.add(rec{ts: t.now(), flow: id, kind: kFlowIn}, "")
}

// BeginWait starts an acquire wait on l in mode m for the request at FIFO
// position pos; End the returned span when acquire returns.
func (t *Track) BeginWait(l Loc, m fifo.Mode, pos int) Span {
	if t == nil {
		return Span{}
	}
	return t.beginWaitSlow(l, m, pos)
}

func (t *Track) beginWaitSlow(l Loc, m fifo.Mode, pos int) Span {
	return Span{t: t, start: t.now(), kind: kWait, name: l.Name, a: int32(l.Task), b: int32(pos), mode: m}
}

// BeginSection starts a critical section on l in mode m (the time the task
// holds l and computes); End the returned span before releasing. The
// section's name in the trace is the location name, so viewers colour it by
// location.
func (t *Track) BeginSection(l Loc, m fifo.Mode) Span {
	if t == nil {
		return Span{}
	}
	return t.beginSectionSlow(l, m)
}

func (t *Track) beginSectionSlow(l Loc, m fifo.Mode) Span {
	return Span{t: t, start: t.now(), kind: kSection, name: l.Name, a: int32(l.Task), mode: m}
}

// BeginTransfer starts a transfer of bytes bytes of location l's data to or
// from process peer. It is recorded on one of the task's transfer lanes
// (tracks next to the task's, since transfers overlap the task's own spans;
// concurrent transfers take different lanes); End the returned span exactly
// once when the data has been sent or received. It may be called from any
// goroutine (typically the transport's).
func (t *Track) BeginTransfer(l Loc, d Dir, peer int, bytes int64) Span {
	if t == nil {
		return Span{}
	}
	return t.beginTransferSlow(l, d, peer, bytes)
}

func (t *Track) beginTransferSlow(l Loc, d Dir, peer int, bytes int64) Span {
	k := Lanes - 1
	for {
		b := t.busy.Load()
		free := 0
		for free < Lanes && b&(1<<free) != 0 {
			free++
		}
		if free == Lanes {
			break // all busy: share the last lane
		}
		if t.busy.CompareAndSwap(b, b|1<<free) {
			k = free
			break
		}
	}
	x := t.lanes[k].Load()
	if x == nil {
		x = t.r.transferLane(t, k)
	}
	return Span{t: x, start: t.now(), kind: kTransfer, name: l.Name, a: int32(l.Task), c: int32(peer), bytes: bytes, dir: d}
}

// BeginSpan starts a span with a free name (category "span") on this track,
// for runtime phases such as "init" or "finish". Spans on one track must
// nest.
func (t *Track) BeginSpan(name string) Span {
	if t == nil {
		return Span{}
	}
	return Span{t: t, start: t.now(), kind: kSpan, name: name}
}

// Instant records an instant with a free name (category "instant").
func (t *Track) Instant(name string) {
	if t == nil {
		return
	}
	t.add(rec{ts: t.now(), kind: kInstant}, name)
}

// Span is an open span returned by a Begin method. It is a small value: keep
// it on the stack and call End once. The zero Span (tracing off) does
// nothing.
type Span struct {
	t       *Track
	start   int64
	bytes   int64
	name    string
	a, b, c int32
	kind    uint8
	mode    fifo.Mode
	dir     Dir
}

// End records the span from its Begin to now. Calling End on the zero Span
// does nothing; calling it twice records the span twice.
func (s Span) End() {
	if s.t == nil {
		return
	}
	s.end()
}

func (s *Span) end() {
	now := s.t.now()
	s.t.add(rec{ts: s.start, dur: now - s.start, bytes: s.bytes, a: s.a, b: s.b, c: s.c, kind: s.kind, mode: s.mode, dir: s.dir}, s.name)
	if s.kind == kTransfer && s.t.owner != nil {
		s.t.owner.busy.And(^uint32(1 << s.t.lane)) // a shared last lane may clear early: harmless
	}
}

// FIFO is the track of one location's FIFO: its entries as instants. Its
// methods are safe for concurrent use and are no-ops on a nil *FIFO.
type FIFO struct{ t *Track }

// Request records that task placed a request in mode m at position pos.
func (f *FIFO) Request(task int, m fifo.Mode, pos int) { f.event(kFIFORequest, task, m, pos) }

// Grant records that task's entry (mode m) reached the head and was granted.
func (f *FIFO) Grant(task int, m fifo.Mode) { f.event(kFIFOGrant, task, m, 0) }

// Release records that task released its access (mode m).
func (f *FIFO) Release(task int, m fifo.Mode) { f.event(kFIFORelease, task, m, 0) }

// Cancel records that task's pending request (mode m) was cancelled.
func (f *FIFO) Cancel(task int, m fifo.Mode) { f.event(kFIFOCancel, task, m, 0) }

// event records one FIFO event as an instant; a nil FIFO records nothing, at the cost of a
// comparison where it is inlined (record is not).
func (f *FIFO) event(kind uint8, task int, m fifo.Mode, pos int) {
	if f != nil {
		f.record(kind, task, m, pos)
	}
}

// record adds one FIFO event to f's track.
func (f *FIFO) record(kind uint8, task int, m fifo.Mode, pos int) {
	f.t.add(rec{ts: f.t.now(), a: int32(task), b: int32(pos), kind: kind, mode: m}, "")
}

// snapshot copies a track's events under its lock.
func (t *Track) snapshot() ([]rec, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]rec, 0, t.n())
	for _, c := range t.full {
		out = append(out, c...)
	}
	out = append(out, t.cur...)
	return out, t.dropped
}
