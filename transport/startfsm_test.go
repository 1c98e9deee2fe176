package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The start's state machines, driven without processes or sockets: every input is given
// by hand, and the actions are recorded by a fake driver through perform, as bootstrap.go
// does them.

var typeNames = map[uint8]string{TypeAddrBook: "book", TypeStart: "start", TypeAbort: "abort",
	TypeHeartbeat: "heartbeat", TypeReady: "ready", TypeRegister: "register"}

// drive feeds ins to s through perform and returns the actions done, one word each
// ("book->1", "connect", "refuse->1", "wait[2]"), and the start's end: whether it is over
// and its error. A checked send named in fail fails with that error.
func drive(s machine, ins []startInput, fail map[string]error) (acts []string, over bool, err error) {
	do := func(a startAction) error {
		switch a.kind {
		case actSend:
			name := fmt.Sprintf("%s->%d", typeNames[a.typ], a.rank)
			acts = append(acts, name)
			if a.checked {
				return fail[name]
			}
		case actRefuse:
			acts = append(acts, fmt.Sprintf("refuse->%d", a.rank))
		case actConnect:
			acts = append(acts, "connect")
		case actLogWait:
			acts = append(acts, fmt.Sprintf("wait%v", a.ranks))
		}
		return nil
	}
	for _, in := range ins {
		if over {
			return acts, over, errors.New("an input after the end")
		}
		over, err = perform(s, s.step(in), do)
	}
	return acts, over, err
}

var testStart = startConfig{size: 3, spec: "S", coord: "c:1", peerTimeout: time.Second, startTimeout: 30 * time.Second}

func reg(rank int, spec string) startInput {
	return startInput{kind: inRegister, rank: rank, addr: fmt.Sprintf("h:%d", rank), spec: spec}
}

func tick(elapsed time.Duration) startInput { return startInput{kind: inTick, elapsed: elapsed} }

func from(kind, rank int) startInput { return startInput{kind: kind, rank: rank} }

func failed(kind, rank int, err error) startInput {
	return startInput{kind: kind, rank: rank, err: err}
}

var timedOut = startInput{kind: inTimeout, err: context.DeadlineExceeded, deadline: true}

type startCase struct {
	name string
	ins  []startInput
	fail map[string]error
	acts []string // the actions, in order
	want string   // in the error at the end; "" for a start that succeeds
}

// check runs c on the machine that newMachine returns.
func (c startCase) check(t *testing.T, newMachine func() machine) {
	t.Helper()
	acts, over, err := drive(newMachine(), c.ins, c.fail)
	if !over {
		t.Errorf("%s: not over after every input (actions %v)", c.name, acts)
		return
	}
	switch {
	case c.want == "" && err != nil:
		t.Errorf("%s: %v", c.name, err)
	case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
		t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
	}
	if !slices.Equal(acts, c.acts) {
		t.Errorf("%s: actions %v, want %v", c.name, acts, c.acts)
	}
}

func TestCoordinatorMachine(t *testing.T) {
	connected := startInput{kind: inConnected}
	allIn := []startInput{reg(1, "S"), reg(2, "S")}
	for _, c := range []startCase{
		{name: "a start", ins: append(allIn, connected, from(inReady, 2), from(inReady, 1)),
			acts: []string{"book->1", "book->2", "connect", "start->1", "start->2"}},
		{name: "a job that differs", ins: []startInput{reg(1, "T"), reg(2, "S")},
			acts: []string{"abort->1", "abort->2"}, want: `rank 1 has "T", rank 0 has "S"`},
		{name: "a duplicate rank", ins: []startInput{reg(1, "S"), reg(1, "S"), reg(2, "S")},
			acts: []string{"refuse->1", "abort->1", "abort->2"}, want: "transport: rank 1 registered twice: two processes of the job were given the same rank"},
		{name: "a missing rank at the start timeout", ins: []startInput{reg(2, "S"), timedOut},
			acts: []string{"abort->2"}, want: "rank 0: the start failed: context deadline exceeded (start timeout 30s); ranks [1] did not register with the coordinator"},
		{name: "a rank lost after registering", ins: []startInput{reg(1, "S"), failed(inLost, 1, io.EOF), reg(2, "S")},
			acts: []string{"abort->1", "abort->2"}, want: "transport: process rank 1 lost during the start: EOF"},
		{name: "a rank that cannot connect", ins: append(allIn, failed(inAbort, 2, errors.New("no connection from ranks [1]"))),
			acts: []string{"book->1", "book->2", "connect", "abort->1", "abort->2"}, want: "transport: rank 2 could not start: no connection from ranks [1]"},
		{name: "rank 0 cannot connect", ins: append(allIn, failed(inConnected, 0, errors.New("no connection from ranks [2]"))),
			acts: []string{"book->1", "book->2", "connect", "abort->1", "abort->2"}, want: "no connection from ranks [2]"},
		{name: "the book does not go out", ins: allIn, fail: map[string]error{"book->1": io.ErrClosedPipe},
			acts: []string{"book->1", "abort->1", "abort->2"}, want: "transport: sending the address book to rank 1: io: read/write on closed pipe"},
		{name: "Start does not go out", ins: append(allIn, from(inReady, 1), from(inReady, 2), connected), fail: map[string]error{"start->2": io.ErrClosedPipe},
			acts: []string{"book->1", "book->2", "connect", "start->1", "start->2", "abort->1", "abort->2"}, want: "transport: telling rank 2 to start: io: read/write on closed pipe"},
		{name: "a slow start is logged once", ins: []startInput{tick(time.Second / 2), tick(2 * time.Second), tick(3 * time.Second), reg(1, "S"),
			{kind: inTimeout, err: context.Canceled}},
			acts: []string{"wait[1 2]", "abort->1"}, want: "rank 0: the start failed: context canceled; ranks [2] did not register"},
		{name: "a rank that does not register within the peer timeout of the others", ins: []startInput{reg(1, "S"), tick(time.Second / 2),
			tick(1200 * time.Millisecond), tick(1600 * time.Millisecond)},
			acts: []string{"heartbeat->1", "heartbeat->1", "wait[2]", "heartbeat->1", "abort->1"},
			want: "transport: rank 0: the start failed: ranks [2] did not register with the coordinator within the peer timeout 1s after the last rank that did (1 of 2 registered)"},
		{name: "after a failure, the ranks not told within the peer timeout", ins: []startInput{reg(1, "T"), tick(time.Second / 2), tick(1600 * time.Millisecond)},
			acts: []string{"abort->1", "heartbeat->1", "heartbeat->1"}, want: `rank 1 has "T", rank 0 has "S"`},
	} {
		c.check(t, func() machine { return newCoordinator(testStart) })
	}
	// The start timeout fails a start that does not move for that long, not one that does.
	for _, c := range []startCase{
		{name: "a start that moves outlives the start timeout", ins: append(allIn, tick(time.Second/2), connected, from(inReady, 1),
			tick(25*time.Second), tick(50*time.Second), from(inReady, 2)),
			acts: []string{"book->1", "book->2", "connect", "heartbeat->1", "heartbeat->2", "heartbeat->1", "heartbeat->2",
				"heartbeat->1", "heartbeat->2", "start->1", "start->2"}},
		{name: "a start that does not move for the start timeout", ins: append(allIn, tick(time.Second/2), connected, tick(time.Second), tick(32*time.Second)),
			acts: []string{"book->1", "book->2", "connect", "heartbeat->1", "heartbeat->2", "heartbeat->1", "heartbeat->2",
				"heartbeat->1", "heartbeat->2", "abort->1", "abort->2"}, want: "transport: rank 0: the start failed: nothing moved for the start timeout 30s"},
		{name: "no rank registers for the start timeout", ins: []startInput{tick(time.Second / 2), tick(31 * time.Second)},
			acts: []string{"wait[1 2]"}, want: "transport: rank 0: the start failed: nothing moved for the start timeout 30s; ranks [1 2] did not register with the coordinator"},
	} {
		c.check(t, func() machine { return newCoordinator(testStart) })
	}
	// Registrations that keep coming, each within the peer timeout of the one before, make
	// a start of any length: no fixed window fails it.
	slow := testStart
	slow.size = 4
	startCase{name: "registrations that keep coming", ins: []startInput{reg(1, "S"), tick(time.Second / 2), tick(1400 * time.Millisecond),
		reg(2, "S"), tick(2300 * time.Millisecond), tick(3200 * time.Millisecond), reg(3, "S"), connected,
		from(inReady, 1), from(inReady, 2), from(inReady, 3)},
		acts: []string{"heartbeat->1", "heartbeat->1", "wait[2 3]", "heartbeat->1", "heartbeat->2", "heartbeat->1", "heartbeat->2",
			"book->1", "book->2", "book->3", "connect", "start->1", "start->2", "start->3"}}.check(t, func() machine { return newCoordinator(slow) })
}

func TestJoinerMachine(t *testing.T) {
	dialed := startInput{kind: inDialed, addr: "h:2"}
	book := startInput{kind: inBook, book: []string{"c:1", "h:1", "h:2"}}
	upToBook := []startInput{dialed, {kind: inTick}, book}
	over := errors.New("rank 0 at c:1 answers: " + startOver)
	for _, c := range []startCase{
		{name: "a start", ins: append(upToBook, startInput{kind: inConnected}, from(inStart, 0)),
			acts: []string{"register->0", "heartbeat->0", "connect", "ready->0"}},
		{name: "pointed at a finished start", ins: []startInput{failed(inDialFailed, 0, over)},
			want: "transport: rank 2: registering with the coordinator c:1: rank 0 at c:1 answers: orwl: the job's start is over"},
		{name: "the registration does not go out", ins: []startInput{dialed}, fail: map[string]error{"register->0": io.ErrClosedPipe},
			acts: []string{"register->0"}, want: "transport: rank 2: registering with the coordinator: io: read/write on closed pipe"},
		{name: "rank 0 aborts", ins: []startInput{dialed, failed(inAbort, 0, errors.New(`the processes run different jobs`))},
			acts: []string{"register->0"}, want: "transport: rank 2: the start failed: the processes run different jobs"},
		{name: "rank 0 is lost", ins: append(upToBook, failed(inLost, 0, io.EOF)),
			acts: []string{"register->0", "heartbeat->0", "connect"}, want: "transport: rank 2: the coordinator, rank 0, was lost during the start: EOF"},
		{name: "Start before ready", ins: append(upToBook, from(inStart, 0)),
			acts: []string{"register->0", "heartbeat->0", "connect"}, want: "transport: rank 2: the coordinator started the job before this process was ready"},
		{name: "a missing peer after the book", ins: append(upToBook, failed(inConnected, 2, errors.New("no connection from ranks [1]"))),
			acts: []string{"register->0", "heartbeat->0", "connect", "abort->0"}, want: "no connection from ranks [1]"},
		{name: "Ready does not go out", ins: append(upToBook, startInput{kind: inConnected}), fail: map[string]error{"ready->0": io.ErrClosedPipe},
			acts: []string{"register->0", "heartbeat->0", "connect", "ready->0", "abort->0"}, want: "io: read/write on closed pipe"},
		{name: "cancelled", ins: []startInput{dialed, {kind: inTimeout, err: context.Canceled}},
			acts: []string{"register->0"}, want: "transport: rank 2: the start failed: context canceled"},
		{name: "a start that moves outlives the start timeout", ins: []startInput{dialed, tick(time.Second), book, tick(10 * time.Second),
			tick(32 * time.Second), {kind: inConnected}, tick(40 * time.Second), tick(70 * time.Second), from(inStart, 0)},
			acts: []string{"register->0", "heartbeat->0", "connect", "heartbeat->0", "heartbeat->0", "ready->0", "heartbeat->0", "heartbeat->0"}},
		{name: "nothing from the coordinator for the start timeout and a peer timeout", ins: []startInput{dialed, tick(time.Second), book,
			tick(10 * time.Second), {kind: inConnected}, tick(40 * time.Second), tick(72 * time.Second)},
			acts: []string{"register->0", "heartbeat->0", "connect", "heartbeat->0", "ready->0", "heartbeat->0"},
			want: "transport: rank 2: the start failed: nothing came from the coordinator for 31s, the start timeout and a peer timeout"},
		{name: "the start timeout while dialing", ins: []startInput{timedOut},
			want: "transport: rank 2: the start failed: context deadline exceeded (start timeout 30s)"},
	} {
		cfg := testStart
		cfg.rank = 2
		c.check(t, func() machine { return newJoiner(cfg) })
	}
}

// A cancelled start names no start timeout; a joiner names no unregistered ranks.
func TestStartErrorText(t *testing.T) {
	err := startError(startConfig{rank: 1, startTimeout: time.Minute}, context.Canceled, false, nil)
	if want := "transport: rank 1: the start failed: context canceled"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	err = missingError(startConfig{rank: 1, size: 4, peerTimeout: time.Second}, []int{0, 2, 3}, func(j int) bool { return j == 2 })
	if want := "transport: rank 1: no connection from ranks [0 3]"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

// A coordinator whose job's start is over says so with 410 Gone; other answers give no reason.
func TestAnswered(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusGone, startOver + "\n", startOver},
		{http.StatusGone, "", "410 Gone"},
		{http.StatusNotFound, "404 page not found", ""},
	} {
		resp := &http.Response{StatusCode: c.status, Status: fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)),
			Body: io.NopCloser(strings.NewReader(c.body))}
		if got := answered(resp); got != c.want {
			t.Errorf("%d %q: %q, want %q", c.status, c.body, got, c.want)
		}
	}
	if answered(nil) != "" {
		t.Error("no response: a reason")
	}
}

// The handshake's steps, without a connection: the secret (a fresh one per attempt of the
// launcher) and the ranks and purposes that a server accepts.
func TestHandshakeSteps(t *testing.T) {
	type side struct {
		secret     string
		rank, peer int
	}
	for _, c := range []struct {
		name           string
		client, server side
		size           int
		purpose        uint8
		corrupt        func(p []byte) []byte // the hello's payload on its way; nil: as sent
		serverErr      string                // from hello or response; "" for none
		clientErr      string                // from challenge
	}{
		{name: "the same secret", client: side{"s0", 1, 0}, server: side{"s0", 0, 0}, size: 3, purpose: purposeRegister},
		{name: "a mesh connection", client: side{"s0", 2, 1}, server: side{"s0", 1, 0}, size: 3, purpose: purposeMesh},
		{name: "another attempt's secret", client: side{"attempt 1", 1, 0}, server: side{"attempt 0", 0, 0}, size: 3, purpose: purposeRegister,
			serverErr: "wrong secret (claimed rank 1)", clientErr: "rank 0 does not know the job secret (or the secrets differ)"},
		{name: "a rank beyond the job", client: side{"s0", 3, 0}, server: side{"s0", 0, 0}, size: 3, purpose: purposeMesh,
			serverErr: "rank 3 is not a peer of rank 0 in a job of 3"},
		{name: "the server's own rank", client: side{"s0", 1, 1}, server: side{"s0", 1, 0}, size: 3, purpose: purposeMesh,
			serverErr: "rank 1 is not a peer of rank 1 in a job of 3"},
		{name: "registering with a rank other than 0", client: side{"s0", 2, 1}, server: side{"s0", 1, 0}, size: 3, purpose: purposeRegister,
			serverErr: "unexpected purpose"},
		{name: "a short hello", client: side{"s0", 1, 0}, server: side{"s0", 0, 0}, size: 3, purpose: purposeMesh,
			corrupt: func(p []byte) []byte { return p[:8] }, serverErr: "hello of 8 bytes"},
		{name: "a challenge from another rank", client: side{"s0", 2, 1}, server: side{"s0", 0, 0}, size: 3, purpose: purposeMesh,
			clientErr: "bad challenge (server says rank 0, expected 1)"},
	} {
		cl := &authClient{secret: []byte(c.client.secret), rank: c.client.rank, server: c.client.peer, purpose: c.purpose}
		sv := &authServer{secret: []byte(c.server.secret), rank: c.server.rank, size: c.size}
		h, p := cl.hello()
		if c.corrupt != nil {
			p = c.corrupt(p)
		}
		challenge, serr := sv.hello(h, p)
		var resp []byte
		var cerr error
		if serr == nil {
			resp, cerr = cl.challenge(Header{Type: TypeAuthChallenge, Arg: int64(sv.rank)}, challenge)
			if resp != nil {
				serr = sv.response(resp)
			}
		}
		for _, e := range []struct {
			err  error
			want string
			who  string
		}{{serr, c.serverErr, "server"}, {cerr, c.clientErr, "client"}} {
			switch {
			case e.want == "" && e.err != nil:
				t.Errorf("%s: %s: %v", c.name, e.who, e.err)
			case e.want != "" && (!errors.Is(e.err, ErrAuth) || !strings.Contains(e.err.Error(), e.want)):
				t.Errorf("%s: %s: %v, want ErrAuth with %q", c.name, e.who, e.err, e.want)
			}
		}
		if c.serverErr == "" && c.clientErr == "" && (sv.client != c.client.rank || sv.purpose != c.purpose) {
			t.Errorf("%s: the server sees rank %d, purpose %d", c.name, sv.client, sv.purpose)
		}
	}
}
