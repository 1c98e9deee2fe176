package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxMessage bounds one message on the wire, either version: a longer line or a larger
// length prefix is a protocol error, so a confused peer cannot make a process buffer
// without end.
const MaxMessage = 64 << 10

// v2LenSize is the width of PMI-2's length prefix: the decimal length of the body, padded
// with spaces. Clients and SLURM left-align it ("42    "), Hydra right-aligns it
// ("    42"); ReadV2 takes both.
const v2LenSize = 6

// ErrMalformed is wrapped by every error about bytes that are not a PMI message.
var ErrMalformed = errors.New("malformed PMI message")

// Attr is one key=value attribute of a message.
type Attr struct{ Key, Value string }

// Message is one PMI request or response: the command (the value of its first
// attribute, cmd) and the other attributes in wire order.
type Message struct {
	Cmd   string
	Attrs []Attr
}

// Get returns the value of the first attribute named key.
func (m Message) Get(key string) (string, bool) {
	for _, a := range m.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// String formats m as a PMI-1 line without its newline, for messages.
func (m Message) String() string {
	return strings.TrimSuffix(string(AppendV1(nil, m)), "\n")
}

// AppendV1 appends m in the PMI-1 wire format, "cmd=NAME key=value ...\n". Values are
// written as they are: a value holding a space, a newline or a backslash cannot be
// carried (see ValidValue).
func AppendV1(b []byte, m Message) []byte {
	b = append(b, "cmd="...)
	b = append(b, m.Cmd...)
	for _, a := range m.Attrs {
		b = append(b, ' ')
		b = append(b, a.Key...)
		b = append(b, '=')
		b = append(b, a.Value...)
	}
	return append(b, '\n')
}

// AppendV2 appends m in the PMI-2 wire format: the body "cmd=NAME;key=value;...;"
// preceded by its length in six characters. Values are written as they are: a value
// holding a semicolon cannot be carried (see ValidValue).
func AppendV2(b []byte, m Message) []byte {
	start := len(b)
	b = append(b, "      "...)
	b = append(b, "cmd="...)
	b = append(b, m.Cmd...)
	b = append(b, ';')
	for _, a := range m.Attrs {
		b = append(b, a.Key...)
		b = append(b, '=')
		b = append(b, a.Value...)
		b = append(b, ';')
	}
	n := strconv.Itoa(len(b) - start - v2LenSize)
	copy(b[start:start+v2LenSize], n) // a body over MaxMessage is refused by the reader
	return b
}

// ParseV1 parses one PMI-1 line, with or without its newline: "cmd=NAME" followed by
// attributes separated by spaces, a value ending at the next unescaped space (a backslash
// escapes the character after it), an attribute without "=" having an empty value.
func ParseV1(line []byte) (Message, error) {
	s := strings.TrimSuffix(string(line), "\n")
	if !strings.HasPrefix(s, "cmd=") {
		return Message{}, fmt.Errorf("%w: %q does not start with cmd=", ErrMalformed, clip(s))
	}
	var m Message
	first := true
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		k := i
		for i < len(s) && isKeyByte(s[i]) {
			i++
		}
		key := s[k:i]
		if key == "" || (i < len(s) && s[i] != '=' && s[i] != ' ') {
			return Message{}, fmt.Errorf("%w: bad attribute name at byte %d of %q", ErrMalformed, k, clip(s))
		}
		var val strings.Builder
		if i < len(s) && s[i] == '=' {
			for i++; i < len(s) && s[i] != ' '; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				if s[i] == '\n' || s[i] == 0 {
					return Message{}, fmt.Errorf("%w: control byte in the value of %s in %q", ErrMalformed, key, clip(s))
				}
				val.WriteByte(s[i])
			}
		}
		if first {
			m.Cmd, first = val.String(), false
			if m.Cmd == "" {
				return Message{}, fmt.Errorf("%w: empty cmd in %q", ErrMalformed, clip(s))
			}
			continue
		}
		m.Attrs = append(m.Attrs, Attr{key, val.String()})
	}
	return m, nil
}

// ParseV2 parses the body of one PMI-2 message (what follows the length prefix):
// "cmd=NAME;" followed by "key=value;" attributes; the last semicolon may be missing.
func ParseV2(body []byte) (Message, error) {
	s := string(body)
	if !strings.HasPrefix(s, "cmd=") {
		return Message{}, fmt.Errorf("%w: %q does not start with cmd=", ErrMalformed, clip(s))
	}
	var m Message
	for i, field := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
		key, val, ok := strings.Cut(field, "=")
		if !ok || key == "" || strings.IndexFunc(key, func(r rune) bool { return r > 0x7f || !isKeyByte(byte(r)) }) >= 0 {
			return Message{}, fmt.Errorf("%w: bad attribute %q in %q", ErrMalformed, clip(field), clip(s))
		}
		if strings.ContainsAny(val, "\x00\n") {
			return Message{}, fmt.Errorf("%w: control byte in the value of %s in %q", ErrMalformed, key, clip(s))
		}
		if i == 0 {
			if m.Cmd = val; val == "" {
				return Message{}, fmt.Errorf("%w: empty cmd in %q", ErrMalformed, clip(s))
			}
			continue
		}
		m.Attrs = append(m.Attrs, Attr{key, val})
	}
	return m, nil
}

// ReadV1 reads one PMI-1 line from r (whose buffer must hold MaxMessage bytes to accept
// every legal line) and parses it.
func ReadV1(r *bufio.Reader) (Message, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return Message{}, fmt.Errorf("%w: a line longer than %d bytes", ErrMalformed, r.Size())
	case err == io.EOF && len(line) > 0:
		return Message{}, fmt.Errorf("%w: %q: %w", ErrMalformed, clip(string(line)), io.ErrUnexpectedEOF)
	case err != nil:
		return Message{}, err
	}
	return ParseV1(line)
}

// ReadV2 reads one length-prefixed PMI-2 message from r and parses it.
func ReadV2(r io.Reader) (Message, error) {
	var hdr [v2LenSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Message{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil || n <= 0 || n > MaxMessage {
		return Message{}, fmt.Errorf("%w: length prefix %q (want 1 to %d)", ErrMalformed, hdr[:], MaxMessage)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Message{}, err
	}
	return ParseV2(body)
}

// ValidKey reports whether key can name a value in both wire formats: ASCII letters,
// digits, '_', '-' and '/', 1 to 64 of them.
func ValidKey(key string) bool {
	if key == "" || len(key) > 64 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if !isKeyByte(key[i]) {
			return false
		}
	}
	return true
}

// ValidValue reports whether v can be carried unchanged by both wire formats: printable
// ASCII without space, ';' or '\', 1 to 1024 bytes (the smallest value size servers
// commonly offer).
func ValidValue(v string) bool {
	if v == "" || len(v) > 1024 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/'
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
