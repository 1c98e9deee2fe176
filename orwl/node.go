package orwl

import (
	"log/slog"

	"github.com/orwl-go/orwl/transport"
)

// Reading a grant. A grant of a location of another process reads 933 lines (wc -l), in
// this order:
//
//	node.go            50  this guide, the node
//	handle/handle.go  142  Ticket, Queue; Handle.Request, Acquire, Release
//	handle/latch.go   121  the latch: Acquire waits on it, a grant settles it
//	remote.go         192  the requester: Request, sendRelease, granted
//	protocol.go       150  the three messages; node.Sink and node.Handle dispatch them
//	owner.go          141  the owner: place, served.granted, released
//	location.go       137  the FIFO operations (enqueue, release, deliver), ticketBase
//
// Handle.Request calls remoteQueue.Request, which sends a requestMsg; at the owner,
// owner.place enqueues it, and the FIFO operation that grants it sends a grantMsg
// (deliver, served.granted); requester.granted settles the ticket's latch, on which
// Handle.Acquire waits (Latch.Wait). Handle.Release sends a releaseMsg
// (requester.sendRelease); owner.released releases the request and grants the next in one
// FIFO operation with the placing of its next round's request (location.release). A local
// grant reads handle/handle.go, handle/latch.go, local.go (47) and location.go.
//
// Each makes single calls, which a grant does not need followed, into: the ticket ids
// (ids.go), the deadlock watch (ticketBase.Waiting, ticket.go, which also polls the mesh
// while a task waits; detector.moved), an iterative request's round (job.round), what a
// FIFO operation that granted tells the other concerns (granting.go), the buffers
// (buffers.go), the mirror (mirror.go) and, traced, the observer and the trace (observer.go,
// ticket.go). What a grant never runs is apart: cancel.go, fail.go (a failed or refused
// request), ticket.go, the rest of package handle; lockorder.go says how the mutexes nest.

// node is this process's end of the protocol (protocol.go) and the mesh's Handler. It hands
// every message to one of three services, each with its own state: req (remote.go,
// mirror.go), this process's requests on the locations of other processes; own (owner.go),
// the requests of other processes on this process's locations; wide (wide.go), what the
// processes do together (the schedule's mistakes, a failure spread along the job's tree,
// and rank 0's deadlock watch, trace and checkpoints, whose reports travel along the tree).
type node struct {
	j    *job
	mesh *transport.Mesh
	log  *slog.Logger

	req  requester
	own  owner
	wide jobWide
}
