package orwl

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
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
// checkpoint.InlineMax bytes (a halo) goes into the manifests of both instead. The writers
// start once every task has copied its kept states, and work with a processor of their own
// (checkpointer.write), so that the tasks wait for nothing but their copies.
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
// rank 0 how many it wrote and their digest (a checkpoint.Summary); once every process has,
// rank 0 sends everybody their sum, the Summary of the checkpoint, and each commits the
// manifest of its directory: the pieces it holds (its own and its partner's copies) with
// that Summary (checkpoint.Store.CommitPart), and says so (committed); once every process
// has, the checkpoint is complete, and rank 0 logs it. No message, and no manifest, grows with the
// number of processes; a restart unites the manifests it finds, and takes the union for the
// checkpoint only when it has the Summary's count and digest (checkpoint.Choose), which it
// does as long as, of every process, its directory or its partner's survives. A piece that
// cannot be written (a full disk) is reported once, and the checkpoint is discarded
// everywhere: the previous one stays, and the job goes on.
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
//
// The code is split by role:
//
//   - iterate.go: the user API (Checkpoint, Task.Keep, Task.Iterate, Task.Resumed,
//     Task.CheckpointHold) and the checks of its contract.
//   - checkpoint_process.go: each process's part: the hold, the arm, the snapshots of its
//     locations and its tasks' kept states, and the dispatch of checkpoint messages
//     (checkpointer.handle).
//   - checkpoint_writer.go: the writer, which makes pieces durable, sends them to the
//     partner, stores the partner's copies and tells rank 0 when its process is done.
//   - checkpoint_coord.go: rank 0's coordinator, a state machine that runs the exchanges
//     above and the restart's, and logs what could not be written; checkpoint_driver.go
//     feeds it its inputs and does what it says.
//   - checkpoint_tree.go: how the exchanges travel, along the job's tree: rank 0's messages
//     down, each passed on by a process to its children, and the answers up, a process's
//     and its subtree's made one.
//   - restore.go: the restart from a checkpoint, whose protocol it describes.
//   - protocol_ckpt.go: the checkpoint messages, a form for each step, and how they travel.

// checkpointer is this process's part in the checkpoints of the job; nil when the job takes
// none.
type checkpointer struct {
	j       *job
	every   time.Duration
	store   *checkpoint.Store
	restart *restart // the restart from a checkpoint (restore.go)
	resumed int      // the checkpoint the job restarts from, 0: none; set with the plan (install), before the tasks start

	entered atomic.Int64 // the highest iteration a task of this process has entered
	minIter atomic.Int64 // the smallest n of this process's Iterate calls
	hold    atomic.Int64 // tasks enter no iteration above it
	armed   atomic.Int64 // the checkpoint whose kept states tasks copy as they enter it; 0: none
	slack   atomic.Int64 // how far past the highest entered iteration a hold lets tasks go
	waited  atomic.Bool  // a task waited at the hold of the checkpoint being prepared
	began   atomic.Int64 // when a task first entered an iteration, in ns since made; 0: none yet
	// held counts this process's pieces of armed checkpoints whose buffers (location.ckpt.buf,
	// keptState.snap) are not free yet: from the arm until the writer is done with the piece
	// and, if it sent it, the partner said it stored its copy (ckptStored).
	held atomic.Int64
	// owing counts this process's tasks that iterate, keep state and have not copied it for
	// the armed checkpoint yet (Task.ckpt.owes, under mu too). Once it is zero after the
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
	// listed is the checkpoint armed last, whose pieces this process's directory holds
	// are written (its own) and copies (those its partner sent): the directory's manifest
	// lists them at the commit.
	listed int
	copies []checkpoint.PieceInfo
	stored int  // partner copies of them stored
	failed bool // a piece could not be written
	told   bool // this process told rank 0 of a full disk (warn)
	// spare holds the buffers partner copies arrived in, once written: the next copies land
	// in them (copyBuffer), as the same pieces come at every checkpoint, so receiving one
	// takes no page fault, and a piece of any size has a destination.
	spare [][]byte

	armedAt time.Time // when this process armed the checkpoint being taken (rank 0 logs it)

	relay relay            // the answers of this process's subtree to rank 0 (checkpoint_tree.go)
	coord *ckptCoordinator // rank 0's coordinator; nil on the other ranks
	inbox *coordInbox      // rank 0's coordinator's inputs (checkpoint_driver.go); nil on the other ranks
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
	c := &checkpointer{j: j, every: every, lifted: make(chan struct{}), wake: make(chan struct{}, 1)}
	if j.rank == 0 {
		setting := fmt.Sprintf("Config.Checkpoint.Dir %q", pattern)
		if cfg.Dir == "" {
			setting = fmt.Sprintf("%s=%s", envCheckpointDir, pattern)
		}
		c.coord, c.inbox = newCkptCoordinator(j.procs, j.tasks, j.owner, setting), newCoordInbox()
	}
	c.hold.Store(math.MaxInt64)
	c.minIter.Store(math.MaxInt64)
	c.slack.Store(1)
	c.made = time.Now()
	dirs, err := checkpoint.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("orwl: checkpoints: %w", err)
	}
	c.restart = newRestart(dirs, fp) // an error goes to rank 0, which fails the job
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
// one-shot (not iterative) handle. It is the one numbering of rounds, which the requests of
// every handle, local or remote, carry (rule 16): the rounds of a job resumed from
// checkpoint k begin at k. It reads a number fixed before the tasks start, and nothing else.
func (j *job) round(iterative bool, acquires int) int {
	if !iterative {
		return -1
	}
	return j.ckpt.start() + acquires
}

// start is the iteration the job starts at: the number of the checkpoint it restarts from,
// 0 for a fresh start or a job without checkpoints. It is fixed before the tasks start.
func (c *checkpointer) start() int {
	if c == nil {
		return 0
	}
	return c.resumed
}

// ended tells rank 0, once the tasks of this process have returned, whether one of them ran
// Task.Iterate: before the job's final agreement, which brings rank 0 every message sent
// before it.
func (c *checkpointer) ended() {
	if c != nil && c.minIter.Load() != math.MaxInt64 {
		c.send(0, iteratedMsg{}, nil)
	}
}

// finish is this process's part in the end of a job that succeeded, once its writer and
// rank 0's coordinator are done: it marks the checkpoints of its directory as those of a
// finished job (checkpoint.Store.MarkFinished), so that the job run again starts afresh;
// and rank 0's coordinator takes the inputs still queued (what came before the job's final
// agreement), and warns when no task of the job ran Task.Iterate, the only place where
// checkpoints are taken.
func (c *checkpointer) finish() {
	if c == nil {
		return
	}
	if err := c.store.MarkFinished(); err != nil {
		c.j.log.Warn(fmt.Sprintf("orwl: rank %d: the job finished, and its checkpoints could not be marked so (a run of the job again would resume from them): %v", c.j.rank, err))
	}
	if c.coord != nil {
		for _, in := range c.inbox.take() {
			c.perform(c.coord.step(in))
		}
		c.perform(c.coord.step(coordInput{kind: onSucceeded}))
	}
}
