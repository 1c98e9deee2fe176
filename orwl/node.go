package orwl

import (
	"log/slog"

	"github.com/orwl-go/orwl/transport"
)

// Reading a grant. A grant of a location of another process reads 929 lines (wc -l), in
// this order:
//
//	node.go            72  this guide, the node
//	handle/handle.go  139  Ticket, Queue; Handle.Request, Acquire, Release
//	handle/latch.go   121  the latch: Acquire waits on it, a grant settles it
//	remote.go         198  the requester: Request, sendRelease, granted
//	protocol.go       150  the three messages; node.Sink and node.Handle dispatch them
//	owner.go          118  the owner: place, served.granted, released
//	location.go       131  the FIFO operations (enqueue, release, deliver), ticketBase
//
// Handle.Request calls remoteQueue.Request, which sends a requestMsg; at the owner,
// owner.place enqueues it, and the FIFO operation that grants it sends a grantMsg
// (deliver, served.granted); requester.granted settles the ticket's latch, on which
// Handle.Acquire waits (Latch.Wait). Handle.Release sends a releaseMsg
// (requester.sendRelease); owner.released releases the request (location.release), which
// grants the next. A grant of a location of this process reads handle/handle.go,
// handle/latch.go, local.go (47) and location.go.
//
// Either makes one call each, which a grant does not need followed: the ticket ids
// (newTicket, find, servedAt..., ids.go), the wait's report to the deadlock watch and its
// polling of the mesh (ticketBase.Waiting, ticket.go), the round of an iterative request
// (job.round, checkpoint.go), the deadlock watch's moves (detector.moved, deadlock.go), what
// a FIFO operation that granted tells the other concerns (location.granting, granting.go),
// the buffers (buffers.go), the mirror's data and version (grantSink, landed, givenBack,
// mirror.go), and, traced, the observer and the FIFO's trace (Handle.trace, observer.go;
// location.traceGrant, ticket.go). What a grant never runs is apart: a cancelled request
// (cancel.go), a failed or refused one (fail.go), what the deadlock watch, the trace, Resize
// and Test need of a ticket (ticket.go; handle/resize.go, handle/poll.go), a latch's other
// ends (handle/latch_end.go), a handle's data, misuses and end (handle/section.go,
// misuse.go, owner.go); orwl/handle.go gives the handle the API's name, and lockorder.go
// says how the package's mutexes nest.

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

func newNode(j *job, log *slog.Logger) *node {
	return &node{
		j:    j,
		log:  log,
		req:  requester{j: j, tickets: []*remoteTicket{nil}, lost: make([]error, j.procs), sunk: make([]sunkGrant, j.procs)},
		own:  owner{j: j, log: log, served: make([][]*served, j.procs)},
		wide: newJobWide(j.procs),
	}
}

// setMesh gives the node and its services the mesh, before it starts: messages may arrive
// while it does.
func (n *node) setMesh(m *transport.Mesh) {
	n.mesh, n.req.mesh, n.own.mesh = m, m, m
}
