// Package pmitest serves the PMI wire protocols to the processes of a test job, as MPICH's
// Hydra and SLURM's mpi/pmi2 plugin do, and replays exchanges recorded from real launchers.
// It lets tests start processes that find their job through PMI, with no launcher
// installed, and check the client byte for byte against what a real launcher said.
//
// It is for tests only: it trusts its clients, keeps everything in memory and serves one
// job.
package pmitest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/orwl-go/orwl/internal/pmi"
)

// Server is the PMI server of one job of Size processes. Values put before a fence become
// visible to every process when the last process reaches that fence, as with a real
// launcher; a process that reads before then does not see them.
type Server struct {
	size    int
	kvsname string

	mu      sync.Mutex
	visible map[string]string
	pending map[string]string
	arrived int
	fenced  chan struct{} // closed when the current fence completes
	done    chan struct{} // closed by Close
	closed  bool
	wg      sync.WaitGroup
	errs    []error
	conns   []net.Conn
}

// NewServer returns the server of a job of size processes.
func NewServer(size int) *Server {
	return &Server{
		size: size, kvsname: "kvs_pmitest_0",
		visible: map[string]string{}, pending: map[string]string{},
		fenced: make(chan struct{}), done: make(chan struct{}),
	}
}

// Socket makes a connected pair of sockets, serves one end in a goroutine for the process
// of the given rank, and returns the other, for the process to inherit (as PMI_FD). The
// caller closes the returned file once the process has started.
func (s *Server) Socket(rank int) (*os.File, error) {
	conn, theirs, err := Pair()
	if err != nil {
		return nil, err
	}
	s.Go(conn, rank)
	return theirs, nil
}

// Pair makes a connected pair of Unix sockets, neither inherited by processes started
// meanwhile: one end as a connection, the other as a file for a process to inherit (in
// exec.Cmd.ExtraFiles), which the caller closes once the process has started.
func Pair() (net.Conn, *os.File, error) {
	syscall.ForkLock.RLock() // SOCK_CLOEXEC is Linux's
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("pmitest: socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "pmi-server")
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("pmitest: %w", err)
	}
	return conn, os.NewFile(uintptr(fds[1]), "pmi-client"), nil
}

// Go serves conn for the process of the given rank in a goroutine; Wait reports how it
// ended.
func (s *Server) Go(conn net.Conn, rank int) {
	s.mu.Lock()
	s.conns = append(s.conns, conn)
	s.mu.Unlock()
	s.wg.Go(func() {
		if err := s.Serve(conn, rank); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, fmt.Errorf("rank %d: %w", rank, err))
			s.mu.Unlock()
		}
	})
}

// Close stops serving: connections are closed and fences waiting for absent processes
// give up.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		for _, c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
}

// Wait waits for every connection served with Go or Socket to end and returns their errors,
// joined. A process that finalized, or closed its connection between two requests, ended
// without error.
func (s *Server) Wait() error {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Serve speaks PMI on conn for the process of the given rank until the process finalizes
// or closes the connection, in the version the process asks for in its first line.
func (s *Server) Serve(conn net.Conn, rank int) error {
	defer conn.Close()
	r := bufio.NewReaderSize(conn, pmi.MaxMessage)
	m, err := pmi.ReadV1(r)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if m.Cmd != "init" {
		return fmt.Errorf("first request %q, want cmd=init", m)
	}
	v, _ := m.Get("pmi_version")
	switch v {
	case "1":
		if err := write(conn, false, "response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0"); err != nil {
			return err
		}
		return s.serveV1(conn, r, rank)
	case "2":
		if err := write(conn, false, "response_to_init", "pmi_version", "2", "pmi_subversion", "0", "rc", "0"); err != nil {
			return err
		}
		return s.serveV2(conn, r, rank)
	}
	write(conn, false, "response_to_init", "rc", "1", "msg", "unsupported_version")
	return fmt.Errorf("unsupported version in %q", m)
}

// loop answers the requests that read returns with answer, until the process closes the
// connection (read returns io.EOF) or answer is done (the process finalized) or fails.
func loop(read func() (pmi.Message, error), answer func(pmi.Message) (done bool, err error)) error {
	for {
		m, err := read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if done, err := answer(m); done || err != nil {
			return err
		}
	}
}

func (s *Server) serveV1(conn net.Conn, r *bufio.Reader, rank int) error {
	return loop(func() (pmi.Message, error) { return pmi.ReadV1(r) }, func(m pmi.Message) (bool, error) {
		key, _ := m.Get("key")
		switch m.Cmd {
		case "get_maxes":
			return false, write(conn, false, "maxes", "kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")
		case "get_my_kvsname":
			return false, write(conn, false, "my_kvsname", "kvsname", s.kvsname)
		case "get_appnum":
			return false, write(conn, false, "appnum", "appnum", "0")
		case "put":
			if kvs, _ := m.Get("kvsname"); kvs != s.kvsname {
				return true, fmt.Errorf("%q names another key-value space than %s", m, s.kvsname)
			}
			val, _ := m.Get("value")
			s.put(key, val)
			return false, write(conn, false, "put_result", "rc", "0", "msg", "success")
		case "barrier_in":
			if err := s.fence(); err != nil {
				return true, err
			}
			return false, write(conn, false, "barrier_out")
		case "get":
			if val, ok := s.get(key); ok {
				return false, write(conn, false, "get_result", "rc", "0", "msg", "success", "value", val)
			}
			return false, write(conn, false, "get_result", "rc", "-1", "msg", "key_"+key+"_not_found")
		case "finalize":
			return true, write(conn, false, "finalize_ack")
		}
		return true, fmt.Errorf("unexpected request %q", m)
	})
}

func (s *Server) serveV2(conn net.Conn, r *bufio.Reader, rank int) error {
	return loop(func() (pmi.Message, error) { return pmi.ReadV2(r) }, func(m pmi.Message) (bool, error) {
		key, _ := m.Get("key")
		switch m.Cmd {
		case "fullinit":
			if id, _ := m.Get("pmirank"); id != strconv.Itoa(rank) {
				return true, fmt.Errorf("%q names rank %s, this is rank %d", m, id, rank)
			}
			return false, write(conn, true, "fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0",
				"rank", strconv.Itoa(rank), "size", strconv.Itoa(s.size), "appnum", "-1", "debugged", "FALSE", "pmiverbose", "FALSE")
		case "job-getid":
			return false, write(conn, true, "job-getid-response", "rc", "0", "jobid", s.kvsname)
		case "kvs-put":
			val, _ := m.Get("value")
			s.put(key, val)
			return false, write(conn, true, "kvs-put-response", "rc", "0")
		case "kvs-fence":
			if err := s.fence(); err != nil {
				return true, err
			}
			return false, write(conn, true, "kvs-fence-response", "rc", "0")
		case "kvs-get":
			if val, ok := s.get(key); ok {
				return false, write(conn, true, "kvs-get-response", "rc", "0", "found", "TRUE", "value", val)
			}
			return false, write(conn, true, "kvs-get-response", "rc", "0", "found", "FALSE")
		case "finalize":
			return true, write(conn, true, "finalize-response", "rc", "0")
		}
		return true, fmt.Errorf("unexpected request %q", m)
	})
}

func (s *Server) put(key, val string) {
	s.mu.Lock()
	s.pending[key] = val
	s.mu.Unlock()
}

func (s *Server) get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.visible[key]
	return v, ok
}

// fence returns when every process of the job has reached it.
func (s *Server) fence() error {
	s.mu.Lock()
	s.arrived++
	fenced := s.fenced
	if s.arrived == s.size {
		for k, v := range s.pending {
			s.visible[k] = v
		}
		clear(s.pending)
		s.arrived = 0
		close(s.fenced)
		s.fenced = make(chan struct{})
	}
	s.mu.Unlock()
	select {
	case <-fenced:
		return nil
	case <-s.done:
		return errors.New("server closed during a fence")
	}
}

func write(w io.Writer, v2 bool, cmd string, kv ...string) error {
	m := pmi.Message{Cmd: cmd}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Attrs = append(m.Attrs, pmi.Attr{Key: kv[i], Value: kv[i+1]})
	}
	var b []byte
	if v2 {
		b = pmi.AppendV2(nil, m)
	} else {
		b = pmi.AppendV1(nil, m)
	}
	_, err := w.Write(b)
	return err
}
