package orwl

import (
	"log/slog"

	"github.com/orwl-go/orwl/transport"
)

// Reading a grant. A grant of a location of another process crosses seven files, 1,560
// lines with the types (wc -l when this was written); read them in this order:
//
//	node.go            95  this guide, and the node, which hands each message to its service
//	handle/handle.go  287  what a handle asks of its queue (Queue, Ticket); Handle.Request,
//	                       Acquire, Release
//	handle/latch.go   216  the grant's latch: Acquire waits on it, a grant settles it
//	remote.go         319  the requester: remoteQueue.Request sends the request, granted
//	                       hands a grant to its latch, sendRelease gives it back
//	protocol.go       198  the grant's three messages, and node.Handle, which dispatches them
//	owner.go          198  the owner: place puts a request in the FIFO, served.granted sends
//	                       a grant, released ends it
//	location.go       247  the FIFO operations (enqueue, granting, release, deliver), and
//	                       ticketBase, which every ticket embeds (Waiting)
//
// The steps: Handle.Request calls remoteQueue.Request, which sends a requestMsg; at the
// owner, node.Handle calls owner.place, which enqueues it (location.enqueue); the FIFO
// operation that grants it delivers the grant (deliver, served.granted), a grantMsg; at the
// requester, requester.granted settles the ticket's latch (Latch.Grant), and Handle.Acquire,
// which waits on it (ticketBase.Waiting, Latch.Wait), returns. Handle.Release calls
// remoteTicket.Release, which sends a releaseMsg (requester.sendRelease); at the owner,
// owner.released releases the request (location.release), and that FIFO operation grants
// the next.
//
// orwl/handle.go (92 lines) gives package handle's Handle the API's name: its methods only
// forward. A grant of a location of this process reads handle/handle.go, handle/latch.go,
// local.go (97) and location.go. Either makes one call each, which a grant does not need
// followed, into the round of an iterative request (job.round, checkpoint.go), the deadlock
// watch (detector.block and moved, deadlock.go), an armed checkpoint's snapshot
// (location.granting, checkpoint_process.go), the buffers (buffers.go), the mirrors
// (mirror.go: where a grant's data lands, when a mirror's buffer is given up), and, in a
// traced job, the observer (observer.go).

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
//   - req (remote.go, mirror.go): this process's requests on the locations of other
//     processes, their tickets, grants and mirrors;
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
		req: requester{j: j, tickets: []*remoteTicket{nil}, lost: make([]error, j.procs), sunk: make([]sunkGrant, j.procs)},
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
