package orwl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unsafe"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/transport"
)

// This file is the vocabulary a program uses besides the methods of Task, Handle and Group:
// the configuration of a job and the function its tasks run, the access modes, the errors
// to test for, and the views of mapped data. Types with behaviour of their own have their
// own files (task.go, handle.go, group.go, job.go, launch.go, deadlock.go).

// Config describes a job.
type Config struct {
	// Tasks is the number of tasks in the whole job.
	Tasks int
	// Locations are the names of the locations every task owns.
	Locations []string
	// Job places this process in a job of several processes. Nil means: discover it from
	// the environment (orwlrun, mpirun, srun), or else run the whole job in this process.
	Job *Job
	// Place returns the rank of the process that runs task, 0 <= rank < procs. Nil means
	// contiguous blocks: task*procs/Tasks.
	Place func(task, procs int) int
	// Logger receives the runtime's reports (refused connections, rejected frames, lost
	// processes). Nil means slog.Default().
	Logger *slog.Logger
	// Trace, when not empty, records every request, grant, wait, section, release and
	// transfer of the job, and rank 0 writes them to this file as Chrome trace event JSON
	// (open it in Perfetto, or draw it with cmd/orwltrace) and reports a summary of where
	// the time went (see TraceSummary). Empty means the ORWL_TRACE environment variable,
	// if set.
	Trace string
	// TraceSummary receives the summary of a traced job, on rank 0: a table of where each
	// task's time went. Nil means standard error, after a line naming the trace file.
	TraceSummary io.Writer
	// PeerTimeout is how long a process of the job may send nothing before the others take
	// it for lost (0: ORWL_PEER_TIMEOUT, else 3s). A process that is sending, even one long
	// transfer, is alive, and a process that finds it was paused itself (stopped,
	// suspended with its whole job) does not blame the others; a stopped or unreachable one
	// fails the job within about this time.
	PeerTimeout time.Duration
	// StartTimeout bounds how long the start of the job may go on without progress (no
	// process registering with rank 0, no connection made) before it fails (0:
	// ORWL_START_TIMEOUT, else 60s): a start that is still moving is never cut short. A
	// process that dies or is unreachable once the start is under way fails it within
	// PeerTimeout, naming its rank; so does a rank that never registers while others did
	// (named by every process, PeerTimeout after the last registration), and a process that
	// cannot reach rank 0 (no answer at all), naming rank 0; a process pointed at a job whose
	// start is over fails at once, saying so; one that reaches its limit of open files fails
	// the start at once, naming RLIMIT_NOFILE.
	StartTimeout time.Duration
	// Checkpoint makes the job restartable from checkpoints written while it runs (see
	// Task.Iterate and Task.Keep). The zero value takes none, unless ORWL_CHECKPOINT_DIR
	// says where.
	Checkpoint Checkpoint
	// Checked makes misuse of mapped data fail the same way at every size and number of
	// processes (see "Checked jobs" in the package documentation): a write through a read
	// handle's data, or a use of data that Resize replaced or that Run freed. It costs a page
	// per location and system calls per grant, for tests: the zero value is on inside test
	// binaries that run no benchmarks and off elsewhere, unless ORWL_CHECKED is "on" or "off".
	Checked Checking
}

// TaskFunc is the program of every task. Returning a non-nil error cancels the context of
// the other tasks of the job, in every process, and Run returns the first such error.
type TaskFunc func(ctx context.Context, t *Task) error

// Checking is a job's choice of checks on the use of mapped data (Config.Checked).
type Checking uint8

// The choices of Config.Checked.
const (
	// CheckedDefault: the environment variable ORWL_CHECKED ("on" or "off"), else on inside
	// a test binary (testing.Testing) that runs no benchmarks (no -test.bench), off elsewhere.
	CheckedDefault Checking = iota
	CheckedOn               // checked, whatever the environment
	CheckedOff              // unchecked, whatever the environment: production speed
)

// Mode says whether a handle reads (shared access, adjacent reads granted together) or
// writes (exclusive access).
type Mode uint8

// The two access modes.
const (
	Read  Mode = iota + 1 // shared: adjacent reads are granted together
	Write                 // exclusive
)

// String returns "read" or "write", as errors and traces name the modes.
func (m Mode) String() string { return m.fifo().String() }

// fifo returns m as the FIFO's mode, and modeOf the FIFO's mode as a Mode: the values are
// the same (TestModeValues), so neither costs anything.
func (m Mode) fifo() fifo.Mode { return fifo.Mode(m) }

func modeOf(m fifo.Mode) Mode { return Mode(m) }

// Errors of handle misuse, matched with errors.Is. The error that matches one is a
// *HandleError naming the task, the location and the FIFO position.
var (
	ErrNotRequested error // Acquire with no request queued: before the schedule, or a one-shot handle already used
	ErrHeld         error // Acquire of a handle that holds its grant
	ErrNotHeld      error // Release or Resize of a handle that holds no grant
	ErrClosed       error // use of a closed handle: after Close, a failed Acquire or a failed write section
	ErrReadOnly     error // Resize through a read handle
	ErrNegativeSize error // Resize or Scale to a negative size
	ErrRequested    error // Request of a one-shot handle whose request is still queued
	ErrReadOnlyData error // a checked job's write through a read handle's data
	ErrStaleData    error // a checked job's use of data after Release, a Resize or Run
)

// Errors that Run and Acquire report; test for them with errors.Is.
var (
	// ErrDeadlock: every task still running was blocked in Acquire, waiting in a cycle.
	// The error that matches it is a *DeadlockError naming the cycle.
	ErrDeadlock = errors.New("orwl: deadlock")
	// ErrPeerLost: a process of the job is gone. The error that matches it names the rank.
	ErrPeerLost error
)

// init gives the errors declared without a value above the values of the packages that
// report them, which wrap those very values: declared with them, they would name those
// packages in orwl's documentation.
func init() {
	ErrNotRequested, ErrHeld, ErrNotHeld = handle.ErrNotRequested, handle.ErrHeld, handle.ErrNotHeld
	ErrClosed, ErrReadOnly, ErrNegativeSize = handle.ErrClosed, handle.ErrReadOnly, handle.ErrNegativeSize
	ErrRequested, ErrReadOnlyData, ErrStaleData = handle.ErrRequested, handle.ErrReadOnlyData, handle.ErrStaleData
	ErrPeerLost = transport.ErrPeerLost
}

// Location names one location of the job: the location called Name of task Task.
type Location struct {
	Task int
	Name string
}

// String names l as errors do: `task 3 "bound"`.
func (l Location) String() string { return fmt.Sprintf("task %d %q", l.Task, l.Name) }

// HandleError is a failed operation of a Handle: every error a Handle returns is one, and so
// is the error of a task whose misuse of a handle's data its recovery found (see Checked
// jobs), which Run returns.
type HandleError struct {
	Op       string // "acquire", "release", "section", "resize", "request" or "use of the data"
	Task     int    // the task whose handle it is
	Location string // the location, as Location.String names it: `task 3 "bound"`
	Pos      int    // the handle's FIFO position (0 for a request made after the schedule)
	Mode     Mode   // the handle's mode
	Err      error  // why: an Err value (ErrNotHeld...), a context's error, or the failure of the job or of the location
}

// Error names the task, the operation, the handle and its position, then the cause:
// `task 0: release of read handle on task 0 "bound" (position 1): not acquired`.
func (e *HandleError) Error() string {
	spec := handle.Spec{Task: e.Task, Location: e.Location, Pos: e.Pos, Mode: e.Mode.fifo()}
	return (&handle.Error{Op: e.Op, Spec: spec, Err: e.Err}).Error()
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *HandleError) Unwrap() error { return e.Err }

// newHandleError makes the errors of a task's handles (handle.NewOwner).
func newHandleError(op string, s handle.Spec, err error) error {
	return &HandleError{Op: op, Task: s.Task, Location: s.Location, Pos: s.Pos, Mode: modeOf(s.Mode), Err: err}
}

// Float64s views a mapped buffer as float64 values (little-endian, the machine's order);
// trailing bytes that do not fill a value are left out. Location data is 8-byte aligned,
// so the view is always valid for it. The view shares memory with b.
func Float64s(b []byte) []float64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// Uint64s views a mapped buffer as uint64 values, like Float64s.
func Uint64s(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// Bytes views float64 values as bytes, the inverse of Float64s; it shares memory with f.
func Bytes(f []float64) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*8)
}
