// Package orwl is the ORWL program model: a job of tasks that own named locations and reach
// them only through handles queued in ordered read-write FIFOs.
//
// Every task of a job runs the same TaskFunc. In its init phase a task sizes its own
// locations (Scale) and declares, once, the handles it needs: ReadInsert and WriteInsert
// give iterative handles at an initial FIFO position, ReadInsertOnce and WriteInsertOnce
// one-shot ones. Schedule is a barrier across the whole job; when it returns, the FIFO of
// every location holds the declared requests in one global order (position, then task id,
// then declaration order). Taking handles in order of position in every iteration, and
// nesting sections only of the same position, is then deadlock-free by construction; a
// program that breaks this discipline and deadlocks gets ErrDeadlock naming the cycle.
//
// After the schedule a task may add one-shot requests at the tail of any FIFO (ReadRequest,
// WriteRequest). When a task's function returns, every handle it still holds or has queued
// is released or cancelled, so no other task waits on a finished one.
//
// Location data and mirrors of remote locations of 2 MiB or more live outside the Go heap,
// mapped (package internal/hugemem): they are freed when Run returns, and when a Resize
// replaces them, so a slice from Map must not outlive its section. The environment
// variable ORWL_HUGEPAGES=on asks for transparent huge pages for them (512 times fewer page
// faults when they are first touched; faster where the system has the memory at hand, but
// slower on a virtual machine whose host lends memory lazily), off refuses them; unset, the
// system's policy decides.
//
// orwl does no computation of its own: kernels and data layout belong to the program.
package orwl
