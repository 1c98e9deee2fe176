// Package orwl is the ORWL program model: a job of tasks that own named locations and reach
// them only through handles queued in ordered read-write FIFOs. This comment is the manual;
// the types and functions below state their contracts.
//
// # The model
//
// A job has Config.Tasks tasks, numbered from 0, spread over one or more processes. Every
// task owns the same named locations (Config.Locations): a byte buffer and a FIFO of
// requests. A task never sends a message and no scheduler decides when it runs: it places
// read or write requests in the FIFOs of the locations it needs and blocks only until its
// request reaches the head. Adjacent reads are granted together; a write is exclusive; an
// entry leaves the FIFO when all its members have released, and the next one is granted.
//
// # The life of a job
//
// Run starts every task of this process as a goroutine running the same TaskFunc. In its
// init phase a task sizes its own locations (Task.Scale; data starts zero-filled and 8-byte
// aligned, so Float64s views are safe) and declares, once, the handles it needs:
// Task.ReadInsert and Task.WriteInsert give iterative handles at an initial FIFO position,
// Task.ReadInsertOnce and Task.WriteInsertOnce one-shot ones. Mistakes never fail on the
// spot: Task.Schedule returns all of them, joined, to every task.
//
// Task.Schedule is a barrier across the whole job; when it returns, the FIFO of every
// location holds the declared requests in one global order (position, then task id, then
// declaration order). A task then uses its handles: Handle.Acquire, Handle.Map and
// Handle.Release, or Handle.Section around a function; Handle.Test asks without waiting.
// An iterative handle requests its next iteration when it is acquired, so every location
// cycles through its handles in the same order, iteration after iteration. Taking handles in
// order of position in every iteration, and nesting sections only of the same position, is
// deadlock-free by construction, and the result is bit-identical on every run, whatever the
// timing and the number of processes. After the schedule a task may add one-shot requests
// at the tail of any FIFO (Task.ReadRequest, Task.WriteRequest).
//
// When a task's function returns, every handle it still holds or has queued is released or
// cancelled, so no other task waits on a finished one. Run returns when every task of the
// job has returned: nil only when all of them returned nil, in every process.
//
// # Example
//
// The introductory example of the ORWL papers, a ring of tasks each owning a block and a
// bound (examples/blockbound is the whole program):
//
//	err := orwl.Run(ctx, orwl.Config{Tasks: n, Locations: []string{"block", "bound"}},
//		func(ctx context.Context, t *orwl.Task) error {
//			me, left := t.ID(), (t.ID()+t.NumTasks()-1)%t.NumTasks()
//			t.Scale("block", 8*size)
//			t.Scale("bound", 8)
//			blockW := t.WriteInsert(t.Loc(me, "block"), 0) // position 0
//			leftR := t.ReadInsert(t.Loc(left, "bound"), 0)
//			blockR := t.ReadInsert(t.Loc(me, "block"), 1) // position 1
//			boundW := t.WriteInsert(t.Loc(me, "bound"), 1)
//			if err := t.Schedule(ctx); err != nil {
//				return err
//			}
//			return t.Iterate(ctx, iterations, func(int) error {
//				if err := blockW.Section(ctx, func(block []byte) error {
//					return leftR.Section(ctx, func(bound []byte) error {
//						step(orwl.Float64s(block), orwl.Float64s(bound)[0])
//						return nil
//					})
//				}); err != nil {
//					return err
//				}
//				return blockR.Section(ctx, func(block []byte) error {
//					return boundW.Section(ctx, func(bound []byte) error {
//						b := orwl.Float64s(block)
//						orwl.Float64s(bound)[0] = b[len(b)-1]
//						return nil
//					})
//				})
//			})
//		})
//
// # Errors
//
// The first error of a task, in any process, cancels the context of every other task (as
// errgroup does) and is what Run returns everywhere; in the other processes it reads
// "orwl: rank R failed: " and its message. A task that panics fails the job with the panic's
// stack. A write section that fails or panics fails its location: its half-written data is
// never handed on. Test the errors with errors.Is and errors.As:
//
//   - ErrDeadlock: every task still running is blocked in Acquire in a cycle of waits, in
//     one process or across several; the *DeadlockError lists the cycle (task, location,
//     mode, FIFO position, holder).
//   - ErrPeerLost: a process of the job died, stopped or was cut off (Config.PeerTimeout);
//     the error names its rank.
//   - *HandleError: a handle's misuse (ErrNotHeld, ErrHeld, ErrClosed, ErrReadOnly,
//     ErrNegativeSize, ErrRequested, ErrNotRequested) or a failed acquire, naming the task,
//     the location and the FIFO position.
//   - a context's error, when Acquire's context ended before the grant.
//
// # Processes and launchers
//
// The same program runs as one process or as several, on one machine or many: Run finds its
// place in a job from whatever started the process (orwlrun, mpirun or mpiexec, srun, a
// Kubernetes Indexed Job, or ORWL_RANK, ORWL_SIZE, ORWL_COORD and ORWL_SECRET set by hand;
// Config.Job overrides them), and locations of tasks in other processes are reached through
// the same handles: their data is pushed into a local mirror when the grant comes. MPI is
// never linked. A program can also start itself as several processes (Launch).
//
// # Tracing
//
// Config.Trace (or ORWL_TRACE=FILE) records every request, grant, wait, section, release
// and transfer of the whole job into one Chrome trace event file (open it in Perfetto) and
// reports where the time went; cmd/orwltrace draws it as a Gantt chart. A traced job makes
// no pairs (see Location data below), whose rounds have no FIFO events to record.
//
// # Checkpoints
//
// A job whose tasks run their iterations with Task.Iterate, and register the private state
// they keep across iterations with Task.Keep, survives the loss of a process or a node:
// with Config.Checkpoint.Dir (or ORWL_CHECKPOINT_DIR; "{rank}" and "{host}" in it make a
// directory per process, and a directory without "{rank}" is the job's, each process
// writing into its subdirectory rank-R) it writes a checkpoint every
// Config.Checkpoint.Every, without stopping the job, at the boundary between two rounds of
// every FIFO, a consistent cut of the whole job (a job whose tasks never run Iterate takes
// none, and rank 0 says so at its end). Each piece is kept on its process's disk and on a
// partner's. A job started again after a failure (orwlrun -restarts N does it) resumes from
// the newest checkpoint complete across the surviving directories, on any number of
// processes, and ends with the bytes an uninterrupted run would have produced; a job that
// finished marks its checkpoints so, and run again starts afresh, saying why. The processes
// need not see each other's directories (a disk per node): a process that lacks a piece of
// its tasks is sent it by one that has a copy, checked on arrival (restore.go describes the
// restart). Package checkpoint describes the storage.
//
// A resumed job's locations and kept states hold the checkpoint's data when Schedule
// returns, and Iterate starts at the checkpoint's iteration (Task.Resumed, known from the
// task's start). Initialising data is then wrong: a program declares its initialisation
// handles, and runs their sections, only when Resumed() is 0. Schedule refuses, in a resumed
// job, a one-shot write declared on a location that iterative handles use, and Iterate
// refuses a checkpoint at or past its last iteration (a longer run's); neither ends with
// wrong data. In every job, each iteration of Iterate must acquire each of the task's
// iterative handles once (handles used in turn belong in one iteration of several steps):
// Iterate checks it, so that the rounds of every location are its iterations.
//
// # Location data
//
// Location data and mirrors of remote locations of 2 MiB or more live outside the Go heap,
// mapped (package internal/hugemem): they are freed when Run returns, and at the release
// of a write whose Resize replaced them, so a slice from Map must not outlive its section
// (see Checked jobs); a mirror that its
// process will not read before the data changes, or that no request of its process needs
// any more, gives its buffer to the next mirror that needs one. A process of the same host
// (whose messages go through shared memory) reads data of 2 MiB or more in place instead:
// the owner's buffer is shared memory, which the reader maps read-only, so nothing is
// copied and a write through a read's data faults in every job (ORWL_SHM=off turns this
// off, and the rings with it). A location that only one iterative writer of its owner's
// process and one iterative reader of another process of the host use, from the schedule
// on, is a pair, at any size: its data is shared memory, its FIFO counters there, and
// a round costs neither process a message; another request on it makes it an ordinary
// FIFO again, and a job that takes checkpoints or a trace makes no pairs. The environment
// variable ORWL_HUGEPAGES=on asks for transparent huge pages for them (512 times fewer page
// faults when they are first touched; faster where the system has the memory at hand, but
// slower on a virtual machine whose host lends memory lazily), off refuses them; unset, the
// system's policy decides.
//
// # Checked jobs
//
// The slice that Map or Section gives is valid while the handle holds its grant and until a
// Resize, which returns the new one; a read handle's slice must not be written. A checked
// job (Config.Checked: by default in test binaries, else with ORWL_CHECKED=on) makes these
// mistakes fail alike at every size and number of processes: every buffer has pages of its
// own, read-only while read grants hold it, and a buffer that Resize replaces or that Run
// frees is made inaccessible for good. A write through a read handle's data, or a use of
// a slice from before Resize, then fails the section with ErrReadOnlyData or ErrStaleData,
// naming the task, the location and the position (the data is unchanged), and a slice used
// after Run returns faults. The fault must happen on the task's own goroutine: in one it
// started, or in C code, it crashes the process. Unchecked, such mistakes go unnoticed, and
// what they do depends on the number of processes and the size.
//
// orwl does no computation of its own: kernels and data layout belong to the program.
package orwl
