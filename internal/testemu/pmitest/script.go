package pmitest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Chunk is bytes that crossed a PMI connection in one direction: FromClient (a process's
// requests) or not (the server's answers).
type Chunk struct {
	FromClient bool
	Data       []byte
}

// Script is a recorded PMI exchange of one process, in the order the bytes crossed. Its
// text form (WriteTo, ParseScript) is one chunk per line, "C " or "S " followed by the
// bytes as a Go string literal; lines starting with "#" are comments.
type Script []Chunk

// WriteTo writes s in its text form.
func (s Script) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	for _, c := range s {
		dir := "S "
		if c.FromClient {
			dir = "C "
		}
		b.WriteString(dir + strconv.Quote(string(c.Data)) + "\n")
	}
	return b.WriteTo(w)
}

// ParseScript reads a script in its text form.
func ParseScript(r io.Reader) (Script, error) {
	var s Script
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		dir, lit, ok := strings.Cut(line, " ")
		data, err := strconv.Unquote(lit)
		if !ok || err != nil || dir != "C" && dir != "S" {
			return nil, fmt.Errorf("pmitest: script line %d: want C or S and a quoted string: %q", n, line)
		}
		s = append(s, Chunk{FromClient: dir == "C", Data: []byte(data)})
	}
	return s, sc.Err()
}

// Requests returns what the client sent, concatenated.
func (s Script) Requests() []byte {
	var b []byte
	for _, c := range s {
		if c.FromClient {
			b = append(b, c.Data...)
		}
	}
	return b
}

// Replay plays the server's side of s on conn: it writes the server's chunks in turn and,
// before each, reads the client's bytes that preceded it in the recording and checks that
// they are the same. It returns at the end of the script, or at the first difference, which
// it reports with both versions.
func Replay(conn io.ReadWriter, s Script) error {
	for i := 0; i < len(s); {
		var want []byte
		for ; i < len(s) && s[i].FromClient; i++ {
			want = append(want, s[i].Data...)
		}
		if len(want) > 0 {
			got := make([]byte, len(want))
			n, err := io.ReadFull(conn, got)
			if !bytes.Equal(got[:n], want) {
				return fmt.Errorf("pmitest: the client sent %q, the recording has %q (%v)", got[:n], want, err)
			}
		}
		for ; i < len(s) && !s[i].FromClient; i++ {
			if _, err := conn.Write(s[i].Data); err != nil {
				return fmt.Errorf("pmitest: writing the recorded answer %q: %w", s[i].Data, err)
			}
		}
	}
	return nil
}

// Recorder relays a process's PMI connection to its launcher's and records what crosses
// it.
type Recorder struct {
	mu     sync.Mutex
	script Script
}

// Relay copies client's bytes to server and server's to client until both directions end
// (each ends when its source reaches EOF or fails; the destination's writing side is then
// shut down where possible), recording every chunk.
func (r *Recorder) Relay(client, server io.ReadWriter) {
	var wg sync.WaitGroup
	wg.Go(func() { r.copy(server, client, true) })
	wg.Go(func() { r.copy(client, server, false) })
	wg.Wait()
}

// Script returns what was recorded so far.
func (r *Recorder) Script() Script {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(Script(nil), r.script...)
}

func (r *Recorder) copy(dst io.Writer, src io.Reader, fromClient bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			r.script = append(r.script, Chunk{FromClient: fromClient, Data: bytes.Clone(buf[:n])})
			r.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return
		}
	}
}
