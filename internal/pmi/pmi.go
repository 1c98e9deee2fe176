// Package pmi is a client of the Process Management Interface that MPI launchers offer every
// process they start: MPICH's Hydra (mpiexec.hydra, mpirun.mpich), SLURM's srun --mpi=pmi2,
// and the other process managers that speak the PMI-1 or PMI-2 wire protocol. ORWL uses it
// for one thing, the launcher's key-value exchange (put, fence, get), through which rank 0
// tells the other processes its coordinator address and the job's secret before they can
// reach each other.
//
// The protocols are spoken on the wire, over the connection the launcher hands down (the
// inherited socket named by PMI_FD, or the address in PMI_PORT): MPI and libpmi are never
// linked. The package must not interpret the values it carries, nor start or stop
// processes.
//
// PMI-1 exchanges newline-terminated lines of space-separated attributes:
//
//	cmd=init pmi_version=1 pmi_subversion=1       -> cmd=response_to_init ... rc=0
//	cmd=get_maxes                                 -> cmd=maxes kvsname_max=.. keylen_max=.. vallen_max=..
//	cmd=get_my_kvsname                            -> cmd=my_kvsname kvsname=NAME
//	cmd=put kvsname=NAME key=K value=V            -> cmd=put_result rc=0
//	cmd=barrier_in                                -> cmd=barrier_out
//	cmd=get kvsname=NAME key=K                    -> cmd=get_result rc=0 value=V
//	cmd=finalize                                  -> cmd=finalize_ack
//
// PMI-2 starts with the same PMI-1 init line (asking for version 2), then exchanges
// messages of semicolon-terminated attributes preceded by their length in six characters:
//
//	cmd=fullinit;pmijobid=J;pmirank=R;threaded=FALSE;  -> cmd=fullinit-response;rc=0;rank=..;size=..;...
//	cmd=kvs-put;key=K;value=V;                         -> cmd=kvs-put-response;rc=0;
//	cmd=kvs-fence;                                     -> cmd=kvs-fence-response;rc=0;
//	cmd=kvs-get;key=K;                                 -> cmd=kvs-get-response;rc=0;found=TRUE;value=V;
//	cmd=finalize;                                      -> cmd=finalize-response;rc=0;
package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Variables through which launchers describe the PMI connection.
const (
	EnvFD    = "PMI_FD"    // number of an inherited socket connected to the PMI server
	EnvPort  = "PMI_PORT"  // host:port of the PMI server, when there is no PMI_FD
	EnvID    = "PMI_ID"    // this process's id for the PMI_PORT handshake
	EnvRank  = "PMI_RANK"  // this process's rank
	EnvSize  = "PMI_SIZE"  // number of processes
	EnvJobID = "PMI_JOBID" // the job's id (SLURM), named in PMI-2's fullinit
)

// ErrNotFound is wrapped by Get's error when no process put the key.
var ErrNotFound = errors.New("key not found")

// Endpoint says how to reach this process's PMI server and how to introduce this process to
// it. FromEnv fills it from the launcher's variables.
type Endpoint struct {
	FD      int    // inherited socket (PMI_FD), or -1
	Addr    string // host:port of the server (PMI_PORT), used when FD is -1
	ID      int    // id for the PMI_PORT handshake (PMI_ID), or -1
	Rank    int    // PMI_RANK, or -1
	Size    int    // PMI_SIZE, or 0
	JobID   string // PMI_JOBID, or ""
	Version int    // wire protocol: 1 or 2
}

// String names the connection as the variables gave it, for messages.
func (e Endpoint) String() string {
	if e.FD >= 0 {
		return EnvFD + "=" + strconv.Itoa(e.FD)
	}
	return EnvPort + "=" + e.Addr
}

// FromEnv reads the launcher's PMI variables through lookup, for the wire protocol version
// (1 or 2). ok is false when neither PMI_FD nor PMI_PORT is set; a variable that is set but
// unusable is an error naming it.
func FromEnv(lookup func(string) (string, bool), version int) (e Endpoint, ok bool, err error) {
	e = Endpoint{FD: -1, ID: -1, Rank: -1, Version: version}
	if version != 1 && version != 2 {
		return e, false, fmt.Errorf("pmi: wire protocol version %d: want 1 or 2", version)
	}
	num := func(name string, min int) (int, bool, error) {
		s, set := lookup(name)
		if !set {
			return 0, false, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < min {
			return 0, true, fmt.Errorf("pmi: %s=%q: want an integer of at least %d", name, s, min)
		}
		return n, true, nil
	}
	var set bool
	if e.FD, set, err = num(EnvFD, 0); err != nil {
		return e, false, err
	}
	if !set {
		e.FD = -1
		addr, have := lookup(EnvPort)
		if !have {
			return e, false, nil
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return e, false, fmt.Errorf("pmi: %s=%q: want host:port", EnvPort, addr)
		}
		e.Addr = addr
	}
	for _, v := range []struct {
		name string
		dst  *int
		min  int
	}{{EnvID, &e.ID, 0}, {EnvRank, &e.Rank, 0}, {EnvSize, &e.Size, 1}} {
		n, set, err := num(v.name, v.min)
		if err != nil {
			return e, false, err
		}
		if set {
			*v.dst = n
		}
	}
	e.JobID, _ = lookup(EnvJobID)
	return e, true, nil
}

// Client is one process's connection to its PMI server. PMI is a request-response protocol
// on one connection: a Client must not be used by several goroutines at once.
type Client struct {
	conn       net.Conn
	r          *bufio.Reader
	e          Endpoint
	rank, size int
	kvsname    string // PMI-1's key-value space of the job
	valMax     int    // largest value the server takes (PMI-1's vallen_max), or 0
	buf        []byte
}

// Dial connects to the PMI server e names and initialises the wire protocol e.Version.
// ctx bounds the whole handshake.
func Dial(ctx context.Context, e Endpoint) (*Client, error) {
	var conn net.Conn
	if e.FD >= 0 {
		f := os.NewFile(uintptr(e.FD), EnvFD)
		if f == nil {
			return nil, fmt.Errorf("pmi: %s: not an open file descriptor", e)
		}
		c, err := net.FileConn(f)
		f.Close() // c holds its own descriptor
		if err != nil {
			return nil, fmt.Errorf("pmi: %s: not a socket connected to the launcher: %w", e, err)
		}
		conn = c
	} else {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", e.Addr)
		if err != nil {
			return nil, fmt.Errorf("pmi: %s: %w", e, err)
		}
		conn = c
	}
	return NewClient(ctx, conn, e)
}

// NewClient initialises the wire protocol e.Version on conn, an open connection to a PMI
// server (e names it in errors). The Client owns conn, also when NewClient fails: it is
// closed then.
func NewClient(ctx context.Context, conn net.Conn, e Endpoint) (*Client, error) {
	c := &Client{conn: conn, r: bufio.NewReaderSize(conn, MaxMessage), e: e, rank: e.Rank, size: e.Size}
	if err := c.init(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Rank and Size are this process's rank and the job's size, as the server reported them or,
// where PMI-1 does not report them, as PMI_RANK and PMI_SIZE gave them (-1 and 0 when
// unknown).
func (c *Client) Rank() int { return c.rank }

// Size: see Rank.
func (c *Client) Size() int { return c.size }

// Version is the wire protocol version in use.
func (c *Client) Version() int { return c.e.Version }

// init opens the conversation: the PMI_PORT handshake when the server must be told who we
// are, then PMI-1's or PMI-2's own opening.
func (c *Client) init(ctx context.Context) error {
	if c.e.FD < 0 && c.e.ID >= 0 {
		if err := c.initack(ctx); err != nil {
			return err
		}
	}
	// Both versions open with a PMI-1 init line naming the version wanted.
	sub := "1"
	if c.e.Version == 2 {
		sub = "0"
	}
	m, err := c.call(ctx, false, Message{Cmd: "init", Attrs: []Attr{{"pmi_version", strconv.Itoa(c.e.Version)}, {"pmi_subversion", sub}}}, "response_to_init")
	if err != nil {
		return err
	}
	if v, ok := m.Get("pmi_version"); ok && v != strconv.Itoa(c.e.Version) {
		return c.errorf("init", "the server speaks PMI version %s, not %d (set ORWL_PMI=%s)", v, c.e.Version, v)
	}
	if c.e.Version == 1 {
		return c.init1(ctx)
	}
	return c.init2(ctx)
}

// initack is the PMI_PORT handshake: introduce this process; the server answers with its
// place, in several lines: initack, then set size, rank, debug.
func (c *Client) initack(ctx context.Context) error {
	if _, err := c.roundTrip(ctx, false, Message{Cmd: "initack", Attrs: []Attr{{"pmiid", strconv.Itoa(c.e.ID)}}}, "initack"); err != nil {
		return err
	}
	for {
		m, err := c.receive(ctx, false, "initack")
		if err != nil {
			return err
		}
		if m.Cmd != "set" {
			return c.errorf("initack", "the server answered %q, want cmd=set", m)
		}
		for _, a := range m.Attrs {
			n, err := strconv.Atoi(a.Value)
			if err != nil {
				return c.errorf("initack", "the server answered %q: %s is not an integer", m, a.Key)
			}
			switch a.Key {
			case "size":
				c.size = n
			case "rank":
				c.rank = n
			}
		}
		if _, last := m.Get("debug"); last {
			return nil
		}
	}
}

// init1 asks a PMI-1 server for its limits and the job's key-value space.
func (c *Client) init1(ctx context.Context) error {
	m, err := c.call(ctx, false, Message{Cmd: "get_maxes"}, "maxes")
	if err != nil {
		return err
	}
	if s, ok := m.Get("vallen_max"); ok {
		if c.valMax, err = strconv.Atoi(s); err != nil || c.valMax <= 0 {
			return c.errorf("get_maxes", "the server answered %q: vallen_max is not a positive integer", m)
		}
	}
	if m, err = c.call(ctx, false, Message{Cmd: "get_my_kvsname"}, "my_kvsname"); err != nil {
		return err
	}
	c.kvsname, _ = m.Get("kvsname")
	if !ValidValue(c.kvsname) {
		return c.errorf("get_my_kvsname", "the server answered %q: no usable kvsname", m)
	}
	return nil
}

// init2 is PMI-2's fullinit, which tells this process its rank and the job's size.
func (c *Client) init2(ctx context.Context) error {
	rank := c.rank
	if rank < 0 {
		rank = max(c.e.ID, 0)
	}
	req := Message{Cmd: "fullinit"}
	if c.e.JobID != "" {
		req.Attrs = append(req.Attrs, Attr{"pmijobid", c.e.JobID})
	}
	req.Attrs = append(req.Attrs, Attr{"pmirank", strconv.Itoa(rank)}, Attr{"threaded", "FALSE"})
	m, err := c.call(ctx, true, req, "fullinit-response")
	if err != nil {
		return err
	}
	for _, v := range []struct {
		key string
		dst *int
	}{{"rank", &c.rank}, {"size", &c.size}} {
		s, ok := m.Get(v.key)
		n, err := strconv.Atoi(s)
		if !ok || err != nil {
			return c.errorf("fullinit", "the server answered %q: no integer %s", m, v.key)
		}
		*v.dst = n
	}
	return nil
}

// Put publishes key=value for the other processes of the job; they see it after the next
// Fence. Keys and values are restricted to what both wire formats carry unchanged (see
// ValidKey and ValidValue).
func (c *Client) Put(ctx context.Context, key, value string) error {
	if !ValidKey(key) {
		return c.errorf("put", "key %q: want 1 to 64 letters, digits, '_', '-' or '/'", key)
	}
	if !ValidValue(value) || c.valMax > 0 && len(value) > c.valMax {
		return c.errorf("put", "value of key %s (%d bytes): want 1 to %d printable ASCII bytes without space, ';' or '\\'", key, len(value), c.valueMax())
	}
	if c.e.Version == 1 {
		_, err := c.call(ctx, false, Message{Cmd: "put", Attrs: []Attr{{"kvsname", c.kvsname}, {"key", key}, {"value", value}}}, "put_result")
		return err
	}
	_, err := c.call(ctx, true, Message{Cmd: "kvs-put", Attrs: []Attr{{"key", key}, {"value", value}}}, "kvs-put-response")
	return err
}

// Fence waits until every process of the job has called Fence, and makes the values put
// before it visible to all (PMI-1's barrier, PMI-2's kvs-fence).
func (c *Client) Fence(ctx context.Context) error {
	if c.e.Version == 1 {
		_, err := c.call(ctx, false, Message{Cmd: "barrier_in"}, "barrier_out")
		return err
	}
	_, err := c.call(ctx, true, Message{Cmd: "kvs-fence"}, "kvs-fence-response")
	return err
}

// Get returns the value a process of the job put under key before the last Fence. A key
// nobody put is an error wrapping ErrNotFound.
func (c *Client) Get(ctx context.Context, key string) (string, error) {
	if !ValidKey(key) {
		return "", c.errorf("get", "key %q: want 1 to 64 letters, digits, '_', '-' or '/'", key)
	}
	var m Message
	var err error
	if c.e.Version == 1 {
		m, err = c.roundTrip(ctx, false, Message{Cmd: "get", Attrs: []Attr{{"kvsname", c.kvsname}, {"key", key}}}, "get_result")
	} else {
		m, err = c.roundTrip(ctx, true, Message{Cmd: "kvs-get", Attrs: []Attr{{"key", key}}}, "kvs-get-response")
	}
	if err != nil {
		return "", err
	}
	found, ok := m.Get("found")
	v, hasValue := m.Get("value")
	rc, _ := m.Get("rc")
	switch {
	case ok && !strings.EqualFold(found, "TRUE"), !ok && rc != "" && rc != "0", !hasValue:
		return "", fmt.Errorf("pmi: %s: cmd=get key=%s: %w (the server answered %q)", c.e, key, ErrNotFound, m)
	}
	return v, nil
}

// Finalize tells the server this process is done with PMI, and closes the connection.
func (c *Client) Finalize(ctx context.Context) error {
	var err error
	if c.e.Version == 1 {
		_, err = c.call(ctx, false, Message{Cmd: "finalize"}, "finalize_ack")
	} else {
		_, err = c.call(ctx, true, Message{Cmd: "finalize"}, "finalize-response")
	}
	c.conn.Close()
	return err
}

// Close closes the connection without telling the server.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) valueMax() int {
	if c.valMax > 0 {
		return min(c.valMax, 1024)
	}
	return 1024
}

// call sends req and reads the answer want, which must not carry an error code.
func (c *Client) call(ctx context.Context, v2 bool, req Message, want string) (Message, error) {
	m, err := c.roundTrip(ctx, v2, req, want)
	if err != nil {
		return m, err
	}
	if rc, ok := m.Get("rc"); ok && rc != "0" {
		msg, _ := m.Get("msg")
		if msg == "" {
			msg, _ = m.Get("errmsg")
		}
		return m, c.errorf(req.Cmd, "the server refused: rc=%s %s", rc, msg)
	}
	return m, nil
}

// roundTrip sends req and reads one answer, which must be the command want.
func (c *Client) roundTrip(ctx context.Context, v2 bool, req Message, want string) (Message, error) {
	if err := c.send(ctx, v2, req); err != nil {
		return Message{}, err
	}
	m, err := c.receive(ctx, v2, req.Cmd)
	if err != nil {
		return m, err
	}
	if m.Cmd != want {
		return m, c.errorf(req.Cmd, "the server answered %q, want cmd=%s", m, want)
	}
	return m, nil
}

// send sends one message.
func (c *Client) send(ctx context.Context, v2 bool, req Message) error {
	defer c.arm(ctx)()
	if v2 {
		c.buf = AppendV2(c.buf[:0], req)
	} else {
		c.buf = AppendV1(c.buf[:0], req)
	}
	if len(c.buf) > MaxMessage {
		return c.errorf(req.Cmd, "a request of %d bytes is over the %d-byte limit", len(c.buf), MaxMessage)
	}
	if _, err := c.conn.Write(c.buf); err != nil {
		return c.ioError(ctx, req.Cmd, "sending", err)
	}
	return nil
}

// receive reads one message.
func (c *Client) receive(ctx context.Context, v2 bool, cmd string) (Message, error) {
	defer c.arm(ctx)()
	var m Message
	var err error
	if v2 {
		m, err = ReadV2(c.r)
	} else {
		m, err = ReadV1(c.r)
	}
	if err != nil {
		return m, c.ioError(ctx, cmd, "reading the answer", err)
	}
	return m, nil
}

// arm makes the connection's I/O give up at ctx's deadline or cancellation; the returned
// function disarms it.
func (c *Client) arm(ctx context.Context) func() {
	d, _ := ctx.Deadline()
	c.conn.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

func (c *Client) ioError(ctx context.Context, cmd, doing string, err error) error {
	_, deadline := ctx.Deadline()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("pmi: %s: cmd=%s: %s: %w", c.e, cmd, doing, context.Cause(ctx))
	case errors.Is(err, os.ErrDeadlineExceeded) && deadline:
		// The connection's deadline is ctx's, which may fire a moment before ctx's own timer.
		return fmt.Errorf("pmi: %s: cmd=%s: %s: %w", c.e, cmd, doing, context.DeadlineExceeded)
	case errors.Is(err, net.ErrClosed):
		return fmt.Errorf("pmi: %s: cmd=%s: %s: %w", c.e, cmd, doing, err)
	}
	return fmt.Errorf("pmi: %s: cmd=%s: %s (did the launcher go away?): %w", c.e, cmd, doing, err)
}

func (c *Client) errorf(cmd, format string, args ...any) error {
	return fmt.Errorf("pmi: %s: cmd=%s: %s", c.e, cmd, fmt.Sprintf(format, args...))
}
