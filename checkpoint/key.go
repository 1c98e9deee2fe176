package checkpoint

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kind says what a piece holds.
type Kind uint8

const (
	// Location is the content of a task's location.
	Location Kind = iota
	// State is a task's registered private state.
	State
)

// String returns "location" or "state".
func (k Kind) String() string {
	switch k {
	case Location:
		return "location"
	case State:
		return "state"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the kind as its String.
func (k Kind) MarshalText() ([]byte, error) {
	if k > State {
		return nil, fmt.Errorf("checkpoint: unknown piece kind %d", k)
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads "location" or "state".
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "location":
		*k = Location
	case "state":
		*k = State
	default:
		return fmt.Errorf("checkpoint: unknown piece kind %q", b)
	}
	return nil
}

// Key names a piece of a checkpoint. It belongs to a task, not to a process, so a job may
// restart on any number of processes.
type Key struct {
	Kind Kind   `json:"kind"`
	Task int    `json:"task"`
	Name string `json:"name"` // the location's name, or the state's name
}

// LocationKey names the content of task's location name.
func LocationKey(task int, name string) Key { return Key{Kind: Location, Task: task, Name: name} }

// StateKey names task's registered private state name.
func StateKey(task int, name string) Key { return Key{Kind: State, Task: task, Name: name} }

// String returns, e.g., `task 3 location "block"`.
func (k Key) String() string {
	return fmt.Sprintf("task %d %v %q", k.Task, k.Kind, k.Name)
}

// Compare orders keys by task, kind, then name (the order of a manifest's pieces).
func (k Key) Compare(o Key) int {
	switch {
	case k.Task != o.Task:
		return cmpInt(k.Task, o.Task)
	case k.Kind != o.Kind:
		return cmpInt(int(k.Kind), int(o.Kind))
	}
	return strings.Compare(k.Name, o.Name)
}

func cmpInt(a, b int) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// maxName bounds a key's name so that its file name stays under the usual 255 bytes.
const maxName = 200

// check says what is wrong with k, or nil.
func (k Key) check() error {
	switch {
	case k.Kind > State:
		return fmt.Errorf("checkpoint: piece %v: unknown kind", k)
	case k.Task < 0:
		return fmt.Errorf("checkpoint: piece %v: negative task", k)
	case k.Name == "":
		return fmt.Errorf("checkpoint: piece %v: empty name", k)
	case len(k.Name) > maxName:
		return fmt.Errorf("checkpoint: piece %v: name longer than %d bytes", k, maxName)
	}
	return nil
}

// fileName is the name of k's file in a checkpoint's directory: "location.3.block", the
// name's bytes other than letters, digits, '_' and '-' written as %XX.
func (k Key) fileName() string {
	var b strings.Builder
	b.WriteString(k.Kind.String())
	b.WriteByte('.')
	b.WriteString(strconv.Itoa(k.Task))
	b.WriteByte('.')
	for i := 0; i < len(k.Name); i++ {
		c := k.Name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// PieceInfo describes a piece as written: its key, its size in bytes and the CRC-32
// (Castagnoli) of its content. A manifest lists the PieceInfos of the pieces of
// the job.
type PieceInfo struct {
	Key
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
	// Inline says that the manifest holds the piece's content itself, Data (base64): an
	// InlinePiece, of which no directory has a file.
	Inline bool   `json:"inline,omitempty"`
	Data   string `json:"data,omitempty"`
}

// InlineMax is the most bytes of a piece that a manifest may hold itself (InlinePiece).
const InlineMax = 64

// InlinePiece returns the PieceInfo of the piece key whose content, data (at most InlineMax
// bytes: a stencil's halo, a counter), the manifest holds itself. Such a piece is listed in
// Commit's pieces like the others but written by no Store: no file to write, fsync or lose
// with a node, since every manifest that lists it has it.
func InlinePiece(key Key, data []byte) (PieceInfo, error) {
	if err := key.check(); err != nil {
		return PieceInfo{}, err
	}
	if len(data) > InlineMax {
		return PieceInfo{}, fmt.Errorf("checkpoint: piece %v: %d bytes, more than a manifest holds (%d)", key, len(data), InlineMax)
	}
	return PieceInfo{Key: key, Size: int64(len(data)), CRC: Checksum(data), Inline: true,
		Data: base64.StdEncoding.EncodeToString(data)}, nil
}

// checkEntry says what is wrong with p as a manifest lists it, or nil: its key, a negative
// size, an inline piece longer than InlineMax or whose data is not as its size and checksum
// say (an error matching ErrCorrupt), data given for a piece that is not inline.
func (p PieceInfo) checkEntry() error {
	if err := p.Key.check(); err != nil {
		return err
	}
	switch {
	case p.Size < 0:
		return fmt.Errorf("checkpoint: piece %v: negative size %d", p.Key, p.Size)
	case p.Inline && p.Size > InlineMax:
		return fmt.Errorf("checkpoint: piece %v: inline, of %d bytes; at most %d", p.Key, p.Size, InlineMax)
	case p.Inline:
		_, err := p.content()
		return err
	case p.Data != "":
		return fmt.Errorf("checkpoint: piece %v: data in the manifest of a piece that is not inline", p.Key)
	}
	return nil
}

// content returns an inline piece's content, checked against its size and checksum (an
// error matching ErrCorrupt when it differs).
func (p PieceInfo) content() ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(p.Data)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: piece %v in the manifest: %v", ErrCorrupt, p.Key, err)
	case int64(len(b)) != p.Size || Checksum(b) != p.CRC:
		return nil, fmt.Errorf("%w: piece %v in the manifest: %d bytes, crc32c %08x; listed as %d bytes, crc32c %08x",
			ErrCorrupt, p.Key, len(b), Checksum(b), p.Size, p.CRC)
	}
	return b, nil
}

// ErrCorrupt is matched (errors.Is) by the error of a piece whose content does not match
// its checksum or size.
var ErrCorrupt = errors.New("checkpoint: piece corrupted")
