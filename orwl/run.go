package orwl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/internal/jobenv"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// Run runs the tasks of this process, each in its own goroutine, and returns when the whole
// job is done: nil, or the first error of a task, of a deadlock, of a lost process, or of
// the configuration. A task that panics fails the job with an error holding the panic's
// stack. With several processes, Run connects them first and returns on every process only
// after every task of the job has returned.
//
// In a process that a launcher started (orwlrun, mpirun, srun, a Kubernetes Job), a SIGTERM
// while Run runs fails the job as the end of ctx would: Run returns an error that names the
// signal and wraps context.Canceled, so the program's own error path runs. Run restores
// the process's handling of SIGTERM when it returns; a process that ignores SIGTERM, or
// whose job is Config.Job, keeps its own.
func Run(ctx context.Context, cfg Config, fn TaskFunc) error {
	j, err := newJob(cfg)
	if err != nil {
		return err
	}
	defer j.ckpt.close()
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	j.cancel = cancel
	sigterm := j.stopOnSIGTERM()
	defer sigterm.end(nil)
	unbind := placeOnCores(j.rank, j.info.LocalSize, j.procs, j.hostCores(), j.log)
	defer unbind()
	if j.procs > 1 {
		if err := j.connect(jobCtx); err != nil {
			return sigterm.end(err)
		}
	}
	var wg sync.WaitGroup
	if err := j.ckpt.recover(jobCtx); err != nil {
		j.fail(err) // no task starts
	} else {
		j.start(jobCtx, &wg, fn)
	}
	var watcher sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(jobCtx)
	watcher.Go(func() { j.watch(watchCtx) })
	if j.ckpt != nil {
		watcher.Go(func() { j.ckpt.write(watchCtx) })
		if j.rank == 0 {
			watcher.Go(func() { j.ckpt.coordinate(watchCtx) })
		}
	}
	wg.Wait()
	j.ckpt.ended()
	if j.node != nil {
		if j.rec != nil && j.rank != 0 {
			j.node.sendTracePart(jobCtx)
		}
		// The end is an agreement: owners serve until every task of the job is done, and
		// this process returns nil only if every process reports that it finished without
		// error. A process whose job failed tells the others and leaves. Until then the
		// deadlock watch goes on: a process whose tasks are done is part of a deadlock of
		// the others.
		if err := j.mesh.FinalBarrier(ctx, j.failure() != nil); err != nil {
			j.fail(fmt.Errorf("orwl: rank %d cannot confirm that the job succeeded: %w", j.rank, err))
		}
		j.agree()
		j.awaitReason()
	}
	stopWatch()
	watcher.Wait()
	if j.failure() == nil { // the whole job succeeded
		j.ckpt.finish()
	}
	if j.mesh != nil {
		j.mesh.Close()
	}
	if j.rec != nil && j.rank == 0 {
		if err := j.writeTrace(); err != nil {
			j.fail(err)
		}
	}
	j.freeBuffers()
	return sigterm.end(j.failure())
}

// awaitReason waits, when the job's failure only says that another process closed its
// mesh or failed (yields), for the report of why, which that process spread along the
// job's tree (node.spreadFailure) before it closed its mesh or said it failed, and which
// replaces the failure (fail): until it comes, or for a peer timeout at most.
func (j *job) awaitReason() {
	j.errMu.Lock()
	reason, wait := j.reasonLocked(), j.peerTimeout
	j.errMu.Unlock()
	if !yields(j.failure()) {
		return
	}
	if wait == 0 {
		wait = defaultPeerTimeout
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-reason:
	case <-t.C:
	}
}

// reasonLocked returns the channel that is closed once the job's failure says why; errMu
// held.
func (j *job) reasonLocked() chan struct{} {
	if j.reason == nil {
		j.reason = make(chan struct{})
	}
	return j.reason
}

// defaultPeerTimeout is the transport's peer timeout when none is set
// (transport.Config.PeerTimeout).
const defaultPeerTimeout = 3 * time.Second

// yields reports whether err only says that another process closed its mesh or failed,
// so that the report of why, when it comes, replaces it.
func yields(err error) bool {
	if p, ok := errors.AsType[*peerFailure](err); ok {
		return p.yields
	}
	return errors.Is(err, transport.ErrPeerClosed) || errors.Is(err, transport.ErrPeerFailed)
}

// start starts the tasks of this process in wg.
func (j *job) start(ctx context.Context, wg *sync.WaitGroup, fn TaskFunc) {
	for _, t := range j.local {
		wg.Go(func() { j.runTask(ctx, t, fn) })
	}
	if len(j.local) == 0 {
		// A process without tasks takes part in the schedule all the same; then it serves
		// its locations' requests until the final agreement.
		j.schedErr = j.schedule(ctx)
		close(j.scheduled)
		if j.schedErr != nil {
			j.fail(j.schedErr)
		}
	}
}

// freeBuffers frees the data of this process's locations, the mirrors of the others' and
// their spares, and the snapshot buffers of checkpoints (large ones are mapped outside the
// Go heap), once nothing can use them: every task of this process has returned, the
// checkpoints' writer too, and the mesh, whose readers fill mirrors, is closed. A checked
// job retires them instead (buffers.free): a slice kept past Run faults at every size.
func (j *job) freeBuffers() {
	for _, l := range j.owned {
		if l != nil {
			j.bufs.freeStale(&l.stale)
			j.bufs.free(l.data)
			l.data = nil
			if l.pair != nil {
				hugemem.Free(l.pair.hdrBuf)
			}
		}
	}
	for _, q := range j.queues {
		if r, ok := q.(*remoteQueue); ok {
			j.bufs.freeStale(&r.stale)
			j.bufs.free(r.mirror)
			r.mirror = nil
			if p := r.pair.Load(); p != nil {
				hugemem.Free(p.hdrBuf)
				hugemem.Free(p.data)
			}
		}
	}
	if j.node != nil {
		j.node.req.spare.free()
	}
	j.ckpt.freeSnapshots()
}

// maxLocations bounds the locations of a job (tasks times their locations): a larger job
// is a mistake that would exhaust memory before it starts.
const maxLocations = 1 << 24

// job is this process's view of the whole job.
type job struct {
	tasks   int
	names   []string
	nameIdx map[string]int
	rank    int
	procs   int
	owner   []int          // rank of the process that runs each task
	queues  []handle.Queue // every location of the job, by index (task*len(names)+name)
	owned   []*location    // the locations of this process's tasks, by index; nil elsewhere
	local   []*Task        // the tasks this process runs
	task    []*Task        // the tasks this process runs, by id (nil for the others)
	det     detector
	cancel  context.CancelCauseFunc
	log     *slog.Logger

	info         jobenv.Job    // how this process was placed, for connect
	peerTimeout  time.Duration // Config.PeerTimeout, or from the environment (0: default)
	startTimeout time.Duration
	rec          *trace.Recorder // nil when tracing is off
	traceFile    string
	summary      io.Writer // Config.TraceSummary
	mesh         *transport.Mesh
	node         *node
	ckpt         *checkpointer // nil when the job takes no checkpoints
	bufs         buffers       // allocates the data of locations and mirrors (Config.Checked)

	errMu  sync.Mutex
	err    error         // the first failure
	failed atomic.Bool   // err is set
	agreed bool          // the final agreement is over; guarded by errMu
	reason chan struct{} // closed once err says why the job failed (see yields); made by reasonLocked

	mu           sync.Mutex
	arrived      []*Task       // tasks that reached the schedule, with their requests
	pending      int           // tasks that have not reached the schedule nor returned
	scheduled    chan struct{} // closed when the schedule is done
	schedErr     error
	requestsLive atomic.Bool // the schedule is done: requests go straight to the FIFOs
}

func newJob(cfg Config) (*job, error) {
	if err := checkShape(cfg); err != nil {
		return nil, err
	}
	info, err := discover(cfg.Job)
	if err != nil {
		return nil, err
	}
	j := &job{
		tasks:     cfg.Tasks,
		names:     slices.Clone(cfg.Locations),
		nameIdx:   make(map[string]int, len(cfg.Locations)),
		rank:      info.Rank,
		procs:     info.Size,
		info:      info,
		log:       cfg.Logger,
		summary:   cfg.TraceSummary,
		scheduled: make(chan struct{}),
	}
	if j.log == nil {
		j.log = slog.Default()
	}
	if j.peerTimeout, err = duration(cfg.PeerTimeout, envPeerTimeout); err != nil {
		return nil, err
	}
	if j.startTimeout, err = duration(cfg.StartTimeout, envStartTimeout); err != nil {
		return nil, err
	}
	if j.bufs.checked, err = cfg.Checked.resolve(); err != nil {
		return nil, err
	}
	j.bufs.share = j.procs > 1 && !noSharedMemory()
	if j.traceFile = cfg.Trace; j.traceFile == "" {
		j.traceFile = os.Getenv("ORWL_TRACE")
	}
	if j.traceFile != "" {
		j.rec = trace.New(j.rank)
		j.rec.SetEventLimit(traceEventLimit)
	}
	for i, name := range j.names {
		j.nameIdx[name] = i
	}
	if err := j.place(cfg.Place); err != nil {
		return nil, err
	}
	if j.procs > 1 {
		j.node = newNode(j, j.log)
		j.node.req.spare.alloc = j.bufs
	}
	j.makeLocations()
	j.makeTasks()
	if j.ckpt, err = newCheckpointer(j, cfg.Checkpoint); err != nil {
		return nil, err
	}
	return j, nil
}

// checkShape checks the job's tasks and location names.
func checkShape(cfg Config) error {
	switch n := cfg.Tasks * len(cfg.Locations); {
	case cfg.Tasks < 1:
		return fmt.Errorf("orwl: Config.Tasks is %d; a job needs at least one task", cfg.Tasks)
	case len(cfg.Locations) == 0:
		return errors.New("orwl: Config.Locations is empty; every task needs at least one location")
	case cfg.Tasks > maxLocations || n > maxLocations:
		return fmt.Errorf("orwl: Config.Tasks is %d with %d locations each: a job has at most %d locations", cfg.Tasks, len(cfg.Locations), maxLocations)
	}
	for i, name := range cfg.Locations {
		if name == "" {
			return fmt.Errorf("orwl: Config.Locations[%d] is empty; locations need names", i)
		}
		if slices.Index(cfg.Locations, name) < i {
			return fmt.Errorf("orwl: Config.Locations names %q twice", name)
		}
	}
	return nil
}

// place decides which process runs each task: place (Config.Place), or contiguous blocks.
func (j *job) place(place func(task, procs int) int) error {
	j.owner = make([]int, j.tasks)
	for task := range j.tasks {
		r := task * j.procs / j.tasks
		if place != nil {
			r = place(task, j.procs)
		}
		if r < 0 || r >= j.procs {
			return fmt.Errorf("orwl: Config.Place puts task %d on rank %d; the job has %d processes", task, r, j.procs)
		}
		j.owner[task] = r
	}
	return nil
}

// makeLocations makes every location of the job: this process's own, and proxies of the
// others'.
func (j *job) makeLocations() {
	n := j.tasks * len(j.names)
	j.queues = make([]handle.Queue, n)
	j.owned = make([]*location, n)
	for idx := range n {
		id := j.locationAt(uint32(idx))
		if j.owner[id.Task] != j.rank {
			j.queues[idx] = &remoteQueue{r: &j.node.req, owner: j.owner[id.Task], loc: uint32(idx), mirrorState: mirrorState{mirror: alignedBytes(0)}}
			continue
		}
		l := &location{id: id, index: uint32(idx), j: j, data: alignedBytes(0), version: 1}
		l.fq = j.rec.FIFO(trace.Loc(l.id))
		if j.procs > 1 {
			l.mirrors = make([]uint64, j.procs)
		}
		j.owned[idx], j.queues[idx] = l, l
	}
}

// makeTasks makes the tasks this process runs.
func (j *job) makeTasks() {
	j.task = make([]*Task, j.tasks)
	for task := range j.tasks {
		if j.owner[task] != j.rank {
			continue
		}
		t := &Task{id: task, job: j}
		t.handles = handle.NewOwner(t.obs.observe(t, j.rec.TaskTrack(task)), newHandleError)
		j.local = append(j.local, t)
		j.task[task] = t
	}
	j.pending = len(j.local)
	j.det.slots = make([]slot, j.tasks)
}

// locIndex checks l and returns its index in the job.
func (j *job) locIndex(l Location) (int, error) {
	if l.Task < 0 || l.Task >= j.tasks {
		return 0, fmt.Errorf("no task %d: the job has %d tasks", l.Task, j.tasks)
	}
	i, ok := j.nameIdx[l.Name]
	if !ok {
		return 0, fmt.Errorf("no location named %q: the job's locations are %s", l.Name, strings.Join(j.names, ", "))
	}
	return l.Task*len(j.names) + i, nil
}

// locationAt names the location numbered idx (as locIndex numbers it, and as it travels on
// the wire).
func (j *job) locationAt(idx uint32) Location {
	return Location{Task: int(idx) / len(j.names), Name: j.names[int(idx)%len(j.names)]}
}

// queue returns the queue that handles on l talk to: the location, or its remote proxy.
func (j *job) queue(l Location) (handle.Queue, error) {
	i, err := j.locIndex(l)
	if err != nil {
		return nil, err
	}
	return j.queues[i], nil
}

// ownLocation returns l, which must be a location of this process.
func (j *job) ownLocation(l Location) (*location, error) {
	i, err := j.locIndex(l)
	if err != nil {
		return nil, err
	}
	if j.owned[i] == nil {
		return nil, fmt.Errorf("%s belongs to rank %d, not to this process (rank %d)", l, j.owner[l.Task], j.rank)
	}
	return j.owned[i], nil
}

// ownedByIndex returns the location of this process numbered idx on the wire.
func (j *job) ownedByIndex(idx uint32) (*location, error) {
	if int(idx) >= len(j.owned) || j.owned[idx] == nil {
		return nil, fmt.Errorf("orwl: rank %d owns no location numbered %d", j.rank, idx)
	}
	return j.owned[idx], nil
}

// fail records the job's first failure and stops the job with it: every task's context is
// cancelled, every location of this process stops granting (whoever waits gets err, and the
// data a failed task left is never handed on), every request of this process on another
// one fails, and the other processes that can still be reached are told, unless they
// learn it by themselves (a failure another process reported, or the init-phase mistakes
// that the schedule reports to every task).
//
// A first failure that only says that a peer closed its mesh or failed (a process that
// left, or said at the end that it failed, before its report of why arrived here: yields)
// gives way to the first that says why, which goes on along the job's tree; a task's
// context error does not say why (the job's failure cancelled it).
func (j *job) fail(err error) {
	j.errMu.Lock()
	first := j.err == nil
	better := !first && yields(j.err) && !yields(err) && !errors.Is(err, context.Canceled)
	if better {
		j.err = err // a better reason for the same failure; everything else is done already
	}
	if j.agreed && first {
		j.errMu.Unlock()
		j.log.Debug("orwl: after the job's end", "err", err)
		return
	}
	if first {
		j.err = err
		j.failed.Store(true)
	}
	if (first || better) && !yields(err) {
		close(j.reasonLocked())
	}
	j.errMu.Unlock()
	if better && j.node != nil {
		j.node.spreadFailure(err) // those that heard of the closed mesh from here hear why
	}
	if !first {
		return
	}
	j.cancel(err)
	for _, l := range j.owned {
		if l != nil {
			l.fail(err)
		}
	}
	if j.node == nil {
		return
	}
	j.node.req.failTickets(err)
	// Every process passes the failure on along the job's tree, also a failure it was told
	// of (spreadFailure). A schedule error is found by every process alike.
	if _, everywhere := errors.AsType[*scheduleError](err); everywhere {
		return
	}
	j.node.spreadFailure(err)
}

// agree records the end of the final agreement: what goes wrong afterwards (a grant for a
// request of a finished task that cannot be sent any more, say) concerns nobody.
func (j *job) agree() {
	j.errMu.Lock()
	j.agreed = true
	j.errMu.Unlock()
}

func (j *job) failure() error {
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// runTask runs one task. A task that fails fails the job before its handles are closed, so
// that what it holds is failed, not handed on; the grants of its write sections that failed
// fail their locations with the job's error then, or with their own when the task swallowed
// it.
func (j *job) runTask(ctx context.Context, t *Task, fn TaskFunc) {
	stop := t.handles.Watch(ctx) // the job's end wakes the task's waits
	defer stop()
	err := callTask(ctx, t, fn)
	if !t.scheduled {
		j.arrive(ctx, t, false) // arrives with no requests; never waits
	}
	if err != nil {
		j.fail(err)
	}
	for _, g := range t.failedGrants {
		g.t.failGrant(g.err)
	}
	if err := t.finish(); err != nil {
		j.fail(err)
	}
	j.det.finished(t.id)
}

// callTask runs fn, turning a panic into an error. A memory fault of the task's goroutine
// is a panic too (debug.SetPanicOnFault), so that a misuse of mapped data that a checked job
// guards is reported as such (handle.Owner.Misuse), and another fault fails the job instead
// of the process.
func callTask(ctx context.Context, t *Task, fn TaskFunc) (err error) {
	debug.SetPanicOnFault(true)
	defer func() {
		if p := recover(); p != nil {
			if merr := t.handles.Misuse(p); merr != nil {
				if _, named := errors.AsType[*HandleError](merr); !named {
					merr = fmt.Errorf("task %d: %w", t.id, merr)
				}
				err = fmt.Errorf("orwl: %w\n%s", merr, debug.Stack())
				return
			}
			err = fmt.Errorf("orwl: task %d panicked: %v\n%s", t.id, p, debug.Stack())
		}
	}()
	return fn(ctx, t)
}
