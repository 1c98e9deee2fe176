package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Role says which of the two connections of a pair of processes a message travels on.
// Requester-role messages go on the connection the sender dialed; Owner-role messages go on
// the connection the sender accepted, so that they are not masked (bulk data should use
// it).
type Role uint8

const (
	// Requester sends on the connection this process dialed to the peer.
	Requester Role = iota
	// Owner sends on the connection the peer dialed to this process.
	Owner
)

// String returns "requester" or "owner".
func (r Role) String() string {
	switch r {
	case Requester:
		return "requester"
	case Owner:
		return "owner"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Handler receives what arrives on a Mesh. Its methods are called on the reader goroutine
// of a connection (PeerLost possibly on the heartbeat, a writer or a dialer goroutine);
// they may call Mesh.Send but must not call Mesh.Close, Mesh.Barrier or Mesh.FinalBarrier,
// and should return quickly: while one runs, the connection it was called for reads
// nothing.
type Handler interface {
	// Sink returns the buffer the payload of the message h is read into, at least h.Len
	// bytes long (only the first h.Len are written), so that payloads land in their final
	// place (a mirror) without intermediate copies, fragment after fragment. Returning nil
	// makes the mesh read a payload of at most 64 MiB into a per-connection scratch buffer
	// that is valid only during the following Handle call. An error refuses the message: the
	// connection cannot go on, and the peer is lost with a *FrameError wrapping
	// ErrSinkRefused and the error. Sink is called only for messages whose first frame
	// passed every check; only a connection that breaks mid-payload, or a later fragment
	// that breaks the rules (the peer is then lost), leaves a sink partly written. h is
	// valid only during the call. Sink may take long (to map and populate a large buffer):
	// the peer counts as heard meanwhile, since its message has come.
	Sink(from int, h *Header) ([]byte, error)
	// Handle delivers a complete message of a type >= TypeUser. Messages of one connection
	// are delivered in arrival order, one at a time. h is valid only during the call;
	// payload is the sink's first h.Len bytes (or scratch memory valid only during the
	// call).
	Handle(from int, h *Header, payload []byte)
	// PeerLost reports that rank is gone before it finished: heartbeat timeout, connection
	// loss, a broken message (a *FrameError), or a clean Close on its side before its
	// FinalBarrier (err wraps ErrPeerClosed then). err is a *PeerLostError. It is called at
	// most once per peer, not for a loss that makes Start fail, and not at all once Close
	// has begun. A peer whose final marker arrived is reported only when it dies or is cut
	// off before this process's FinalBarrier succeeded (not when it said it failed, nor when
	// it closes cleanly: it had every marker then).
	PeerLost(rank int, err error)
}

// Errors of the mesh.
var (
	// ErrPeerLost is matched (errors.Is) by every *PeerLostError.
	ErrPeerLost = errors.New("transport: peer lost")
	// ErrPeerClosed is the cause in a PeerLostError when the peer closed its mesh cleanly
	// (it sent a goodbye) rather than failed.
	ErrPeerClosed = errors.New("peer closed its mesh")
	// ErrClosed is returned by operations on a Mesh after its own Close (never because of
	// what a peer did).
	ErrClosed = errors.New("transport: mesh closed")
	// ErrPeerFinished is wrapped by the error of a Barrier that a peer will never reach
	// because it has entered FinalBarrier.
	ErrPeerFinished = errors.New("transport: peer has entered its final barrier")
	// ErrPeerFailed is wrapped by the error of a FinalBarrier when a peer reported that it
	// failed.
	ErrPeerFailed = errors.New("transport: peer failed")
	// ErrAuth is wrapped by handshake failures (wrong or missing secret).
	ErrAuth = errors.New("transport: authentication failed")
)

// PeerLostError says which rank was lost and why. errors.Is(err, ErrPeerLost) holds for it.
type PeerLostError struct {
	Rank int
	Err  error
}

// Error names the lost rank and the cause.
func (e *PeerLostError) Error() string {
	return fmt.Sprintf("transport: process rank %d lost: %v", e.Rank, e.Err)
}

// Unwrap returns the cause.
func (e *PeerLostError) Unwrap() error { return e.Err }

// Is reports whether target is ErrPeerLost.
func (e *PeerLostError) Is(target error) bool { return target == ErrPeerLost }

// Config configures Start. Rank and Size are required; for Size > 1 so are Secret and Coord
// (rank 0 may give Listener instead); the rest has defaults.
type Config struct {
	Rank, Size int
	// Coord is rank 0's coordinator address (host:port). Rank 0 listens there unless
	// Listener is set; the others dial it.
	Coord string
	// Listener, when set, is an already open listener Start uses and takes ownership of:
	// rank 0's coordinator socket (for example inherited from orwlrun), or another rank's
	// own listening socket instead of ListenHost:0.
	Listener net.Listener
	// ListenHost is the host ranks other than 0 listen on (ephemeral port). Default
	// 127.0.0.1. An unspecified address (0.0.0.0, ::) listens on every interface and
	// advertises the address the coordinator connection leaves from.
	ListenHost string
	// Secret is the job secret every connection proves knowledge of.
	Secret []byte
	// JobSpec describes the job as the upper layer sees it (at most 64 KiB); every process
	// must give the same, and Start fails on every process, naming both descriptions, when
	// one differs from rank 0's.
	JobSpec string
	// Heartbeat is the heartbeat period, which is also how often silence is checked
	// (default: PeerTimeout/10, at most 500ms, so a silent peer is lost within 1.1
	// PeerTimeout). PeerTimeout is the silence after which a peer is lost (default 3s); a
	// peer that is sending, even one long payload, is not silent, and a process that finds
	// it was paused itself (stopped, suspended) gives its peers a new PeerTimeout instead of
	// blaming them. Heartbeats go on the open connections only; the start connects every
	// process with its neighbours in the job's tree, so each is watched, and a loss that a
	// process finds spreads to every other one (tree.go). During the start too, a process
	// that cannot reach the coordinator (no answer at all: a partition, a stopped
	// coordinator) fails within PeerTimeout, naming it; a start that makes progress is
	// never failed by a fixed window.
	Heartbeat, PeerTimeout time.Duration
	// StartTimeout (default 60s) fails a start that does not move for that long: no rank
	// registers or becomes ready, the address book does not come; a start that moves
	// takes as long as it needs, and Start's ctx may cancel it. A coordinator that refuses
	// connections (not listening yet) is waited for that long. Once a rank has registered,
	// registrations are the start's progress: when none comes for PeerTimeout while ranks
	// are missing, the start fails on every process, naming them. Once the start is over,
	// the coordinator answers every connection that it is, and a process dialing it fails
	// at once saying so.
	StartTimeout time.Duration
	// Spin is how long a connection through shared memory (two processes of one host, see
	// shm.go) polls for the next message before its reader sleeps; it polls only while
	// nothing else of the process can run. A message that comes within Spin is read
	// without waking a sleeping thread, most of a small message's latency, at the price of
	// a busy core. While the host has more runnable threads than cores, whichever programs
	// they belong to (sampled every 2ms by a poller), or always when Oversubscribed, only a
	// task that waits for a message polls (Poller.Poll), for Spin at most, giving its core to
	// the other threads at every look, and readers sleep at once. Default 0: no polling.
	Spin time.Duration
	// Oversubscribed says that the processes of the job on this host outnumber its cores:
	// it polls as on a crowded host, whatever its load.
	Oversubscribed bool
	// ManySchedulers says that the processes of the job on this host have more schedulers
	// in all (GOMAXPROCS each) than the host has cores, though not more processes: readers
	// sleep at once, as on a crowded host, since a reader polling on a spare processor
	// takes a core from another process's task; a task that waits polls for Spin at most,
	// giving its core away at every look unless it is the only task of its process that
	// polls, in a process that is idle (Idle): then the job's polling tasks are at most its
	// processes, no more than the cores. Oversubscribed overrides it.
	ManySchedulers bool
	// Idle, when not nil, reports that the process has nothing to compute until a message
	// comes (every task waits for one, in Poll or asleep). While it does, and every
	// connection of the mesh goes through shared memory with its reader polling, the readers
	// and Poll poll past Spin, for up to 10ms: the process's core would be idle anyway. With
	// Spin 0 it is not called.
	Idle func() bool
	// NoSharedMemory keeps the connections of processes of one host on their sockets.
	NoSharedMemory bool
	// Handler receives messages and events; nil discards everything.
	Handler Handler
	// Logger receives refused connections, rejected messages and lost peers; default
	// slog.Default().
	Logger *slog.Logger
}

const (
	handshakeTimeout    = 5 * time.Second
	closeWait           = time.Second
	wsPath              = "/orwl/v1"
	bufSize             = 64 << 10
	purposeRegister     = 1
	purposeMesh         = 2
	maxAddrLen          = 1024
	maxJobSpec          = 64 << 10
	maxPreauth          = 32 // connections accepted at once that have not authenticated yet
	maxDials            = 8  // connections of the mesh a process dials at once
	initialDialBackoff  = 5 * time.Millisecond
	maximumDialBackoff  = 250 * time.Millisecond
	maxHeartbeat        = 500 * time.Millisecond
	defaultPeerTimeout  = 3 * time.Second
	defaultStartTimeout = 60 * time.Second
	directMax           = 64 << 10 // the largest payload SendNow writes on the caller's goroutine
)

// Mesh is the set of connections of one process to the other processes of the job: its
// neighbours in the job's tree, connected at the start, and the peers it exchanges messages
// with, connected on their first message (connect.go).
//
// Concurrency: Send may be called from any number of goroutines at once, including from
// Handler methods; it never blocks on the network (messages are queued, without limit, to
// the connection's single writer goroutine, or to the peer until its connection comes, so
// the upper layer's protocol must bound what it has in flight). Barrier and FinalBarrier
// may be called by one goroutine at a time (concurrent calls are serialised) and not from
// Handler methods. Close may be called from any goroutine except Handler methods, more than
// once; after it returns no Handler method runs any more. Handler methods of one connection
// run one at a time on its reader goroutine; those of different connections run
// concurrently.
//
// Ordering: messages sent to one peer with one Role arrive in the order Send was called
// (one connection, FIFO); messages sent with different roles are not ordered with respect
// to each other.
//
// Failure: a lost peer (connection error, silence past PeerTimeout, a broken message, a
// goodbye before its final marker, found here or by another process that reported it
// along the tree, or a connection it refuses) is reported once through Handler.PeerLost; Send to it
// and Barrier then return its *PeerLostError, and FinalBarrier fails. Messages queued to it
// are dropped.
//
// End of a job: every process calls FinalBarrier, then Close, so that no process closes
// while another still needs it.
type Mesh struct {
	rank, size int
	cfg        Config
	log        *slog.Logger
	h          Handler
	peers      []peer
	closing    atomic.Bool        // set under lifeMu
	lifeMu     sync.Mutex         // orders Close with the goroutines and connections that start late
	ctx        context.Context    // cancelled when Close begins: dials and their handshakes
	cancel     context.CancelFunc //
	accepting  context.Context    // cancelled when Close closes the listener: the handshakes it serves
	endAccepts context.CancelFunc //
	up         atomic.Bool        // Start has succeeded: losses are reported to the Handler
	done       chan struct{}      // closed when Close begins
	wg         sync.WaitGroup     // the mesh's goroutines but those of its connections
	conns      sync.WaitGroup     // the readers and writers of its connections (attach)
	closeOnce  sync.Once
	started    time.Time

	// Connections (connect.go): the address book, once it came, and the ranks waiting for
	// one of the dialers, of which at most maxDials run.
	book    atomic.Pointer[[]string]
	dialMu  sync.Mutex
	dialQ   []int
	dialers int
	// srv serves the listener until Close.
	srv atomic.Pointer[http.Server]

	// Barriers (barrier.go) and the job's state as the tree spreads it (tree.go).
	barMu  sync.Mutex
	barSeq uint64        // barMu
	passed atomic.Uint64 // the barriers this process passed, which its goodbye tells
	final  bool          // this process has entered FinalBarrier; barMu
	markMu sync.Mutex
	markCh chan struct{} // closed and renewed on every barrier message, connection, loss
	coll   collective    // markMu

	// The connections through shared memory, in the order they came (a new slice on each,
	// under lifeMu), which Poll reads, what their readers share, and the pollers that Close
	// waits for (shm.go; lifeMu).
	onRings atomic.Pointer[[]*conn]
	readers readerGroup
	pollers []*Poller

	// Liveness: the last beat, when this process last found it had been paused, and for
	// how long; who found this process lost, as a peer told it (lostReport).
	lastBeat  atomic.Int64
	resumedAt atomic.Int64
	pausedFor atomic.Int64
	foundLost atomic.Pointer[string]
}

type peer struct {
	conns [2]atomic.Pointer[conn] // indexed by Role; stored under mu
	// mu guards what follows until err: the messages sent before their connection came,
	// whether this process wants its Requester-role connection to the peer, and whether it
	// has started dialing it (see connect.go).
	mu      sync.Mutex
	pending []pendingMsg
	wanted  bool
	dialed  bool
	// err is set, once, when the peer is lost; its CompareAndSwap from nil decides who
	// reports the loss.
	err atomic.Pointer[PeerLostError]
	// gone is closed when err is set.
	gone chan struct{}
	// final, failed and agreed: the peer's final marker arrived, the tree said that it
	// failed, or its goodbye that its FinalBarrier succeeded; markMu.
	final, failed, agreed bool
	// What the peer said in the barriers (barrier.go); markMu. byeSeq: the barriers it had
	// passed when it said goodbye.
	bar    peerBarrier
	byeSeq atomic.Uint64
	// sent counts the messages the writers of both connections to the peer have written,
	// under the race detector (wrote, heard).
	sent atomic.Uint64
}

// wrote publishes, under the race detector, that the writers to p read n more messages
// (see Send: a happens-before edge that the detector sees). Elsewhere the edge runs through
// the network or the shared-memory ring, and the counter's locked add would cost every
// message for nothing.
func (p *peer) wrote(n int) {
	if raceDetector {
		p.sent.Add(uint64(n))
	}
}

// heard is the other end of wrote: the readers of p's messages call it before Sink and
// Handle.
func (p *peer) heard() {
	if raceDetector {
		p.sent.Load()
	}
}

// now is the mesh's monotonic clock: the time since Start.
func (m *Mesh) now() int64 { return int64(time.Since(m.started)) }

// Start is New followed by Mesh.Start.
func Start(ctx context.Context, cfg Config) (*Mesh, error) {
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// New checks cfg and returns a mesh that is not started: its Send fails until Start has
// made the connections, but the upper layer can hold it before any Handler method runs.
func New(cfg Config) (*Mesh, error) {
	if err := checkConfig(&cfg); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close() // Start owns the listener
		}
		return nil, err
	}
	if cfg.PeerTimeout <= 0 {
		cfg.PeerTimeout = defaultPeerTimeout
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = max(time.Millisecond, min(maxHeartbeat, cfg.PeerTimeout/10))
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Handler == nil {
		cfg.Handler = nopHandler{}
	}
	peers := make([]peer, cfg.Size)
	for i := range peers {
		peers[i].gone = make(chan struct{})
	}
	m := &Mesh{
		rank: cfg.Rank, size: cfg.Size, cfg: cfg,
		log:     cfg.Logger.With("component", "transport", "rank", cfg.Rank),
		h:       cfg.Handler,
		peers:   peers,
		done:    make(chan struct{}),
		started: time.Now(),
		readers: readerGroup{spin: cfg.Spin, idle: cfg.Idle, manySchedulers: cfg.ManySchedulers && !cfg.Oversubscribed},
		coll:    newCollective(),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.accepting, m.endAccepts = context.WithCancel(context.Background())
	if cfg.Oversubscribed {
		m.readers.crowd.pin()
	}
	return m, nil
}

// Start bootstraps the job's mesh (see bootstrap.go): it listens, registers with the
// coordinator (rank 0 checks every process's JobSpec, collects every rank's address and
// hands out the address book), connects every process to its neighbours in the job's tree
// (tree.go) in both directions, authenticating every connection, and returns when those
// connections of every process are up; other pairs connect on their first message
// (connect.go). It fails, naming the rank at fault or the cause, when processes do not
// register (PeerTimeout after the last one that did, StartTimeout when none did), when the
// start does not move for StartTimeout, when one is lost or refuses its neighbours'
// connections, when the processes disagree on the job, at the limit of open files, or when
// ctx ends; the mesh is then closed.
// Handler methods may run before Start returns. ctx bounds the bootstrap only, not the
// mesh's life. With Size == 1 it opens nothing. Start may be called once.
func (m *Mesh) Start(ctx context.Context) error {
	if m.size == 1 {
		if m.cfg.Listener != nil {
			m.cfg.Listener.Close() // a job of one process uses none
		}
		return nil
	}
	if err := m.start(ctx); err != nil {
		m.Close()
		return err
	}
	return nil
}

// checkConfig reports what makes cfg unusable: an invalid rank or, for a job of more than
// one process, a missing secret or coordinator address.
func checkConfig(cfg *Config) error {
	switch {
	case cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size:
		return fmt.Errorf("transport: invalid rank %d of size %d", cfg.Rank, cfg.Size)
	case len(cfg.JobSpec) > maxJobSpec:
		return fmt.Errorf("transport: a job description of %d bytes; at most %d", len(cfg.JobSpec), maxJobSpec)
	case cfg.Size == 1:
		return nil
	case len(cfg.Secret) == 0:
		return errors.New("transport: a job secret is required for a job of more than one process")
	case cfg.Coord == "" && cfg.Rank == 0 && cfg.Listener == nil:
		return errors.New("transport: rank 0 needs Coord or Listener")
	case cfg.Coord == "" && cfg.Rank != 0:
		return errors.New("transport: Coord is required")
	}
	return nil
}

// Rank returns this process's rank.
func (m *Mesh) Rank() int { return m.rank }

// Size returns the number of processes in the job.
func (m *Mesh) Size() int { return m.size }

// SharedMemory reports whether the connection of the given role to rank to is up and
// carries its messages through shared memory (shm.go): the peer runs on this host, as this
// user, in this network namespace, so it may also map this process's shared buffers
// (hugemem.View).
func (m *Mesh) SharedMemory(to int, role Role) bool {
	c, err := m.conn(to, role)
	return err == nil && c != nil && c.shm != nil
}

// Send queues the message (h, payload) to rank to on the connection of the given role and
// returns without waiting for the network. h.Len is set to len(payload); h.Type must be >=
// TypeUser. A payload of any size is streamed in fragments of bounded size, without being
// copied (unmasked, on Owner-role connections) or through a fixed buffer (masked), so the
// caller must not modify it until the peer's answer shows it was received.
//
// Memory model: the write of a message (every read of payload by the mesh) happens before
// the delivery (Sink and Handle) of any message that the peer sent after receiving it, on
// either connection. The causality goes through the network, which the race detector
// cannot see, so under the detector the mesh makes it explicit: the writer publishes a
// per-peer counter (one atomic add per message) once it has read the message, and the
// readers of that peer's messages load it before calling Sink or Handle (peer.wrote, heard).
// A caller that modifies payload once the peer's answer was delivered is therefore
// race-free for the detector too.
//
// Errors: Send fails with a *PeerLostError (errors.Is ErrPeerLost) when to is lost or is
// closing its mesh (its connection was closed or broken by its side), and with ErrClosed
// only after this process's own Close.
func (m *Mesh) Send(to int, role Role, h Header, payload []byte) error {
	return m.sendMsg(to, role, &h, payload, queued, true)
}

// SendNow is Send, except that when the connection is idle (nothing queued, nothing being
// written) and the payload is small (at most 64 KiB), the calling goroutine writes the
// message itself at once, instead of handing it to the connection's writer goroutine: one
// goroutine hand-off less on the way, and the message leaves before the caller goes on. The
// caller may then block until the socket has room. Otherwise the caller yields its processor
// to the writer goroutine once (runtime.Gosched): a task about to call a long kernel in C
// would keep it from the writer until Go's system monitor takes it back, up to 10ms later,
// when each process has one processor. It must not be called from Handler methods: a reader
// blocked on a write could keep the peer's reader blocked in turn.
func (m *Mesh) SendNow(to int, role Role, h Header, payload []byte) error {
	return m.sendMsg(to, role, &h, payload, direct, true)
}

// SendAhead is Send for a message that need not leave before the caller's next message to
// the same rank on the same connection, which the caller promises to send (with Send or
// SendNow): it is queued without waking the connection's writer goroutine, and leaves with
// that next message, in order, or with any message sent on the connection before it. It
// spares a goroutine wake-up when a request and the release that follows it go out together.
// On an idle connection through shared memory, a small message is written into the ring at
// once instead, which never waits (the caller may hold its locks): the peer may read it
// then, and its reader, when it sleeps, is woken by that next message, or by Flush.
func (m *Mesh) SendAhead(to int, role Role, h Header, payload []byte) error {
	return m.sendMsg(to, role, &h, payload, ahead, true)
}

// Flush sends what SendAhead left queued on the connection to rank to of the given role: on
// the calling goroutine, as SendNow does, when now is true and the connection is idle, else
// through the connection's writer. A caller that must order its messages under a lock of
// its own queues them there with SendAhead, and flushes after unlocking.
func (m *Mesh) Flush(to int, role Role, now bool) error {
	c, err := m.conn(to, role)
	if err != nil || c == nil { // what waits for the connection leaves when it comes
		return err
	}
	mode := queued
	if now {
		mode = direct
	}
	return c.flush(mode)
}

// errReserved is the error of a Send of a message of type t, which the mesh reserves.
func errReserved(t uint8) error {
	return fmt.Errorf("transport: Send: message type %d is reserved for the mesh", t)
}

// send sends a message of the mesh itself.
func (m *Mesh) send(to int, role Role, o outMsg, mode sendMode) error {
	return m.sendMsg(to, role, &o.h, o.p, mode, false)
}

// sendMsg sends a message of the upper layer (user), whose type must not be one of the
// mesh's, or of the mesh. The header is passed by reference: it is copied once, into the
// connection's queue, with its Len set to the payload's.
func (m *Mesh) sendMsg(to int, role Role, h *Header, p []byte, mode sendMode, user bool) error {
	if user && h.Type < TypeUser {
		return errReserved(h.Type)
	}
	c, err := m.conn(to, role)
	if err != nil {
		return err
	}
	if c == nil {
		o := outMsg{h: *h, p: p}
		o.h.Len = uint64(len(p))
		if c = m.pend(to, role, o); c == nil {
			return nil
		}
	}
	return c.enqueueMsg(h, p, mode)
}

// pendingMsg is a message sent before its connection came.
type pendingMsg struct {
	role Role
	o    outMsg
}

// pend queues o for the connection of role to rank to, which is not up, and asks for the
// connection (connect.go); when the connection came meanwhile, it returns it instead.
func (m *Mesh) pend(to int, role Role, o outMsg) *conn {
	p := &m.peers[to]
	p.mu.Lock()
	if c := p.conns[role].Load(); c != nil {
		p.mu.Unlock()
		return c
	}
	p.pending = append(p.pending, pendingMsg{role, o})
	p.mu.Unlock()
	m.connect(to)
	return nil
}

// conn returns the connection to rank to of the given role, nil when it is not up yet, or
// why a message cannot be sent to to (badPeer says which).
func (m *Mesh) conn(to int, role Role) (*conn, error) {
	if uint(to) >= uint(len(m.peers)) || to == m.rank || role > Owner {
		return nil, m.badPeer(to, role)
	}
	p := &m.peers[to]
	if e := p.err.Load(); e != nil {
		return nil, e
	}
	if m.closing.Load() {
		return nil, ErrClosed
	}
	return p.conns[role].Load(), nil
}

// badPeer is conn's error for a rank that is not a peer, or an invalid role.
func (m *Mesh) badPeer(to int, role Role) error {
	if to < 0 || to >= m.size || to == m.rank {
		return fmt.Errorf("transport: Send: rank %d is not a peer of rank %d (size %d)", to, m.rank, m.size)
	}
	return fmt.Errorf("transport: Send: invalid role %d", role)
}

// attach starts the reader and writer of an authenticated connection, the messages sent
// to its peer with its role before it came first. It refuses (closes) a second connection
// of the same rank and role, any of a rank that is lost (but for one that closed its mesh,
// whose last connection may come after the news), and any once Close has begun.
func (m *Mesh) attach(rank int, role Role, w *wire) bool {
	c := newConn(m, rank, role, w)
	p := &m.peers[rank]
	m.lifeMu.Lock() // Close says goodbye on every connection attached before it began
	p.mu.Lock()
	ok := !m.closing.Load() && p.conns[role].Load() == nil
	if e := p.err.Load(); e != nil && !errors.Is(e, ErrPeerClosed) {
		ok = false // a process that closed its mesh says goodbye on it, after its last messages
	}
	queued := false
	if ok {
		kept := p.pending[:0]
		for _, pm := range p.pending {
			if pm.role == role {
				c.q = append(c.q, pm.o)
				c.qBytes += len(pm.o.p)
			} else {
				kept = append(kept, pm)
			}
		}
		clear(p.pending[len(kept):])
		p.pending = kept
		queued = len(c.q) > 0
		p.conns[role].Store(c)
		if c.shm != nil {
			var conns []*conn
			if old := m.onRings.Load(); old != nil {
				conns = *old
			}
			conns = append(conns[:len(conns):len(conns)], c)
			m.onRings.Store(&conns)
		}
		m.conns.Add(2)
	}
	closing := m.closing.Load()
	p.mu.Unlock()
	m.lifeMu.Unlock()
	if !ok {
		if closing { // the peer may have attached its end: it gets this process's goodbye
			w.nc.SetWriteDeadline(time.Now().Add(closeWait))
			if w.writeMsg(m.byeHeader(), nil) == nil {
				w.writeClose(closeNormal)
				w.flush()
			}
		}
		w.nc.Close()
		return false
	}
	if c.shm == nil {
		m.readers.sockets.Add(1) // for good: its reader always waits on the socket
	}
	go c.readLoop()
	go c.writeLoop()
	if queued {
		c.notify()
	}
	m.markMu.Lock()
	m.wakeBarrier() // Connect and the start wait for connections
	m.markMu.Unlock()
	return true
}

// Receiving reports whether a message's payload is arriving from a peer now (the header
// has come, and the message is not complete yet): data is moving towards this process, a
// large transfer over a slow link perhaps, even though nothing has been delivered for a
// while.
func (m *Mesh) Receiving() bool {
	for i := range m.peers {
		for r := range m.peers[i].conns {
			if c := m.peers[i].conns[r].Load(); c != nil && c.receiving.Load() {
				return true
			}
		}
	}
	return false
}

// Close says goodbye to every peer, closes every connection and the listener, and waits for
// all goroutines of the mesh. Messages sent before Close are written first, those that wait
// for their connection's dial included, within a short grace period. Until the connections
// are closed, a process that dials this one is answered that its mesh closes. No Handler
// method runs after Close returns. Close must not be called from a Handler method.
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() {
		m.awaitDials()
		m.lifeMu.Lock()
		m.closing.Store(true) // attach refuses connections from now on
		m.lifeMu.Unlock()
		m.cancel()
		close(m.done)
		m.eachConn((*conn).goodbye)
		for j := range m.peers {
			if j != m.rank && m.goneQuiet(j) { // no goodbye to wait for, once ours is out
				for i := range m.peers[j].conns {
					if c := m.peers[j].conns[i].Load(); c != nil {
						c.endQuiet()
					}
				}
			}
		}
		t := time.AfterFunc(closeWait, func() { m.eachConn((*conn).shutdown) })
		m.conns.Wait()
		t.Stop()
		// Until now, a dial was answered that this process closes its mesh; a refused one
		// would say that it may have died, and comes once its connections ended (a peer
		// that dials back then has had its goodbye). A handshake under way goes on, to a
		// connection refused with a goodbye (attach), for closeWait at most: a silent
		// client does not hold Close.
		if srv := m.srv.Load(); srv != nil {
			srv.Close()
		}
		cut := time.AfterFunc(closeWait, m.endAccepts)
		m.wg.Wait()
		cut.Stop()
		m.endAccepts()
		m.lifeMu.Lock()
		pollers := m.pollers
		m.lifeMu.Unlock()
		for _, p := range pollers { // a task's Poll is done with the segments, and none starts
			for p.polling.Load() {
				runtime.Gosched()
			}
		}
		m.eachConn(func(c *conn) {
			if c.shm != nil {
				c.shm.release()
			} else {
				c.w.nc.Close()
			}
		})
	})
	return nil
}

// eachConn calls f for every attached connection of the mesh.
func (m *Mesh) eachConn(f func(*conn)) {
	for j := range m.peers {
		for i := range m.peers[j].conns {
			if c := m.peers[j].conns[i].Load(); c != nil {
				f(c)
			}
		}
	}
}

// nopHandler discards everything (Config.Handler == nil).
type nopHandler struct{}

func (nopHandler) Sink(int, *Header) ([]byte, error) { return nil, nil }
func (nopHandler) Handle(int, *Header, []byte)       {}
func (nopHandler) PeerLost(int, error)               {}
