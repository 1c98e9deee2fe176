package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Role says which of the two connections of a pair of processes a message
// travels on. Requester-role messages (requests, releases, write-back data)
// go on the connection the sender dialed; Owner-role messages (grants with
// the location's data) go on the connection the sender accepted, so that
// they are not masked.
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

// Handler receives what arrives on a Mesh. Its methods are called on the
// reader goroutine of a connection (PeerLost possibly on the heartbeat or a
// writer goroutine); they may call Mesh.Send but must not call Mesh.Close,
// Mesh.Barrier or Mesh.FinalBarrier, and should return quickly: while one
// runs, the connection it was called for reads nothing.
type Handler interface {
	// Sink returns the buffer the payload of the frame h is read into; its
	// length must be at least h.Len (only the first h.Len bytes are
	// written). It lets payloads land in their final place (a mirror)
	// without intermediate copies. Returning nil makes the mesh read the
	// payload into a per-connection scratch buffer that is valid only
	// during the following Handle call. h is valid only during the call.
	// Sink is called only for frames that passed every check (size,
	// truncation, trailing bytes: the websocket frame length is known up
	// front), so a rejected frame never touches a sink; only a connection
	// that breaks mid-payload (the peer is then lost) leaves it partly
	// written.
	Sink(from int, h *Header) []byte
	// Handle delivers a complete frame of a type >= TypeUser. Frames of one
	// connection are delivered in arrival order, one at a time. h is valid
	// only during the call; payload is the sink's first h.Len bytes (or
	// scratch memory valid only during the call).
	Handle(from int, h *Header, payload []byte)
	// FrameError reports a rejected frame (a *FrameError); the frame was
	// discarded and the connection goes on.
	FrameError(from int, err error)
	// PeerLost reports that rank is gone: heartbeat timeout, connection
	// loss, or a clean Close on its side (err wraps ErrPeerClosed then;
	// the mesh logs it at Debug level, other losses at Error level).
	// err is a *PeerLostError. It is called at most once per peer, and not
	// at all once Close has begun.
	PeerLost(rank int, err error)
}

// Errors of the mesh.
var (
	// ErrPeerLost is matched (errors.Is) by every *PeerLostError.
	ErrPeerLost = errors.New("transport: peer lost")
	// ErrPeerClosed is the cause in a PeerLostError when the peer closed its
	// mesh cleanly (it sent a goodbye) rather than failed.
	ErrPeerClosed = errors.New("peer closed its mesh")
	// ErrClosed is returned by operations on a Mesh after its own Close
	// (never because of what a peer did).
	ErrClosed = errors.New("transport: mesh closed")
	// ErrPeerFinished is wrapped by the error of a Barrier that a peer
	// will never reach because it has entered FinalBarrier.
	ErrPeerFinished = errors.New("transport: peer has entered its final barrier")
	// ErrAuth is wrapped by handshake failures (wrong or missing secret).
	ErrAuth = errors.New("transport: authentication failed")
)

// PeerLostError says which rank was lost and why. errors.Is(err, ErrPeerLost)
// holds for it.
type PeerLostError struct {
	Rank int
	Err  error
}

// Error names the lost rank and the cause.
func (e *PeerLostError) Error() string {
	return fmt.Sprintf("transport: peer rank %d lost: %v", e.Rank, e.Err)
}

// Unwrap returns the cause.
func (e *PeerLostError) Unwrap() error { return e.Err }

// Is reports whether target is ErrPeerLost.
func (e *PeerLostError) Is(target error) bool { return target == ErrPeerLost }

// Config configures Start. Rank and Size are required; for Size > 1 so
// are Secret and Coord (rank 0 may give Listener instead); the rest has
// defaults.
type Config struct {
	Rank, Size int
	// Coord is rank 0's coordinator address (host:port). Rank 0 listens
	// there unless Listener is set; the others dial it.
	Coord string
	// Listener, when set, is an already open listener Start uses and
	// takes ownership of: rank 0's coordinator socket (for example
	// inherited from orwlrun through jobenv.Job.CoordListener), or another
	// rank's own listening socket instead of ListenHost:0.
	Listener net.Listener
	// ListenHost is the host ranks other than 0 listen on (ephemeral port).
	// Default 127.0.0.1. An unspecified address (0.0.0.0, ::) listens on
	// every interface and advertises the address the coordinator connection
	// leaves from.
	ListenHost string
	// Secret is the job secret every connection proves knowledge of.
	Secret []byte
	// MaxFrame is the largest payload accepted or sent. Default 64 MiB.
	MaxFrame int
	// Heartbeat is the heartbeat period (default 500ms); PeerTimeout the
	// silence after which a peer is lost (default 3s).
	Heartbeat, PeerTimeout time.Duration
	// StartTimeout bounds the bootstrap in addition to Start's ctx
	// (default 60s).
	StartTimeout time.Duration
	// Handler receives frames and events; nil discards everything.
	Handler Handler
	// Logger receives refused connections, rejected frames and lost peers;
	// default slog.Default().
	Logger *slog.Logger
}

const (
	defaultMaxFrame     = 64 << 20
	handshakeTimeout    = 10 * time.Second
	closeWait           = time.Second
	wsPath              = "/orwl/v1"
	bufSize             = 64 << 10
	purposeRegister     = 1
	purposeMesh         = 2
	maxAddrLen          = 1024
	initialDialBackoff  = 5 * time.Millisecond
	maximumDialBackoff  = 250 * time.Millisecond
	defaultHeartbeat    = 500 * time.Millisecond
	defaultPeerTimeout  = 3 * time.Second
	defaultStartTimeout = 60 * time.Second
)

// Mesh is the set of connections of one process to all other processes of
// the job.
//
// Concurrency: Send may be called from any number of goroutines at once,
// including from Handler methods; it never blocks on the network (messages
// are queued, without limit, to the connection's single writer goroutine,
// so the upper layer's protocol must bound what it has in flight). Barrier
// and FinalBarrier may be called by one goroutine at a time (concurrent
// calls are serialised) and not from Handler methods. Close may be called
// from any goroutine except Handler methods, more than once; after it
// returns no Handler method runs any more. Handler methods of one connection run one
// at a time on its reader goroutine; those of different connections run
// concurrently.
//
// Ordering: frames sent to one peer with one Role arrive in the order Send
// was called (one connection, FIFO); frames sent with different roles are
// not ordered with respect to each other.
//
// Failure: a lost peer (connection error, heartbeat timeout, goodbye) is
// reported once through Handler.PeerLost; Send to it and Barrier then
// return its *PeerLostError, and FinalBarrier no longer waits for it.
// Frames queued to it are dropped.
//
// End of a job: every process calls FinalBarrier, then Close, so that no
// process closes while another still needs it, even when the job failed
// because a process died.
type Mesh struct {
	rank, size int
	cfg        Config
	log        *slog.Logger
	h          Handler
	peers      []peer
	closing    atomic.Bool
	done       chan struct{} // closed when Close begins
	wg         sync.WaitGroup
	closeOnce  sync.Once

	// listener and bootstrap state
	mu         sync.Mutex
	srv        *http.Server
	lnCtx      context.Context // cancelled when the listener is closed
	lnCancel   context.CancelFunc
	handlers   sync.WaitGroup
	lnClosed   bool
	accepted   int
	allIn      chan struct{} // closed when Size-1 connections were accepted
	regs       []*wire
	regAddrs   []string
	registered int
	book       chan []string // rank 0: the address book once complete

	// barrier
	barMu   sync.Mutex
	barSeq  uint64
	markMu  sync.Mutex
	marks   []uint64      // the last barrier marker of each peer; markMu
	markCh  chan struct{} // closed and renewed on every marker, final or loss
	final   bool          // this process has sent its final marker; barMu
	started time.Time
}

type peer struct {
	conns [2]atomic.Pointer[conn] // indexed by Role
	// err is set, once, when the peer is lost; its CompareAndSwap from nil
	// decides who reports the loss.
	err atomic.Pointer[PeerLostError]
	// final: the peer has entered FinalBarrier (its final marker arrived);
	// markMu.
	final bool
	// sent counts the messages the writers of both connections to the
	// peer have written; readers of the peer's frames load it before
	// Sink and Handle (see Send: a happens-before edge the race detector
	// sees).
	sent atomic.Uint64
}

// Start bootstraps the job's mesh: it listens, registers with the
// coordinator (rank 0 collects every rank's address and hands out the address
// book), connects to every other process in both directions, authenticating
// every connection, and returns when all 2*(Size-1) connections are up. On
// timeout (ctx or Config.StartTimeout) it returns an error naming the ranks
// that are missing. ctx bounds the bootstrap only, not the mesh's life.
// With Size == 1 it opens nothing.
func Start(ctx context.Context, cfg Config) (*Mesh, error) {
	if err := checkConfig(&cfg); err != nil || cfg.Size == 1 {
		// Start owns the listener, and a job of one process uses none.
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		if err != nil {
			return nil, err
		}
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = defaultMaxFrame
	}
	if cfg.MaxFrame > 1<<32-1 {
		cfg.MaxFrame = 1<<32 - 1
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = defaultHeartbeat
	}
	if cfg.PeerTimeout <= 0 {
		cfg.PeerTimeout = defaultPeerTimeout
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
	m := &Mesh{
		rank: cfg.Rank, size: cfg.Size, cfg: cfg,
		log:     cfg.Logger.With("component", "transport", "rank", cfg.Rank),
		h:       cfg.Handler,
		peers:   make([]peer, cfg.Size),
		done:    make(chan struct{}),
		allIn:   make(chan struct{}),
		marks:   make([]uint64, cfg.Size),
		book:    make(chan []string, 1),
		started: time.Now(),
	}
	if cfg.Size == 1 {
		return m, nil
	}
	if err := m.start(ctx); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// checkConfig reports what makes cfg unusable: an invalid rank or, for a job
// of more than one process, a missing secret or coordinator address.
func checkConfig(cfg *Config) error {
	switch {
	case cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size:
		return fmt.Errorf("transport: invalid rank %d of size %d", cfg.Rank, cfg.Size)
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

func (m *Mesh) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()

	var ln net.Listener
	var err error
	switch {
	case m.cfg.Listener != nil:
		ln = m.cfg.Listener
	case m.rank == 0:
		ln, err = net.Listen("tcp", m.cfg.Coord)
	default:
		ln, err = net.Listen("tcp", net.JoinHostPort(m.cfg.ListenHost, "0"))
	}
	if err != nil {
		return fmt.Errorf("transport: rank %d: listen: %w", m.rank, err)
	}
	if m.rank == 0 {
		m.regs = make([]*wire, m.size)
		m.regAddrs = make([]string, m.size)
	}
	m.lnCtx, m.lnCancel = context.WithCancel(context.Background())
	m.srv = &http.Server{
		Handler:           http.HandlerFunc(m.serveHTTP),
		ReadHeaderTimeout: handshakeTimeout,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.srv.Serve(ln)
	}()
	m.wg.Add(1)
	go m.heartbeatLoop()

	// Register with the coordinator and get the address book.
	var book []string
	if m.rank == 0 {
		select {
		case book = <-m.book:
		case <-ctx.Done():
			return m.startError(ctx, "waiting for registrations")
		}
	} else {
		book, err = m.register(ctx, ln.Addr().(*net.TCPAddr))
		if err != nil {
			return err
		}
	}

	// Dial every peer; the accepting side is handled by serveHTTP.
	errs := make([]error, m.size)
	var dials sync.WaitGroup
	for j := 0; j < m.size; j++ {
		if j == m.rank {
			continue
		}
		addr := book[j]
		if j == 0 {
			addr = m.cfg.Coord
		}
		dials.Add(1)
		go func() {
			defer dials.Done()
			w, err := m.dial(ctx, addr, j, purposeMesh)
			if err != nil {
				errs[j] = err
				return
			}
			m.attach(j, Requester, w)
		}()
	}
	dials.Wait()
	if err := errors.Join(errs...); err != nil && ctx.Err() == nil {
		return err
	}
	select {
	case <-m.allIn:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return m.startError(ctx, "connecting the mesh")
	}
	m.closeListener()
	m.log.Debug("mesh up", "size", m.size, "elapsed", time.Since(m.started))
	return nil
}

// startError names the ranks whose registration or connections are missing.
func (m *Mesh) startError(ctx context.Context, phase string) error {
	var unreg, noDial, noAccept []int
	m.mu.Lock()
	defer m.mu.Unlock()
	for j := 0; j < m.size; j++ {
		if j == m.rank {
			continue
		}
		if m.regAddrs != nil && m.regAddrs[j] == "" {
			unreg = append(unreg, j)
		}
		if m.peers[j].conns[Requester].Load() == nil {
			noDial = append(noDial, j)
		}
		if m.peers[j].conns[Owner].Load() == nil {
			noAccept = append(noAccept, j)
		}
	}
	msg := fmt.Sprintf("transport: rank %d: bootstrap failed while %s: %v", m.rank, phase, context.Cause(ctx))
	if len(unreg) > 0 {
		msg += fmt.Sprintf("; ranks %v did not register with the coordinator", unreg)
	}
	if len(noDial) > 0 {
		msg += fmt.Sprintf("; no connection to ranks %v", noDial)
	}
	if len(noAccept) > 0 {
		msg += fmt.Sprintf("; no connection from ranks %v", noAccept)
	}
	return errors.New(msg)
}

// register sends this rank's address to the coordinator and waits for the
// address book.
func (m *Mesh) register(ctx context.Context, la *net.TCPAddr) ([]string, error) {
	w, err := m.dial(ctx, m.cfg.Coord, 0, purposeRegister)
	if err != nil {
		return nil, fmt.Errorf("transport: rank %d: registering with coordinator %s: %w", m.rank, m.cfg.Coord, err)
	}
	defer w.nc.Close()
	stop := context.AfterFunc(ctx, func() { w.nc.Close() })
	defer stop()
	host := la.IP.String()
	if la.IP.IsUnspecified() {
		if tcp, ok := w.nc.LocalAddr().(*net.TCPAddr); ok {
			host = tcp.IP.String()
		}
	}
	addr := net.JoinHostPort(host, fmt.Sprint(la.Port))
	if err := w.writeMsg(Header{Type: TypeRegister, Arg: int64(m.rank)}, []byte(addr)); err != nil {
		return nil, fmt.Errorf("transport: rank %d: registering: %w", m.rank, err)
	}
	_, p, err := w.readMsg(TypeAddrBook, m.size*(maxAddrLen+2))
	if err != nil {
		if ctx.Err() != nil {
			return nil, m.startError(ctx, "waiting for the address book")
		}
		return nil, fmt.Errorf("transport: rank %d: reading the address book: %w", m.rank, err)
	}
	book, err := decodeBook(p, m.size)
	if err != nil {
		return nil, fmt.Errorf("transport: rank %d: %w", m.rank, err)
	}
	return book, nil
}

func encodeBook(addrs []string) []byte {
	var b []byte
	for _, a := range addrs {
		b = append(b, byte(len(a)>>8), byte(len(a)))
		b = append(b, a...)
	}
	return b
}

func decodeBook(p []byte, size int) ([]string, error) {
	book := make([]string, 0, size)
	for len(p) >= 2 {
		n := int(p[0])<<8 | int(p[1])
		p = p[2:]
		if n > len(p) {
			break
		}
		book = append(book, string(p[:n]))
		p = p[n:]
	}
	if len(book) != size || len(p) != 0 {
		return nil, errors.New("malformed address book")
	}
	return book, nil
}

// dial connects to addr, retrying until ctx ends, and authenticates as the
// client of serverRank.
func (m *Mesh) dial(ctx context.Context, addr string, serverRank int, purpose uint8) (*wire, error) {
	d := websocket.Dialer{HandshakeTimeout: handshakeTimeout}
	backoff := initialDialBackoff
	var last error
	for {
		ws, _, err := d.DialContext(ctx, "ws://"+addr+wsPath, nil)
		if err == nil {
			// From here on the mesh frames the connection itself (see wire).
			w := newWire(ws.NetConn(), true)
			deadline, _ := ctx.Deadline()
			err = m.clientAuth(deadline, w, serverRank, purpose)
			if err == nil {
				return w, nil
			}
			w.nc.Close()
			if errors.Is(err, ErrAuth) {
				return nil, err
			}
		}
		last = err
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("transport: rank %d: dialing rank %d at %s: %w (last error: %v)", m.rank, serverRank, addr, context.Cause(ctx), last)
		case <-m.done:
			t.Stop()
			return nil, ErrClosed
		case <-t.C:
		}
		backoff = min(2*backoff, maximumDialBackoff)
	}
}

var upgrader = websocket.Upgrader{
	HandshakeTimeout: handshakeTimeout,
	CheckOrigin:      func(*http.Request) bool { return true }, // not a browser endpoint; the secret authenticates
}

// serveHTTP accepts one websocket, authenticates it and attaches it.
func (m *Mesh) serveHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	if m.lnClosed {
		m.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	m.handlers.Add(1)
	m.mu.Unlock()
	defer m.handlers.Done()
	if r.URL.Path != wsPath {
		http.NotFound(w, r)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		m.log.Warn("refused connection: not a websocket upgrade", "remote", r.RemoteAddr, "err", err)
		return
	}
	// From here on the mesh frames the connection itself (see wire).
	wc := newWire(ws.NetConn(), false)
	stop := context.AfterFunc(m.lnCtx, func() { wc.nc.Close() })
	rank, purpose, err := m.serverAuth(wc)
	if err != nil {
		stop()
		m.log.Warn("refused connection", "remote", r.RemoteAddr, "err", err)
		wc.nc.SetWriteDeadline(time.Now().Add(time.Second))
		wc.writeFrame(opClose, nil, closePolicyViolation)
		wc.flush()
		wc.nc.Close()
		return
	}
	switch purpose {
	case purposeRegister:
		ok := m.acceptRegistration(wc, rank)
		stop()
		if !ok {
			wc.nc.Close()
		}
	case purposeMesh:
		if !stop() {
			wc.nc.Close()
			return
		}
		if !m.attach(rank, Owner, wc) {
			m.log.Warn("refused connection: duplicate connection from rank", "remote", r.RemoteAddr, "peer", rank)
		}
	}
}

// acceptRegistration records rank's address at the coordinator and, when all
// ranks are in, sends the address book to all.
func (m *Mesh) acceptRegistration(w *wire, rank int) bool {
	w.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	_, p, err := w.readMsg(TypeRegister, maxAddrLen)
	if err != nil {
		m.log.Warn("refused registration", "peer", rank, "err", err)
		return false
	}
	addr := string(p)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		m.log.Warn("refused registration: bad address", "peer", rank, "addr", addr)
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.regAddrs[rank] != "" {
		m.log.Warn("refused registration: rank already registered", "peer", rank)
		return false
	}
	m.regs[rank], m.regAddrs[rank] = w, addr
	m.registered++
	if m.registered < m.size-1 {
		return true
	}
	book := slices.Clone(m.regAddrs)
	book[0] = m.cfg.Coord
	msg := encodeBook(book)
	for j, c := range m.regs {
		if c == nil {
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		if err := c.writeMsg(Header{Type: TypeAddrBook}, msg); err != nil {
			m.log.Warn("sending the address book failed", "peer", j, "err", err)
		}
		c.nc.Close()
		m.regs[j] = nil
	}
	m.book <- book
	return true
}

// attach starts the reader and writer of an authenticated connection. It
// refuses (closes) a second connection of the same rank and role.
func (m *Mesh) attach(rank int, role Role, w *wire) bool {
	c := &conn{m: m, peer: rank, role: role, w: w, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	c.lastRecv.Store(int64(time.Since(m.started)))
	m.mu.Lock()
	if m.closing.Load() || m.peers[rank].conns[role].Load() != nil {
		m.mu.Unlock()
		w.nc.Close()
		return false
	}
	m.peers[rank].conns[role].Store(c)
	if role == Owner {
		m.accepted++
		if m.accepted == m.size-1 {
			close(m.allIn)
		}
	}
	m.wg.Add(2)
	m.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
	return true
}

func (m *Mesh) closeListener() {
	m.mu.Lock()
	if m.lnClosed || m.srv == nil {
		m.mu.Unlock()
		return
	}
	m.lnClosed = true
	m.mu.Unlock()
	m.lnCancel()
	m.srv.Close()
	m.handlers.Wait()
	m.mu.Lock()
	for j, c := range m.regs {
		if c != nil {
			c.nc.Close()
			m.regs[j] = nil
		}
	}
	m.mu.Unlock()
}

// Rank returns this process's rank.
func (m *Mesh) Rank() int { return m.rank }

// Size returns the number of processes in the job.
func (m *Mesh) Size() int { return m.size }

// Send queues the frame (h, payload) to rank to on the connection of the
// given role and returns without waiting for the network. h.Len is set to
// len(payload); h.Type must be >= TypeUser. The payload is written without
// copying, so the caller must not modify it until the peer's answer shows it
// was received.
//
// Memory model: the write of a message (every read of payload by the mesh)
// happens before the delivery (Sink and Handle) of any frame that the peer
// sent after receiving it, on either connection. The causality goes
// through the network, which the race detector cannot see, so the mesh
// makes it explicit: the writer publishes a per-peer counter (one atomic
// add per message) once it has read the message, and the readers of that
// peer's frames load it before calling Sink or Handle. A caller that
// modifies payload once the peer's answer was delivered is therefore
// race-free for the detector too.
//
// Errors: Send fails with a *PeerLostError (errors.Is ErrPeerLost) when to
// is lost or is closing its mesh (its connection was closed or broken by its
// side), with ErrClosed only after this process's own Close, and with
// ErrFrameTooLarge above MaxFrame.
func (m *Mesh) Send(to int, role Role, h Header, payload []byte) error {
	if h.Type < TypeUser {
		return fmt.Errorf("transport: Send: message type %d is reserved for the mesh", h.Type)
	}
	if len(payload) > m.cfg.MaxFrame {
		return fmt.Errorf("transport: Send: %w: %d bytes > %d", ErrFrameTooLarge, len(payload), m.cfg.MaxFrame)
	}
	h.Len = uint32(len(payload))
	return m.send(to, role, outMsg{h: h, p: payload})
}

func (m *Mesh) send(to int, role Role, o outMsg) error {
	if to < 0 || to >= m.size || to == m.rank {
		return fmt.Errorf("transport: Send: rank %d is not a peer of rank %d (size %d)", to, m.rank, m.size)
	}
	if role > Owner {
		return fmt.Errorf("transport: Send: invalid role %d", role)
	}
	p := &m.peers[to]
	if e := p.err.Load(); e != nil {
		return e
	}
	if m.closing.Load() {
		return ErrClosed
	}
	c := p.conns[role].Load()
	if c == nil {
		return fmt.Errorf("transport: Send: no %s connection to rank %d yet", role, to)
	}
	return c.enqueue(o)
}

// Barrier returns when every process of the job has called Barrier as many
// times as this one. Each process sends a numbered marker to every peer on
// its Requester-role connection and waits for the markers of all peers;
// since connections are FIFO, when Barrier returns every Requester-role
// message sent by any process before its Barrier call has been handed to
// Handle here (Owner-role messages are not ordered by it). Every process
// must take part: a lost peer makes Barrier fail with its *PeerLostError,
// a peer that entered FinalBarrier instead makes it fail with an error
// wrapping ErrPeerFinished, and ctx cancellation returns ctx.Err(); after
// any of these the job's barriers are out of step and the job should end
// (with FinalBarrier and Close). Barrier fails after FinalBarrier.
func (m *Mesh) Barrier(ctx context.Context) error {
	m.barMu.Lock()
	defer m.barMu.Unlock()
	if m.size == 1 {
		return nil
	}
	if m.closing.Load() {
		return ErrClosed
	}
	if m.final {
		return errors.New("transport: Barrier after FinalBarrier")
	}
	m.barSeq++
	seq := m.barSeq
	if err := m.broadcastMarker(TypeBarrier, seq); err != nil {
		return err
	}
	return m.awaitMarks(ctx, func() (bool, error) {
		waiting := false
		for j := 0; j < m.size; j++ {
			if j == m.rank || m.marks[j] >= seq {
				continue
			}
			waiting = true
			if e := m.peers[j].err.Load(); e != nil {
				return false, fmt.Errorf("transport: barrier %d: %w", seq, e)
			}
			if m.peers[j].final {
				// Its markers are all in (they precede the final one).
				return false, fmt.Errorf("transport: barrier %d: rank %d: %w", seq, j, ErrPeerFinished)
			}
		}
		return !waiting, nil
	})
}

// FinalBarrier is the barrier at the end of a job, among the survivors: it
// tells every peer that this process has finished (a final marker, sent
// once, on the Requester-role connection) and returns when every peer that
// is not lost has entered FinalBarrier too. Lost peers (including peers
// that closed their mesh) are skipped, not errors: their loss is reported
// through Handler.PeerLost. So a process whose job failed, because a peer
// died, say, waits for the other survivors to finish before it closes its
// mesh, and they do not see it leave early.
//
// When it returns nil, every Requester-role message that a peer still in the
// job sent before its FinalBarrier call has been handed to Handle here (as
// for Barrier); lost peers are not waited for. After it, Send and Handler
// go on as before, Barrier fails, a second FinalBarrier waits for the same
// condition without telling the peers again, and the process should Close. A peer still waiting
// in a Barrier that this process will not reach gets an error wrapping
// ErrPeerFinished from it, so it can go on to its own FinalBarrier.
//
// It fails only with ctx.Err() when ctx ends first (the others are then
// left waiting until this process closes or is lost), or ErrClosed after
// Close. With Size 1 it returns nil at once.
func (m *Mesh) FinalBarrier(ctx context.Context) error {
	m.barMu.Lock()
	defer m.barMu.Unlock()
	if m.size == 1 {
		return nil
	}
	if m.closing.Load() {
		return ErrClosed
	}
	if !m.final {
		m.final = true
		if err := m.broadcastMarker(TypeFinal, m.barSeq); err != nil {
			return err
		}
	}
	return m.awaitMarks(ctx, func() (bool, error) {
		for j := 0; j < m.size; j++ {
			p := &m.peers[j]
			if j != m.rank && !p.final && p.err.Load() == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// broadcastMarker sends a barrier marker of type typ, numbered seq, to every peer on the
// Requester-role connection. A peer that is lost is left to the wait that follows: it may
// have delivered its own marker already.
func (m *Mesh) broadcastMarker(typ uint8, seq uint64) error {
	for j := 0; j < m.size; j++ {
		if j == m.rank {
			continue
		}
		if err := m.send(j, Requester, outMsg{h: Header{Type: typ, Version: seq}}); err != nil && !errors.Is(err, ErrPeerLost) {
			return err
		}
	}
	return nil
}

// awaitMarks waits until check, called with markMu held at first and again whenever a
// marker arrives or a peer is lost, reports done or fails; or ctx ends, or Close.
func (m *Mesh) awaitMarks(ctx context.Context, check func() (done bool, err error)) error {
	for {
		m.markMu.Lock()
		done, err := check()
		if done || err != nil {
			m.markMu.Unlock()
			return err
		}
		if m.markCh == nil {
			m.markCh = make(chan struct{})
		}
		ch := m.markCh
		m.markMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return ErrClosed
		}
	}
}

func (m *Mesh) wakeBarrier() {
	if m.markCh != nil {
		close(m.markCh)
		m.markCh = nil
	}
}

func (m *Mesh) mark(from int, seq uint64) {
	m.markMu.Lock()
	if seq > m.marks[from] {
		m.marks[from] = seq
	}
	m.wakeBarrier()
	m.markMu.Unlock()
}

// markFinal records that from has entered FinalBarrier.
func (m *Mesh) markFinal(from int) {
	m.markMu.Lock()
	m.peers[from].final = true
	m.wakeBarrier()
	m.markMu.Unlock()
}

// lose marks rank lost, closes its connections and reports it once.
func (m *Mesh) lose(rank int, cause error) {
	p := &m.peers[rank]
	e := &PeerLostError{Rank: rank, Err: cause}
	if !p.err.CompareAndSwap(nil, e) {
		return
	}
	if !errors.Is(cause, ErrPeerClosed) {
		for i := range p.conns {
			if c := p.conns[i].Load(); c != nil {
				c.shutdown()
			}
		}
	}
	m.markMu.Lock()
	m.wakeBarrier()
	m.markMu.Unlock()
	if m.closing.Load() {
		return
	}
	if errors.Is(cause, ErrPeerClosed) {
		m.log.Debug("peer closed its mesh", "peer", rank)
	} else {
		m.log.Error("peer lost", "peer", rank, "err", cause)
	}
	m.h.PeerLost(rank, e)
}

func (m *Mesh) heartbeatLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	hb := outMsg{h: Header{Type: TypeHeartbeat}}
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		now := int64(time.Since(m.started))
		for j := range m.peers {
			p := &m.peers[j]
			if j == m.rank || p.err.Load() != nil {
				continue
			}
			for i := range p.conns {
				c := p.conns[i].Load()
				if c == nil {
					continue
				}
				if silent := time.Duration(now - c.lastRecv.Load()); silent > m.cfg.PeerTimeout {
					m.lose(j, fmt.Errorf("no message on the %s connection for %v (heartbeat timeout %v)", c.role, silent.Round(time.Millisecond), m.cfg.PeerTimeout))
					break
				}
				c.enqueue(hb)
			}
		}
	}
}

// Close says goodbye to every peer, closes every connection and the
// listener, and waits for all goroutines of the mesh. Messages queued before
// Close are written first, within a short grace period. No Handler method
// runs after Close returns. Close must not be called from a Handler method.
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closing.Store(true)
		m.mu.Unlock()
		close(m.done)
		m.closeListener()
		m.eachConn((*conn).goodbye)
		t := time.AfterFunc(closeWait, func() { m.eachConn((*conn).shutdown) })
		m.wg.Wait()
		t.Stop()
		m.eachConn(func(c *conn) { c.w.nc.Close() })
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

func (nopHandler) Sink(int, *Header) []byte    { return nil }
func (nopHandler) Handle(int, *Header, []byte) {}
func (nopHandler) FrameError(int, error)       {}
func (nopHandler) PeerLost(int, error)         {}

// outMsg is one queued frame. raw frames (tests only) are written as is.
type outMsg struct {
	h   Header
	p   []byte
	raw bool
}

// conn is one authenticated websocket to a peer, with its writer queue.
type conn struct {
	m    *Mesh
	peer int
	role Role  // the role of the messages this process sends on it
	w    *wire // written only by the writer goroutine, read only by the reader

	mu      sync.Mutex
	q       []outMsg
	spare   []outMsg
	closing bool // goodbye queued; no more messages
	wake    chan struct{}
	stop    chan struct{}
	stopped atomic.Bool
	bye     atomic.Bool // the peer said goodbye on this connection

	lastRecv atomic.Int64 // time.Since(m.started) at the last frame received

	wbuf    [HeaderSize]byte    // writer's header buffer
	rbuf    [MaxHeaderSize]byte // reader's header buffer
	rh      Header              // reader's current header
	scratch []byte              // reader's payload buffer when Sink returns nil
}

func (c *conn) enqueue(o outMsg) error {
	c.mu.Lock()
	if c.closing || c.stopped.Load() {
		c.mu.Unlock()
		return c.gone()
	}
	c.q = append(c.q, o)
	c.mu.Unlock()
	c.notify()
	return nil
}

// notify wakes the writer, unless a wake-up is pending already.
func (c *conn) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// gone is the error of a Send on a connection that takes no more messages:
// the peer's loss, or ErrClosed after this process's own Close, or else the
// peer is closing its mesh: it said goodbye and closed this connection, but
// its goodbye on the other one (which makes it lost) has not been read yet.
func (c *conn) gone() error {
	if e := c.m.peers[c.peer].err.Load(); e != nil {
		return e
	}
	if c.m.closing.Load() {
		return ErrClosed
	}
	return &PeerLostError{Rank: c.peer, Err: ErrPeerClosed}
}

// goodbye queues TypeBye and lets the writer finish with a close frame.
func (c *conn) goodbye() {
	c.mu.Lock()
	if !c.closing {
		c.q = append(c.q, outMsg{h: Header{Type: TypeBye}})
		c.closing = true
	}
	c.mu.Unlock()
	c.notify()
}

// shutdown stops the writer and closes the socket, which ends the reader.
func (c *conn) shutdown() {
	if c.stopped.CompareAndSwap(false, true) {
		close(c.stop)
		c.w.nc.Close()
	}
}

func (c *conn) writeLoop() {
	defer c.m.wg.Done()
	w := c.w
	sent := &c.m.peers[c.peer].sent
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		c.mu.Lock()
		batch := c.q
		c.q = c.spare[:0]
		c.spare = nil
		closing := c.closing
		c.mu.Unlock()
		var err error
		for i := range batch {
			o := &batch[i]
			if o.raw {
				err = w.writeFrame(opBinary, nil, o.p)
			} else {
				err = w.writeFrame(opBinary, &o.h, o.p)
			}
			if err != nil {
				break
			}
			// The payload was read (copied into the output buffer, whose
			// last bytes are not sent yet, or written out): publish it
			// for the readers of the peer's answers (see Send).
			sent.Add(1)
		}
		if err == nil {
			err = w.flush()
		}
		if err != nil {
			c.fail("writing to", err)
			c.shutdown()
			return
		}
		clear(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		empty := len(c.q) == 0
		c.mu.Unlock()
		if closing && empty {
			// Everything including the goodbye is out: close this direction.
			if w.writeFrame(opClose, nil, closeNormal) == nil && w.flush() == nil {
				if tc, ok := w.nc.(interface{ CloseWrite() error }); ok {
					tc.CloseWrite()
				}
			}
			return
		}
	}
}

var (
	closeNormal          = []byte{0x03, 0xe8} // status 1000
	closePolicyViolation = []byte{0x03, 0xf0} // status 1008
)

// readLoop reads frames until the connection ends.
func (c *conn) readLoop() {
	m := c.m
	w := c.w
	defer m.wg.Done()
	defer c.shutdown()
	fail := func(err error) { c.fail("reading", err) }
	for {
		f, err := w.readWSHeader()
		if err != nil {
			fail(err)
			return
		}
		c.lastRecv.Store(int64(time.Since(m.started)))
		switch f.op {
		case opBinary:
		case opClose:
			if !c.bye.Load() {
				fail(errors.New("closed by the peer without a goodbye"))
			}
			return
		case opPing, opPong:
			if err := c.discard(f.n); err != nil {
				fail(err)
				return
			}
			continue
		default:
			c.reject(ErrNotBinary, false)
			if err := c.discard(f.n); err != nil {
				fail(err)
				return
			}
			continue
		}
		k := int(min(f.n, MaxHeaderSize))
		pos, err := w.read(&f, 0, c.rbuf[:k])
		if err != nil {
			fail(err)
			return
		}
		rest := f.n - int64(k)
		var hn int
		c.rh, hn, err = DecodeHeader(c.rbuf[:k])
		h := &c.rh
		var reason error
		switch {
		case err != nil:
			c.reject(err, false)
		case int64(h.Len) > int64(m.cfg.MaxFrame):
			reason = fmt.Errorf("%w: %d bytes announced, maximum %d", ErrFrameTooLarge, h.Len, m.cfg.MaxFrame)
		case int64(h.Len) > f.n-int64(hn):
			reason = fmt.Errorf("%w: %d of %d payload bytes", ErrFrameTruncated, f.n-int64(hn), h.Len)
		case int64(h.Len) < f.n-int64(hn):
			reason = fmt.Errorf("%w: %d payload bytes, header announces %d", ErrTrailingBytes, f.n-int64(hn), h.Len)
		case h.Type < TypeUser && h.Len != 0:
			reason = fmt.Errorf("%w: mesh message type %d with a payload", ErrTrailingBytes, h.Type)
		case h.Type < TypeUser:
			c.meshFrame(h)
		}
		if reason != nil {
			c.reject(reason, true)
		}
		if err != nil || reason != nil || h.Type < TypeUser {
			if err := c.discard(rest); err != nil {
				fail(err)
				return
			}
			continue
		}
		// Everything this process wrote to the peer before the peer sent
		// this frame happens before its delivery (see Send).
		m.peers[c.peer].sent.Load()
		var buf []byte
		if h.Len > 0 {
			buf = m.h.Sink(c.peer, h)
			if buf == nil {
				if cap(c.scratch) < int(h.Len) {
					c.scratch = make([]byte, h.Len)
				}
				buf = c.scratch
			} else if len(buf) < int(h.Len) {
				c.reject(fmt.Errorf("%w: %d < %d", ErrSinkSize, len(buf), h.Len), true)
				if err := c.discard(rest); err != nil {
					fail(err)
					return
				}
				continue
			}
			buf = buf[:h.Len]
			n := copy(buf, c.rbuf[hn:k])
			if _, err := w.read(&f, pos, buf[n:]); err != nil {
				fail(err)
				return
			}
		}
		m.h.Handle(c.peer, h, buf)
	}
}

// fail reports the peer lost because the connection broke while doing what
// ("reading", "writing to"), unless the end was expected: this connection was
// shut down, this mesh is closing, or the peer said goodbye on it (the
// other connection's goodbye, or its heartbeat, then decides).
func (c *conn) fail(what string, err error) {
	if !c.stopped.Load() && !c.m.closing.Load() && !c.bye.Load() {
		c.m.lose(c.peer, fmt.Errorf("%s the %s connection: %w", what, c.role, err))
	}
}

// discard skips n bytes of the current frame.
func (c *conn) discard(n int64) error {
	for n > 0 {
		k := int(min(n, 1<<30))
		d, err := c.w.br.Discard(k)
		n -= int64(d)
		if err != nil {
			return unexpected(err)
		}
	}
	return nil
}

// meshFrame handles a frame of a mesh type with no payload.
func (c *conn) meshFrame(h *Header) {
	switch h.Type {
	case TypeHeartbeat:
	case TypeBarrier:
		c.m.mark(c.peer, h.Version)
	case TypeFinal:
		c.m.markFinal(c.peer)
	case TypeBye:
		// The peer is gone once both its connections said goodbye: what
		// it sent before (a barrier marker, say) is delivered by then.
		c.bye.Store(true)
		if other := c.m.peers[c.peer].conns[1-c.role].Load(); other != nil && other.bye.Load() {
			c.m.lose(c.peer, ErrPeerClosed)
		}
	default:
		c.reject(fmt.Errorf("%w: %d", ErrUnknownType, h.Type), true)
	}
}

func (c *conn) reject(err error, hasHeader bool) {
	fe := &FrameError{Rank: c.peer, Err: err, HasHeader: hasHeader}
	if hasHeader {
		fe.Header = c.rh
	}
	c.m.log.Warn("rejected frame", "peer", c.peer, "conn", c.role, "err", fe)
	c.m.h.FrameError(c.peer, fe)
}
