package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The start of a mesh. Rank 0 is the coordinator. Every process listens (rank 0 at Coord,
// the others on an ephemeral port) and serves websockets at wsPath. Every other rank dials
// the coordinator on a control connection, registers its listen address and JobSpec, and
// keeps the control connection open: both ends send heartbeats on it and read it with the
// peer timeout as deadline, so a process that dies or stops during the start is found
// within PeerTimeout, by rank. Rank 0 checks every JobSpec against its own and, when every
// rank has registered, sends every rank the address book. Every process then connects to its
// neighbours in the job's tree (tree.go: its parent and children, both connections with
// each: the connection it dials is its Requester-role one, the one it accepts its
// Owner-role one), and, once those are up, tells rank 0 it is Ready. When every process is
// ready, rank 0 sends Start, and the control connections close. The listeners stay open
// for the mesh's life: every other pair connects on first Send (connect.go). A failure
// anywhere goes to rank 0 as Abort with its reason, and rank 0 sends it on to every
// process, so every one fails with the same reason.
//
// What to do at each event of the start is decided by the state machines of startfsm.go
// (coordinator, joiner), which do no I/O; this file is their driver: listener, control
// connections, dials, timers.

// bootstrap is the state of a mesh's start, dropped when Start returns.
type bootstrap struct {
	m        *Mesh
	ln       net.Listener
	srv      *http.Server
	lnCtx    context.Context // cancelled when the start is over
	lnCancel context.CancelFunc
	events   chan bootEvent // what the control connections bring
	done     chan struct{}  // closed when the start is over
	tasks    sync.WaitGroup // handlers and control readers

	mu       sync.Mutex
	closed   bool
	controls []*control // every open control connection

	// full is closed when the listener could not accept for the limit of open files,
	// fullErr (set before) saying so: the start fails, naming it.
	full     chan struct{}
	fullOnce sync.Once
	fullErr  error
}

// bootEvent is what a control connection brought: an input of the start's machine, and
// the connection it came on.
type bootEvent struct {
	startInput
	ctl *control
}

// control is one control connection of the start; its writes come from several
// goroutines.
type control struct {
	rank int // the process at the other end
	w    *wire
	mu   sync.Mutex
}

// send writes one control message.
func (c *control) send(typ uint8, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w.nc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	return c.w.writeMsg(Header{Type: typ}, payload)
}

// maxControl is the largest payload of a control message.
func (m *Mesh) maxControl() int { return m.size*(maxAddrLen+2) + maxJobSpec + 2 }

// start runs the start of the mesh; on error the caller closes the mesh. ctx cancels it; the
// start's machines judge its progress against StartTimeout (startfsm.go).
func (m *Mesh) start(ctx context.Context) error {
	b, err := m.listen()
	if err != nil {
		return err
	}
	m.wg.Add(1)
	go m.heartbeatLoop()
	if m.rank == 0 {
		err = b.coordinate(ctx)
	} else {
		err = b.join(ctx)
	}
	b.close()
	if err != nil {
		return err
	}
	m.up.Store(true)
	for j := range m.peers { // a loss before up was not reported: it fails the start
		if e := m.peers[j].err.Load(); e != nil {
			return fmt.Errorf("transport: rank %d: the start failed: %w", m.rank, e)
		}
	}
	m.log.Debug("mesh up", "size", m.size, "elapsed", time.Since(m.started))
	return nil
}

// listen opens the listener and serves websockets on it until the start is over.
func (m *Mesh) listen() (*bootstrap, error) {
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
		return nil, fmt.Errorf("transport: rank %d: listen: %w", m.rank, err)
	}
	b := &bootstrap{m: m, ln: ln, events: make(chan bootEvent), done: make(chan struct{}), full: make(chan struct{})}
	b.lnCtx, b.lnCancel = context.WithCancel(context.Background())
	b.srv = &http.Server{
		Handler:           http.HandlerFunc(b.serveHTTP),
		ReadHeaderTimeout: handshakeTimeout,
		IdleTimeout:       handshakeTimeout,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
	m.srv.Store(b.srv) // closed by Close: the mesh accepts connections for its whole life
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		b.srv.Serve(limitListener(ln, maxPreauth, b.acceptFailed))
	}()
	return b, nil
}

// close ends the start: the control connections close, and every goroutine of the start is
// waited for. The listener stays open until the mesh closes, for the connections made on
// first Send (connect.go); the coordinator answers a registration that comes later that the
// job's start is over, so that a process pointed at this job learns it at once.
func (b *bootstrap) close() {
	close(b.done)
	b.mu.Lock()
	b.closed = true
	controls := b.controls
	b.controls = nil
	b.mu.Unlock()
	b.lnCancel()
	for _, c := range controls {
		c.w.nc.Close()
	}
	b.tasks.Wait()
}

// acceptFailed takes an error of the listener's Accept, which the server tries again: the
// limit of open files fails the start (see full).
func (b *bootstrap) acceptFailed(err error) {
	if tooManyFiles(err) {
		b.fullOnce.Do(func() {
			b.fullErr = fmt.Errorf("transport: rank %d: accepting a connection: %w", b.m.rank, fdLimitError(b.m.size, err))
			close(b.full)
		})
		b.m.markMu.Lock()
		b.m.wakeBarrier() // connect waits
		b.m.markMu.Unlock()
	}
}

// post hands ev to the start's loop; false once the start is over.
func (b *bootstrap) post(ev bootEvent) bool {
	select {
	case b.events <- ev:
		return true
	case <-b.done:
		return false
	}
}

// keep records an open control connection, to be closed at the end; false once the start
// is over.
func (b *bootstrap) keep(c *control) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.controls = append(b.controls, c)
	return true
}

// readControl reads c until it breaks, posting what it brings. Its read deadline is the
// peer timeout, renewed by every message: heartbeats keep a live process's control
// connection busy.
func (b *bootstrap) readControl(c *control) {
	defer b.tasks.Done()
	m := b.m
	for {
		c.w.nc.SetReadDeadline(time.Now().Add(m.cfg.PeerTimeout))
		h, p, err := c.w.readAny(m.maxControl())
		ev := bootEvent{startInput: startInput{rank: c.rank}, ctl: c}
		switch {
		case err != nil:
			ev.kind, ev.err = inLost, err
		case h.Type == TypeHeartbeat:
			continue
		case h.Type == TypeReady:
			ev.kind = inReady
		case h.Type == TypeStart:
			ev.kind = inStart
		case h.Type == TypeAbort:
			ev.kind, ev.err = inAbort, errors.New(string(p))
		case h.Type == TypeAddrBook:
			ev.kind = inBook
			if ev.book, err = decodeStrings(p, m.size); err != nil {
				ev.kind, ev.err = inLost, fmt.Errorf("a malformed address book: %w", err)
			}
		default:
			ev.kind, ev.err = inLost, fmt.Errorf("%w: control message type %d", ErrUnknownType, h.Type)
		}
		if !b.post(ev) || ev.kind == inLost {
			return
		}
	}
}

// startConfig is what the start's machines know of the job.
func (b *bootstrap) startConfig() startConfig {
	m := b.m
	return startConfig{rank: m.rank, size: m.size, spec: m.cfg.JobSpec, coord: m.cfg.Coord,
		peerTimeout: m.cfg.PeerTimeout, startTimeout: m.cfg.StartTimeout}
}

// timeoutInput is the end of the start's time, ctx's.
func timeoutInput(ctx context.Context) startInput {
	return startInput{kind: inTimeout, err: context.Cause(ctx), deadline: errors.Is(ctx.Err(), context.DeadlineExceeded)}
}

// machine is the start's state machine: a coordinator or a joiner (startfsm.go).
type machine interface {
	step(in startInput) []startAction
}

// perform does the actions acts of machine s with do, until actDone; a checked send that
// fails (do returns its error) goes back to s, whose answer replaces the actions left. It
// returns whether the start is over, and then its error.
func perform(s machine, acts []startAction, do func(startAction) error) (bool, error) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		if a.kind == actDone {
			return true, a.err
		}
		if err := do(a); err != nil {
			acts = s.step(startInput{kind: inSendFailed, rank: a.rank, typ: a.typ, err: err})
		}
	}
	return false, nil
}

// coordinate is rank 0's start: the driver of a coordinator, which decides.
func (b *bootstrap) coordinate(ctx context.Context) error {
	m := b.m
	s := newCoordinator(b.startConfig())
	ctls := make([]*control, m.size) // by rank, as registered
	var connected chan error         // rank 0's own connections, once the book is sent
	var from *control                // the connection of the event being handled
	do := func(a startAction) error {
		switch a.kind {
		case actSend:
			if err := ctls[a.rank].send(a.typ, a.payload); a.checked {
				return err
			}
		case actRefuse:
			m.log.Warn("refused registration: rank already registered", "peer", a.rank)
			from.send(TypeAbort, []byte(a.err.Error()))
			from.w.nc.Close()
		case actConnect:
			connected = b.connectAsync(a.book)
		case actLogWait:
			m.log.Info("waiting for ranks to register with the coordinator", "ranks", a.ranks, "coordinator", m.cfg.Coord)
		}
		return nil
	}
	full := b.full // rank 0's own failure to accept; its connections' are connect's
	tick := time.NewTicker(m.cfg.Heartbeat)
	defer tick.Stop()
	for {
		var in startInput
		select {
		case ev := <-b.events:
			in, from = ev.startInput, ev.ctl
			if ev.kind == inRegister && ctls[ev.rank] == nil {
				ctls[ev.rank] = ev.ctl
			} else if ev.kind != inRegister && ctls[ev.rank] != ev.ctl {
				continue // the connection of a refused registration
			}
		case err := <-connected:
			connected, in = nil, startInput{kind: inConnected, err: err}
		case <-full:
			full, in = nil, startInput{kind: inAbort, rank: 0, err: b.fullErr}
		case <-tick.C:
			in = startInput{kind: inTick, elapsed: time.Since(m.started)}
		case <-ctx.Done():
			in = timeoutInput(ctx)
		}
		if over, err := perform(s, s.step(in), do); over {
			return err
		}
	}
}

// join is the start of a rank other than 0: the driver of a joiner, which decides.
func (b *bootstrap) join(ctx context.Context) error {
	m := b.m
	s := newJoiner(b.startConfig())
	var c *control
	var connected chan error
	do := func(a startAction) error {
		switch a.kind {
		case actSend:
			if err := c.send(a.typ, a.payload); a.checked {
				return err
			}
		case actConnect:
			connected = b.connectAsync(a.book)
		}
		return nil
	}
	// Registering waits for a coordinator that is not listening yet for the start timeout, and
	// a peer timeout more, so that when the start times out the coordinator's report of why
	// (the ranks that did not register) reaches this process first.
	dctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout+m.cfg.PeerTimeout)
	defer cancel()
	w, err := m.dial(dctx, m.cfg.Coord, 0, purposeRegister)
	in := startInput{kind: inDialFailed, err: err}
	switch {
	case err != nil && dctx.Err() != nil:
		in = timeoutInput(dctx)
	case err == nil:
		c = &control{rank: 0, w: w}
		if !b.keep(c) {
			w.nc.Close()
			return ErrClosed
		}
		in = startInput{kind: inDialed, addr: b.advertised(w)}
	}
	if over, err := perform(s, s.step(in), do); over {
		return err
	}
	b.tasks.Add(1)
	go b.readControl(c)
	tick := time.NewTicker(m.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev := <-b.events:
			in = ev.startInput
		case err := <-connected:
			connected, in = nil, startInput{kind: inConnected, err: err}
		case <-tick.C:
			in = startInput{kind: inTick, elapsed: time.Since(m.started)}
		case <-ctx.Done():
			in = timeoutInput(ctx)
		}
		if over, err := perform(s, s.step(in), do); over {
			return err
		}
	}
}

// advertised is the address this process tells the others to dial: its listener's, with
// the address the coordinator connection w leaves from when it listens on every interface.
func (b *bootstrap) advertised(w *wire) string {
	la := b.ln.Addr().(*net.TCPAddr)
	host := la.IP.String()
	if la.IP.IsUnspecified() {
		if tcp, ok := w.nc.LocalAddr().(*net.TCPAddr); ok {
			host = tcp.IP.String()
		}
	}
	return net.JoinHostPort(host, fmt.Sprint(la.Port))
}

// connectAsync runs connect in a goroutine of the start and delivers its result.
func (b *bootstrap) connectAsync(book []string) chan error {
	done := make(chan error, 1)
	b.tasks.Add(1)
	go func() {
		defer b.tasks.Done()
		done <- b.connect(book)
	}()
	return done
}

// connect records the address book, connects this process to its neighbours in the
// job's tree (both connections with each: see tree.go), and waits until those are up; the
// other pairs connect when they first exchange a message (connect.go). It fails at once at
// the limit of open files (a dial's or the listener's). A neighbour that dies or stops, or
// fails to start, is the coordinator's to report (its control connection, its Abort), which
// ends the start on every process with the same reason: a neighbour lost here fails this
// process's start only when that report has not come a peer timeout later. connect also
// fails when the start ends meanwhile.
func (b *bootstrap) connect(book []string) error {
	m := b.m
	tree := m.treeNeighbours()
	for _, j := range tree {
		m.connect(j)
	}
	m.setBook(book)
	var lostAt time.Time // when a neighbour was found lost
	err := m.awaitMarks(b.lnCtx, func() (bool, error) {
		select {
		case <-b.full:
			return false, b.fullErr
		default:
		}
		up := true
		for _, j := range tree {
			p := &m.peers[j]
			if e := p.err.Load(); e != nil {
				if tooManyFiles(e) || !lostAt.IsZero() && time.Since(lostAt) >= m.cfg.PeerTimeout {
					return false, fmt.Errorf("process rank %d lost during the start: %w", j, e.Err)
				}
				if lostAt.IsZero() {
					lostAt = time.Now()
					time.AfterFunc(m.cfg.PeerTimeout, func() {
						m.markMu.Lock()
						m.wakeBarrier()
						m.markMu.Unlock()
					})
				}
			}
			up = up && p.conns[Requester].Load() != nil && p.conns[Owner].Load() != nil
		}
		return up, nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled): // the start is over
		return missingError(b.startConfig(), tree, func(j int) bool { return m.peers[j].conns[Owner].Load() != nil })
	}
	return fmt.Errorf("transport: rank %d: connecting the mesh: %w", m.rank, err)
}

var upgrader = websocket.Upgrader{
	HandshakeTimeout: handshakeTimeout,
	CheckOrigin:      func(*http.Request) bool { return true }, // not a browser endpoint; the secret authenticates
}

// serveHTTP accepts one websocket, authenticates it, and makes it a control connection
// (rank 0) or a mesh connection.
func (b *bootstrap) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	m := b.m
	rw.Header().Set("Connection", "close") // an error answer ends its connection
	if !m.track() {
		bye := m.byeHeader() // what its goodbye says
		rw.Header().Set(passedHeader, strconv.FormatUint(bye.Seq, 10))
		if bye.Flags&byeAgreed != 0 {
			rw.Header().Set(agreedHeader, "true")
		}
		http.Error(rw, closingMesh, http.StatusGone)
		return
	}
	defer m.wg.Done()
	b.mu.Lock()
	starting := !b.closed
	if starting { // what the start's goroutines do for it is waited for at its end
		b.tasks.Add(1)
		defer b.tasks.Done()
	}
	b.mu.Unlock()
	if !starting && r.Header.Get(purposeHeader) == "register" {
		http.Error(rw, startOver, http.StatusGone)
		return
	}
	if r.URL.Path != wsPath {
		http.NotFound(rw, r)
		return
	}
	ws, err := upgrader.Upgrade(rw, r, nil)
	if err != nil {
		m.log.Warn("refused connection: not a websocket upgrade", "remote", r.RemoteAddr, "err", err)
		return
	}
	// From here on the mesh frames the connection itself (see wire).
	w := newWire(ws.NetConn(), false)
	// Close closes the socket, not w.nc: shmAnswer may replace w.nc meanwhile.
	sock := w.nc
	stop := context.AfterFunc(m.accepting, func() { sock.Close() })
	rank, purpose, err := m.serverAuth(w, time.Now().Add(handshakeTimeout))
	if err != nil {
		stop()
		if m.closing.Load() { // cut by Close (m.accepting), not refused
			m.log.Debug("a connection's handshake ended with the mesh", "remote", r.RemoteAddr, "err", err)
		} else if errors.Is(err, ErrAuth) {
			m.log.Warn("refused connection", "remote", r.RemoteAddr, "err", err)
		} else {
			m.log.Info("a connection's handshake timed out; its client tries again", "remote", r.RemoteAddr, "err", err)
		}
		endHandshake(w, err)
		return
	}
	authenticated(w.nc)
	switch purpose {
	case purposeRegister:
		b.register(w, rank)
		stop()
	case purposeMesh:
		err := m.shmAnswer(w)
		if !stop() || err != nil {
			w.nc.Close()
			return
		}
		if !m.attach(rank, Owner, w) {
			m.log.Warn("refused connection: a second connection from rank, or from a rank lost", "remote", r.RemoteAddr, "peer", rank)
			return
		}
		m.connect(rank) // dial back: a pair that is connected has both connections
	}
}

// register reads the registration of rank on its control connection w, at rank 0, and hands
// the connection to the start's loop.
func (b *bootstrap) register(w *wire, rank int) {
	m := b.m
	w.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	_, p, err := w.readMsg(TypeRegister, maxAddrLen+maxJobSpec+4)
	var strs []string
	if err == nil {
		strs, err = decodeStrings(p, 2)
	}
	if err == nil {
		if _, _, err = net.SplitHostPort(strs[0]); err != nil {
			err = fmt.Errorf("bad address %q", strs[0])
		}
	}
	c := &control{rank: rank, w: w}
	if err != nil || !b.keep(c) {
		if err != nil {
			m.log.Warn("refused registration", "peer", rank, "err", err)
		}
		w.nc.Close()
		return
	}
	if !b.post(bootEvent{startInput: startInput{kind: inRegister, rank: rank, addr: strs[0], spec: strs[1]}, ctl: c}) {
		return
	}
	b.tasks.Add(1)
	go b.readControl(c)
}

// encodeStrings encodes strs as length-prefixed strings (the address book, a registration).
func encodeStrings(strs []string) []byte {
	var b []byte
	for _, s := range strs {
		b = append(b, byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s)))
		b = append(b, s...)
	}
	return b
}

// decodeStrings decodes exactly n strings encoded by encodeStrings.
func decodeStrings(p []byte, n int) ([]string, error) {
	strs := make([]string, 0, n)
	for len(p) >= 4 && len(strs) < n {
		k := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
		p = p[4:]
		if k > len(p) {
			break
		}
		strs = append(strs, string(p[:k]))
		p = p[k:]
	}
	if len(strs) != n || len(p) != 0 {
		return nil, fmt.Errorf("malformed: want %d strings", n)
	}
	return strs, nil
}

// limitListener accepts at most max connections at a time that have not authenticated
// (see authenticated); it closes the others at once, so that a flood of connections costs
// the job a bounded amount of memory and the peers' dials, which retry, still get through.
// failed sees every error of Accept.
func limitListener(ln net.Listener, max int, failed func(error)) net.Listener {
	return &limited{Listener: ln, slots: make(chan struct{}, max), failed: failed}
}

type limited struct {
	net.Listener
	slots  chan struct{}
	failed func(error)
}

func (l *limited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.failed(err)
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &preauthConn{Conn: c, slots: l.slots}, nil
		default:
			c.Close()
		}
	}
}

// preauthConn holds a slot of its limitListener until it authenticates or closes.
type preauthConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

func (c *preauthConn) free()        { c.once.Do(func() { <-c.slots }) }
func (c *preauthConn) Close() error { c.free(); return c.Conn.Close() }

// authenticated frees the limitListener slot of nc, which proved it knows the secret.
func authenticated(nc net.Conn) {
	if c, ok := nc.(*preauthConn); ok {
		c.free()
	}
}
