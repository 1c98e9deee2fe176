package orwl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/fifo"
)

// TestMessagesRoundTrip: every message of the protocol comes out of its header as it went in.
func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range []requestMsg{
		{loc: 7, ticket: 1<<40 + 3, mode: fifo.Write, initial: true, pos: 12, task: 1<<31 - 1},
		{loc: 1<<24 - 1, ticket: 0, mode: fifo.Read, pos: 0, task: 0},
	} {
		h := m.header()
		if got := decodeRequest(&h); got != m {
			t.Errorf("request %+v came back as %+v", m, got)
		}
	}
	for _, m := range []grantMsg{{loc: 3, ticket: 9, version: 1 << 50, flow: 77, data: true}, {loc: 0, ticket: 1, refused: true}, {loc: 2, ticket: 5, more: true}, {loc: 1, ticket: 4, version: 7, recycle: true}, {loc: 6, ticket: 8, version: 2, view: true, more: true}} {
		h := m.header()
		if got := decodeGrant(&h); got != m {
			t.Errorf("grant %+v came back as %+v", m, got)
		}
	}
	for _, m := range []releaseMsg{{loc: 5, ticket: 2, flow: 1, data: true}, {loc: 5, ticket: 2, failed: true}, {loc: 1, ticket: 3, dropped: true}, {loc: 4, ticket: 6, next: 1<<24 - 1, data: true}} {
		h := m.header()
		if got := decodeRelease(&h); got != m {
			t.Errorf("release %+v came back as %+v", m, got)
		}
	}
	for _, m := range []failMsg{{}, {origin: 3, deadlock: true}, {peerLost: true}, {origin: 1 << 20, deadlock: true, peerLost: true, yields: true}} {
		h := m.header()
		if got := decodeFailure(&h); got != m {
			t.Errorf("failure %+v came back as %+v", m, got)
		}
	}
	for _, s := range []stuckMsg{{form: stuckUp}, {form: stuckProbe, probe: 1 << 33}, {form: stuckAnswers, probe: 7}} {
		if h := s.header(); decodeStuck(&h) != s {
			t.Errorf("stuck %+v did not come back", s)
		}
	}
	for _, p := range []problemsMsg{{}, {all: true}} {
		if h := p.header(); decodeProblems(&h) != p {
			t.Errorf("problems %+v did not come back", p)
		}
	}
	c := clockMsg{asked: 1_700_000_000_000_000_000, answer: 1_700_000_000_000_000_123}
	if h := c.header(); decodeClock(&h) != c {
		t.Errorf("clock %+v did not come back", c)
	}
}

// A decoded grant or release says how long its payload is: the receivers size the mirror or
// the location from it, and read no header.
func TestDecodedSize(t *testing.T) {
	g := grantMsg{loc: 1, ticket: 2, data: true}
	h := g.header()
	h.Len = 4096
	if got := decodeGrant(&h).size; got != 4096 {
		t.Errorf("grant of 4096 bytes decoded with size %d", got)
	}
	r := releaseMsg{loc: 1, ticket: 2, data: true}
	h = r.header()
	h.Len = 24
	if got := decodeRelease(&h).size; got != 24 {
		t.Errorf("release of 24 bytes decoded with size %d", got)
	}
}

// Only protocol.go, protocol_wide.go and protocol_ckpt.go build or read a header: no other
// file of the package names transport.Header.
func TestOnlyProtocolReadsHeaders(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if name == "protocol.go" || name == "protocol_wide.go" || name == "protocol_ckpt.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "Header" {
				if x, ok := s.X.(*ast.Ident); ok && x.Name == "transport" {
					t.Errorf("%s: transport.Header outside protocol.go, protocol_wide.go and protocol_ckpt.go", fset.Position(s.Pos()))
				}
			}
			return true
		})
	}
}
