package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// Connections where they are needed. The start connects each process to its neighbours in
// the job's tree only (see tree.go); any other pair of processes connects when one of them
// first sends to the other. A Send to a rank without a connection of its role queues the
// message in the peer's pending list and asks for the connection (connect): this process
// dials the peer (its Requester-role connection), and the peer, when it accepts, dials
// back (its own Requester-role connection, this process's Owner-role one), so that a pair
// that is connected has both connections, as every pair had before. When a connection is
// attached, the messages pending for its role go first, in order. Two processes that dial
// each other at once make the same two connections: one dial per direction, whichever
// comes first. The listeners stay open for the mesh's life, and during Close until its
// connections are closed: a dial then is answered that the mesh closes.

// purposeHeader names a registration in the websocket request, so that the coordinator
// answers one that comes after the start with startOver before its handshake, while it
// keeps accepting the mesh's connections.
const purposeHeader = "Orwl-Purpose"

// passedHeader and agreedHeader carry, in the answer of a process whose Close has begun,
// what its goodbye says: the number of barriers it passed (TypeBye's Seq) and, when its
// FinalBarrier succeeded, "true" (byeAgreed).
const (
	passedHeader = "Orwl-Passed"
	agreedHeader = "Orwl-Agreed"
)

// awaitDials waits, for the peer timeout at most, until no dial of this process is under
// way and no message waits for its connection: each dial has attached its connection or
// lost its peer, and each message is on its connection's queue, which Close writes before
// its goodbye, or was dropped with its lost peer. Close calls it first: a dial that it cut
// after the peer had accepted it would leave the peer a connection broken without a
// goodbye, from a process it would then take for lost, and lose the messages it carried (a
// job's failure, passed on to a neighbour in the tree).
func (m *Mesh) awaitDials() {
	if !m.up.Load() {
		return // no dial before the address book
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.PeerTimeout) // a live peer answers within it
	defer cancel()
	m.awaitMarks(ctx, func() (bool, error) { // attach and lose wake it
		for j := range m.peers {
			p := &m.peers[j]
			p.mu.Lock()
			dialing := p.dialed && p.conns[Requester].Load() == nil && p.err.Load() == nil
			waiting := dialing || len(p.pending) > 0
			p.mu.Unlock()
			if waiting {
				return false, nil
			}
		}
		return true, nil
	})
}

// track counts a goroutine of the mesh that Close waits for, unless Close has begun.
func (m *Mesh) track() bool {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closing.Load() {
		return false
	}
	m.wg.Add(1)
	return true
}

// connect asks for this process's Requester-role connection to rank j: it dials j unless
// it does or did already, or will once the address book comes.
func (m *Mesh) connect(j int) {
	p := &m.peers[j]
	p.mu.Lock()
	p.wanted = true
	start := !p.dialed && m.book.Load() != nil
	p.dialed = p.dialed || start
	p.mu.Unlock()
	if start {
		m.dialAsync(j)
	}
}

// setBook records the address book and dials the peers wanted before it came.
func (m *Mesh) setBook(book []string) {
	m.book.Store(&book)
	for j := range m.peers {
		p := &m.peers[j]
		p.mu.Lock()
		start := p.wanted && !p.dialed
		p.dialed = p.dialed || start
		p.mu.Unlock()
		if start {
			m.dialAsync(j)
		}
	}
}

// dialAsync queues rank j for a dialer of the mesh, starting one when fewer than maxDials
// run; a dial that fails loses j (during the start, the start then fails naming it).
func (m *Mesh) dialAsync(j int) {
	m.dialMu.Lock()
	m.dialQ = append(m.dialQ, j)
	start := m.dialers < maxDials
	if start {
		m.dialers++
	}
	m.dialMu.Unlock()
	if !start {
		return
	}
	if !m.track() {
		m.dialMu.Lock()
		m.dialers--
		m.dialMu.Unlock()
		return
	}
	go func() {
		defer m.wg.Done()
		for j, ok := m.nextDial(); ok; j, ok = m.nextDial() {
			if err := m.dialPeer(j); err != nil && !errors.Is(err, ErrClosed) {
				m.lose(j, err)
			}
		}
	}()
}

// nextDial takes the queued rank that comes first after this process's, round the ranks
// (so that the processes of a job that all want the same peers do not all dial the same one
// first), or reports that none is queued, or the mesh closes: the dialer then ends.
func (m *Mesh) nextDial() (int, bool) {
	m.dialMu.Lock()
	defer m.dialMu.Unlock()
	if len(m.dialQ) == 0 || m.closing.Load() {
		m.dialers--
		return 0, false
	}
	after := func(j int) int { return (j - m.rank + m.size) % m.size }
	first := 0
	for i, j := range m.dialQ {
		if after(j) < after(m.dialQ[first]) {
			first = i
		}
	}
	j := m.dialQ[first]
	m.dialQ = slices.Delete(m.dialQ, first, first+1)
	return j, true
}

// dialPeer dials rank j at its address in the book and attaches the connection as this
// process's Requester-role one, offering shared memory. It gives up when the mesh closes,
// when j is lost meanwhile, when j refuses connections (its listener is closed: it has
// closed its mesh or died), or after the start timeout without a connection.
func (m *Mesh) dialPeer(j int) error {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.StartTimeout)
	defer cancel()
	go func() { // j lost meanwhile: the dial is pointless
		select {
		case <-m.peers[j].gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	addr := (*m.book.Load())[j]
	w, err := m.dial(ctx, addr, j, purposeMesh)
	if err == nil {
		// Like the dial's handshake, the offer ends when j is lost or the mesh closes.
		sock := w.nc // shmOffer may replace w.nc
		stop := context.AfterFunc(ctx, func() { sock.Close() })
		err = m.shmOffer(w)
		if !stop() { // closed under it
			err = fmt.Errorf("transport: rank %d: connecting to rank %d: %w", m.rank, j, context.Cause(ctx))
			if m.closing.Load() {
				err = ErrClosed
			}
		}
		if err != nil {
			w.nc.Close()
		}
	}
	if err == nil && !m.attach(j, Requester, w) {
		err = ErrClosed // attach refuses a second connection only when the mesh closes or j is lost
	}
	return err
}

// Connect makes sure this process is connected with every rank of ranks (both connections
// of each pair), dialing those it is not connected with yet, and waits until they are, so
// that the first messages to them do not wait for a connection: an upper layer that knows
// its peers (the owners of the locations its tasks use) may call it once it does. It fails
// with the *PeerLostError of a rank lost meanwhile, ctx's error, or ErrClosed. Connections
// are made on first Send anyway; Connect only makes them earlier, concurrently.
func (m *Mesh) Connect(ctx context.Context, ranks []int) error {
	for _, j := range ranks {
		if j < 0 || j >= m.size {
			return fmt.Errorf("transport: Connect: rank %d is not in the job (size %d)", j, m.size)
		}
		if j != m.rank {
			m.connect(j)
		}
	}
	return m.awaitMarks(ctx, func() (bool, error) {
		for _, j := range ranks {
			if j == m.rank {
				continue
			}
			p := &m.peers[j]
			if e := p.err.Load(); e != nil {
				return false, e
			}
			if p.conns[Requester].Load() == nil || p.conns[Owner].Load() == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// Connected returns the number of peers this process has a connection with, in either
// direction: the size of its part of the mesh.
func (m *Mesh) Connected() int {
	n := 0
	for j := range m.peers {
		if m.peers[j].conns[Requester].Load() != nil || m.peers[j].conns[Owner].Load() != nil {
			n++
		}
	}
	return n
}

// dial connects to addr, retrying until ctx ends, and authenticates as the client of
// serverRank. A process that is not listening yet (a refused connection, a name not known
// yet) is waited for when registering (the coordinator may not listen yet), and so is a
// handshake whose time ended at the server (a busy one); a coordinator that does not
// answer at all for PeerTimeout (a partition, a stopped process) fails the dial, and so do
// a coordinator that answers that its job's start is over, a refused handshake, the limit
// of open files, and a peer of the mesh that refuses connections or answers that it is
// closing its mesh (ErrPeerClosed): every process listens from before it registers until
// it closes its mesh, so the peer has closed it or died.
func (m *Mesh) dial(ctx context.Context, addr string, serverRank int, purpose uint8) (*wire, error) {
	d := websocket.Dialer{HandshakeTimeout: handshakeTimeout}
	var hdr http.Header
	if purpose == purposeRegister {
		hdr = http.Header{purposeHeader: {"register"}}
	}
	backoff := initialDialBackoff
	var last error
	var silentSince time.Time // since when every attempt met silence
	for {
		tried := time.Now()
		attempt, cancel := context.WithTimeout(ctx, m.cfg.PeerTimeout)
		ws, resp, err := d.DialContext(attempt, "ws://"+addr+wsPath, hdr)
		cancel()
		if tooManyFiles(err) { // waiting frees none
			return nil, fmt.Errorf("transport: rank %d: dialing rank %d at %s: %w", m.rank, serverRank, addr, fdLimitError(m.size, err))
		}
		if err != nil && ctx.Err() == nil {
			if refusal := answered(resp); refusal == closingMesh {
				if passed, err := strconv.ParseUint(resp.Header.Get(passedHeader), 10, 64); err == nil {
					m.farewell(serverRank, passed, resp.Header.Get(agreedHeader) == "true")
				}
				return nil, fmt.Errorf("%w: rank %d at %s answers: %s", ErrPeerClosed, serverRank, addr, refusal)
			} else if refusal != "" {
				return nil, fmt.Errorf("transport: rank %d: rank %d at %s answers: %s", m.rank, serverRank, addr, refusal)
			}
			if purpose == purposeMesh && errors.Is(err, syscall.ECONNREFUSED) {
				if c := m.peers[serverRank].conns[Owner].Load(); c != nil && c.bye.Load() {
					// It said goodbye on its own connection first: it closed its mesh.
					return nil, fmt.Errorf("%w: rank %d at %s said goodbye, and refuses connections", ErrPeerClosed, serverRank, addr)
				}
				return nil, fmt.Errorf("transport: rank %d: rank %d at %s refuses connections: it has closed its mesh or died (%v)", m.rank, serverRank, addr, err)
			}
			if !silence(err) {
				silentSince = time.Time{}
			} else if silentSince.IsZero() {
				silentSince = tried
			}
			if purpose == purposeRegister && !silentSince.IsZero() && time.Since(silentSince) >= m.cfg.PeerTimeout {
				return nil, fmt.Errorf("transport: rank %d: the coordinator, rank %d at %s, does not answer: unreachable or stopped for the peer timeout %v (%v)", m.rank, serverRank, addr, m.cfg.PeerTimeout, err)
			}
		}
		if err == nil {
			// From here on the mesh frames the connection itself (see wire).
			w := newWire(ws.NetConn(), true)
			deadline, _ := ctx.Deadline()
			stop := context.AfterFunc(ctx, func() { w.nc.Close() }) // a peer that went silent holds nothing up
			err = m.clientAuth(deadline, w, serverRank, purpose)
			if !stop() && err == nil { // closed under it
				err = context.Cause(ctx)
			}
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
			if m.closing.Load() {
				return nil, ErrClosed
			}
			return nil, fmt.Errorf("transport: rank %d: dialing rank %d at %s: %w (last error: %v)", m.rank, serverRank, addr, context.Cause(ctx), last)
		case <-m.done:
			t.Stop()
			return nil, ErrClosed
		case <-t.C:
		}
		backoff = min(2*backoff, maximumDialBackoff)
	}
}

// startOver is what the coordinator answers, with status 410 Gone, to a registration that
// comes after the start of its job; closingMesh is what a process answers so to any
// connection once its Close has begun.
const (
	startOver   = "orwl: the job's start is over: every rank of the job has joined it"
	closingMesh = "orwl: this process is closing its mesh"
)

// answered returns the reason a server gave for refusing a websocket (410 Gone: its job's
// start is over), or "" when it gave none.
func answered(resp *http.Response) string {
	if resp == nil || resp.StatusCode != http.StatusGone {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if text := strings.TrimSpace(string(b)); text != "" {
		return text
	}
	return resp.Status
}

// silence reports whether a failed dial met no answer at all: a timeout, or a network that
// does not reach the address (no route, a blackhole); not a refused connection (nobody
// listens yet) nor a name that does not resolve yet.
func silence(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EHOSTDOWN) || errors.Is(err, syscall.EINVAL)
}
