package transport

import (
	"errors"
	"fmt"
	"time"
)

// The start of a mesh (see bootstrap.go) as two state machines, in the manner of etcd's
// raft: coordinator (rank 0) and joiner (every other rank) take one startInput at a time
// (a message received, a connection made or lost, a tick of the clock, the end of the
// start's time) and return the startActions that follow from it (messages to send, the
// mesh to connect, a line to log, the end of the start with its error). They do no I/O,
// read no clock, start no goroutine and are used by one goroutine at a time: the driver
// in bootstrap.go does the I/O and feeds them. Every error of the start is decided here.

// Kinds of startInput.
const (
	inRegister   = iota // coordinator: rank registered (addr, spec)
	inBook              // joiner: rank 0's address book arrived (book)
	inReady             // coordinator: rank has all its connections
	inStart             // joiner: every process is ready
	inAbort             // rank's start failed (err: its reason)
	inLost              // rank's control connection broke or went silent (err: how)
	inConnected         // this process's mesh connections are up, or failed (err)
	inDialed            // joiner: the control connection to rank 0 is up (addr: this process's address)
	inDialFailed        // joiner: registering with rank 0 failed before the start's time ended (err)
	inSendFailed        // a checked send of typ to rank failed (err)
	inTick              // the heartbeat period passed; elapsed is the time since the process began
	inTimeout           // the start's time ended or was cancelled (err: the cause; deadline: timed out)
)

// startInput is one event of the start.
type startInput struct {
	kind     int
	rank     int      // the peer it concerns
	addr     string   // inRegister, inDialed
	spec     string   // inRegister: the rank's JobSpec
	book     []string // inBook
	typ      uint8    // inSendFailed
	err      error
	deadline bool          // inTimeout: the start timeout, rather than a cancellation
	elapsed  time.Duration // inTick
}

// Kinds of startAction.
const (
	actSend    = iota // send typ with payload to rank
	actRefuse         // refuse the registration just received: send Abort with err's text to it, close it
	actConnect        // connect the mesh to book (then report inConnected)
	actLogWait        // log that ranks have not registered yet
	actDone           // the start is over: err is nil when the mesh is up
)

// startAction is one thing the driver must do. Actions come in order; a checked send that
// fails is reported back as inSendFailed, and the driver drops the actions after it.
type startAction struct {
	kind    int
	rank    int
	typ     uint8
	payload []byte
	checked bool
	book    []string
	ranks   []int
	err     error
}

func send(rank int, typ uint8, payload []byte) startAction {
	return startAction{kind: actSend, rank: rank, typ: typ, payload: payload}
}

func checkedSend(rank int, typ uint8, payload []byte) startAction {
	return startAction{kind: actSend, rank: rank, typ: typ, payload: payload, checked: true}
}

func done(err error) startAction { return startAction{kind: actDone, err: err} }

// startConfig is what the machines know of the job.
type startConfig struct {
	rank, size                int
	spec, coord               string // the JobSpec; rank 0's address
	peerTimeout, startTimeout time.Duration
}

// coordinator is rank 0's start. It collects every rank's registration (checking its
// JobSpec), sends the address book when all are in, connects, and sends Start when every
// rank is ready. When the start fails, it tells every rank that has registered, and goes
// on taking registrations, answering each with the failure, until every rank has been told
// (or the start's time ends): no process waits for a start that will not come.
//
// Registrations are the start's progress: once a rank has registered, a peer timeout
// without another registration while ranks are missing fails the start, naming them (a
// rank that cannot reach the coordinator gives up within its peer timeout, and the others
// learn it as soon), and so does a peer timeout without one after a failure, for the ranks
// not told yet. The start timeout fails a start that does not move at all for that long:
// no rank registers or becomes ready, and rank 0's connections do not come up.
type coordinator struct {
	cfg               startConfig
	regs              []bool   // by rank
	addrs             []string // by rank: the address each accepts its peers on
	registered, ready int
	seen              int           // registered, as the last tick saw it
	progressAt        time.Duration // the elapsed time of the tick that saw the last registration
	moves             int           // registered + ready + up, as the last tick saw them
	movedAt           time.Duration // the elapsed time of the tick that saw the last move
	up, waitLogged    bool
	failure           error
	over              bool
	out               []startAction
}

func newCoordinator(cfg startConfig) *coordinator {
	s := &coordinator{cfg: cfg, regs: make([]bool, cfg.size), addrs: make([]string, cfg.size), moves: -1} // the first tick is a move
	s.addrs[0] = cfg.coord
	return s
}

// step takes one input and returns what follows from it.
func (s *coordinator) step(in startInput) []startAction {
	if s.over && in.kind != inSendFailed {
		return nil
	}
	s.out = nil
	switch in.kind {
	case inRegister:
		s.register(in)
	case inReady:
		s.ready++
	case inAbort:
		s.fail(fmt.Errorf("transport: rank %d could not start: %w", in.rank, in.err))
	case inLost:
		s.fail(fmt.Errorf("transport: process rank %d lost during the start: %w", in.rank, in.err))
	case inConnected:
		if in.err != nil {
			s.fail(in.err)
		}
		s.up = true
	case inSendFailed:
		s.sendFailed(in)
	case inTick:
		s.heartbeat(in.elapsed)
		if s.stalled(in.elapsed) {
			s.fail(fmt.Errorf("transport: rank 0: the start failed: ranks %v did not register with the coordinator within the peer timeout %v after the last rank that did (%d of %d registered)",
				s.unregistered(), s.cfg.peerTimeout, s.registered, s.cfg.size-1))
			return s.finish(s.failure)
		}
		if s.idle(in.elapsed) {
			s.fail(startError(s.cfg, fmt.Errorf("nothing moved for the start timeout %v", s.cfg.startTimeout), false, s.unregistered()))
			return s.finish(s.failure)
		}
	case inTimeout:
		s.fail(startError(s.cfg, in.err, in.deadline, s.unregistered()))
		return s.finish(s.failure)
	}
	if s.waiting() {
		return s.out
	}
	if s.failure != nil {
		return s.finish(s.failure)
	}
	for r := range s.regs { // the mesh is up
		if s.regs[r] {
			s.out = append(s.out, checkedSend(r, TypeStart, nil))
		}
	}
	return s.finish(nil)
}

// finish ends the start with err.
func (s *coordinator) finish(err error) []startAction {
	s.over = true
	return append(s.out, done(err))
}

// waiting reports whether the start goes on: until every rank is ready and rank 0 is up, or,
// after a failure, until every rank has registered and been told.
func (s *coordinator) waiting() bool {
	n := s.cfg.size - 1
	if s.failure != nil {
		return s.registered < n
	}
	return !s.up || s.ready < n
}

// fail records the start's first failure and tells every registered rank.
func (s *coordinator) fail(err error) {
	if s.failure != nil {
		return
	}
	s.failure = err
	for r, in := range s.regs {
		if in {
			s.out = append(s.out, send(r, TypeAbort, []byte(err.Error())))
		}
	}
}

// register records a rank's registration; the last one sends the address book. A second
// registration of a rank is refused, and fails the start: two processes have its rank.
func (s *coordinator) register(in startInput) {
	r := in.rank
	if s.regs[r] {
		s.out = append(s.out, startAction{kind: actRefuse, rank: r, err: fmt.Errorf(
			"rank %d has registered already: two processes of the job were given the same rank", r)})
		s.fail(fmt.Errorf("transport: rank %d registered twice: two processes of the job were given the same rank", r))
		return
	}
	s.regs[r], s.addrs[r] = true, in.addr
	s.registered++
	switch {
	case s.failure != nil:
		s.out = append(s.out, send(r, TypeAbort, []byte(s.failure.Error())))
	case in.spec != s.cfg.spec:
		s.fail(fmt.Errorf("transport: the processes run different jobs: rank %d has %q, rank 0 has %q", r, in.spec, s.cfg.spec))
	case s.registered == s.cfg.size-1:
		book := encodeStrings(s.addrs)
		for j := range s.regs {
			if s.regs[j] {
				s.out = append(s.out, checkedSend(j, TypeAddrBook, book))
			}
		}
		s.out = append(s.out, startAction{kind: actConnect, book: s.addrs})
	}
}

// sendFailed fails the start on a checked send that failed: the address book, or Start
// (which may come after the machine said the mesh was up).
func (s *coordinator) sendFailed(in startInput) {
	if in.typ == TypeStart {
		s.fail(fmt.Errorf("transport: telling rank %d to start: %w", in.rank, in.err))
		return
	}
	s.fail(fmt.Errorf("transport: sending the address book to rank %d: %w", in.rank, in.err))
}

// heartbeat keeps the registered ranks' control connections alive, and says once which
// ranks are awaited when the start takes longer than the peer timeout.
func (s *coordinator) heartbeat(elapsed time.Duration) {
	for r, in := range s.regs {
		if in {
			s.out = append(s.out, send(r, TypeHeartbeat, nil)) // a broken one is found by its reader
		}
	}
	if !s.waitLogged && s.failure == nil && s.registered < s.cfg.size-1 && elapsed > s.cfg.peerTimeout {
		s.waitLogged = true
		s.out = append(s.out, startAction{kind: actLogWait, ranks: s.unregistered()})
	}
}

// stalled reports, at a tick elapsed since the process began, whether registrations have
// stopped while ranks are missing: none for longer than the peer timeout since the last
// one, and at least one rank registered (before the first, ranks may still be starting).
func (s *coordinator) stalled(elapsed time.Duration) bool {
	if s.registered != s.seen {
		s.seen, s.progressAt = s.registered, elapsed
	}
	return s.registered > 0 && s.registered < s.cfg.size-1 && elapsed-s.progressAt > s.cfg.peerTimeout
}

// idle reports, at a tick elapsed since the process began, whether the start has not moved
// for longer than the start timeout: no rank registered or became ready, and rank 0's
// connections did not come up.
func (s *coordinator) idle(elapsed time.Duration) bool {
	moves := s.registered + s.ready
	if s.up {
		moves++
	}
	if moves != s.moves {
		s.moves, s.movedAt = moves, elapsed
	}
	return elapsed-s.movedAt > s.cfg.startTimeout
}

// unregistered returns the ranks other than 0 that have not registered.
func (s *coordinator) unregistered() []int {
	var unreg []int
	for j, in := range s.regs {
		if j != 0 && !in {
			unreg = append(unreg, j)
		}
	}
	return unreg
}

// joiner is the start of a rank other than 0: register with rank 0, connect to the
// address book, tell rank 0 it is ready, and wait for Start. It gives up when its start has
// not moved (registered, the book, its connections) for the start timeout and a peer
// timeout, so that the coordinator's report, after the start timeout, comes first.
type joiner struct {
	cfg         startConfig
	connecting  bool // the book arrived and the connections are not up yet
	moves, seen int  // the start's steps so far, and as the last tick saw them
	movedAt     time.Duration
	over        bool
}

func newJoiner(cfg startConfig) *joiner { return &joiner{cfg: cfg, seen: -1} } // the first tick is a move

// step takes one input and returns what follows from it.
func (s *joiner) step(in startInput) []startAction {
	if s.over {
		return nil
	}
	rank := s.cfg.rank
	switch in.kind {
	case inDialed:
		s.moves++
		return []startAction{checkedSend(0, TypeRegister, encodeStrings([]string{in.addr, s.cfg.spec}))}
	case inDialFailed:
		return s.finish(fmt.Errorf("transport: rank %d: registering with the coordinator %s: %w", rank, s.cfg.coord, in.err))
	case inSendFailed:
		if in.typ == TypeReady {
			return s.finish(in.err, send(0, TypeAbort, []byte(in.err.Error())))
		}
		return s.finish(fmt.Errorf("transport: rank %d: registering with the coordinator: %w", rank, in.err))
	case inBook:
		s.connecting = true
		s.moves++
		return []startAction{{kind: actConnect, book: in.book}}
	case inConnected:
		s.connecting = false
		s.moves++
		if in.err != nil {
			return s.finish(in.err, send(0, TypeAbort, []byte(in.err.Error())))
		}
		return []startAction{checkedSend(0, TypeReady, nil)}
	case inStart:
		if s.connecting {
			return s.finish(fmt.Errorf("transport: rank %d: the coordinator started the job before this process was ready", rank))
		}
		return s.finish(nil)
	case inAbort:
		return s.finish(fmt.Errorf("transport: rank %d: the start failed: %w", rank, in.err))
	case inLost:
		return s.finish(fmt.Errorf("transport: rank %d: the coordinator, rank 0, was lost during the start: %w", rank, in.err))
	case inTick:
		if s.moves != s.seen {
			s.seen, s.movedAt = s.moves, in.elapsed
		}
		if limit := s.cfg.startTimeout + s.cfg.peerTimeout; in.elapsed-s.movedAt > limit {
			return s.finish(startError(s.cfg, fmt.Errorf("nothing came from the coordinator for %v, the start timeout and a peer timeout", limit), false, nil))
		}
		return []startAction{send(0, TypeHeartbeat, nil)}
	case inTimeout:
		return s.finish(startError(s.cfg, in.err, in.deadline, nil))
	}
	return nil
}

// finish ends the start with err, after the actions before.
func (s *joiner) finish(err error, before ...startAction) []startAction {
	s.over = true
	return append(before, done(err))
}

// startError says why the start's time ended (cause), and names the ranks that did not
// register (unreg, at rank 0).
func startError(cfg startConfig, cause error, deadline bool, unreg []int) error {
	msg := fmt.Sprintf("transport: rank %d: the start failed: %v", cfg.rank, cause)
	if deadline {
		msg += fmt.Sprintf(" (start timeout %v)", cfg.startTimeout)
	}
	if len(unreg) > 0 {
		msg += fmt.Sprintf("; ranks %v did not register with the coordinator", unreg)
	}
	return errors.New(msg)
}

// missingError names the ranks of awaited whose connection has not come (has(j) is false)
// when the start ends while this process waits for them.
func missingError(cfg startConfig, awaited []int, has func(j int) bool) error {
	var missing []int
	for _, j := range awaited {
		if !has(j) {
			missing = append(missing, j)
		}
	}
	return fmt.Errorf("transport: rank %d: no connection from ranks %v", cfg.rank, missing)
}
