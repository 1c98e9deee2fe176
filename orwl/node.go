package orwl

import (
	"log/slog"

	"github.com/orwl-go/orwl/transport"
)

// Reading a grant. A grant of a location of another process, in the order of its steps
// (the files' lengths when this was written):
//
//	orwl/handle.go    92  Handle.Acquire, Release: the API, which package handle serves
//	handle/handle.go 580  Handle.Request, Acquire, Release; the Queue and Ticket it uses
//	handle/latch.go  216  the grant's latch, on which Acquire waits
//	remote.go        455  the requester: remoteQueue.Request sends the request, granted
//	                      hands the grant to its latch, sendRelease gives it back
//	protocol.go      275  the messages, and the dispatch of what arrives (node.Handle)
//	owner.go         215  the owner: place puts the request in the FIFO, served.granted
//	                      sends the grant, released ends it
//	location.go      391  the FIFO operations: enqueue, release, granting, deliver
//	ticket.go         75  what local and remote tickets share: Waiting, Traced
//
// A grant of a location of this process reads the files of the handle, location.go and
// ticket.go. Either makes one call each, which a grant does not need followed, into the
// round of an iterative request (job.round, checkpoint.go), the deadlock watch
// (detector.block and moved, deadlock.go), an armed checkpoint's snapshot
// (location.granting, checkpoint_process.go), the buffers (buffers.go), and, in a traced
// job, the observer (observer.go).

// Lock order. The mutexes of the package, and the only ways they nest: a mutex on the left
// of > may be held while one on its right is taken, never the other way round; every other
// mutex is taken alone. Under any of them a message is only queued (transport.Mesh.Send,
// SendAhead), never written (SendNow, Flush with now), and nothing waits.
//
//	remoteQueue.sendMu > requester.mu         a request or release and the ticket table
//	remoteQueue.sendMu > remoteQueue.grantMu  a release counts the grant given back
//	remoteQueue.sendMu > spareMirrors.mu      and gives its mirror's buffer up
//	location.mu        > checkpointer.mu      a snapshot queues its piece for the writer
//
// Taken alone: location.sendMu, jobWide.mu, job.errMu, job.mu, restart.mu, coordInbox.mu,
// writerProcs.
// Inside any of them only other packages' locks are taken (the transport's connection
// queues, hugemem's registry of guarded buffers), which take none of these.

// node is this process's end of the protocol (protocol.go) and the mesh's Handler. It hands
// every message to one of three services, each with its own state:
//
//   - req (remote.go): this process's requests on the locations of other processes, their
//     tickets, grants and mirrors;
//   - own (owner.go): the requests of other processes on this process's locations;
//   - wide (wide.go): what the processes do together: the init-phase mistakes exchanged at
//     the schedule and a failure spread along the job's tree (tree.go), and rank 0's
//     duties: the deadlock watch (deadlock_dist.go), the trace's parts and clock
//     (trace.go), the checkpoints (checkpoint.go); the watch's reports and the trace's
//     parts travel to rank 0 along the tree.
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
		j:   j,
		log: log,
		req: requester{j: j, tickets: []*remoteTicket{nil}, lost: make([]error, j.procs)},
		own: owner{j: j, log: log, served: make([][]*served, j.procs)},
		wide: jobWide{problemsFrom: map[int]bool{}, problemsIn: make(chan struct{}, 2),
			allProblems: make(chan []rankProblems, 1), failed: make(chan struct{}), traceParts: make([][]byte, j.procs),
			partsFrom: map[int]bool{}, partsIn: make(chan struct{}, 2), lost: make([]bool, j.procs),
			clock: make(chan int64, 1)},
	}
}

// setMesh gives the node and its services the mesh, before it starts: messages may arrive
// while it does.
func (n *node) setMesh(m *transport.Mesh) {
	n.mesh, n.req.mesh, n.own.mesh = m, m, m
}
