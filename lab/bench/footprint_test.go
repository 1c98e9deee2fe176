package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A trace of three entries of the marked function, which make two windows of one entry:
// the first touches three data lines on three pages (one of them twice, one load and store
// at once) from two functions' instructions on two code lines and pages; the second, one
// line that another function touches first.
const testTrace = `==1== Lackey, an example Valgrind tool
I  00001000,3
 L 00010000,8
 S 00010008,8
I  00002000,2
 L 00020040,8
 M 00030000,4
I  00001000,3
I  00002000,2
 L 00010000,8
I  00001000,3
 L 00050000,8
`

const testSymbols = `0000000000002000 T other
0000000000001000 t mark
                 U undefined
not a symbol line
`

func TestMeasureWindows(t *testing.T) {
	syms := parseSymbols(testSymbols)
	at, end, ok := syms.span("mark")
	if !ok || at != 0x1000 || end != 0x2000 {
		t.Fatalf("mark at [%#x, %#x), %v; want [0x1000, 0x2000)", at, end, ok)
	}
	if _, end, _ := syms.span("other"); end != ^uint64(0) {
		t.Errorf("the last function ends at %#x, want the end of the address space", end)
	}
	if got := syms.name(0x2004); got != "other" {
		t.Errorf("0x2004 is in %q, want other", got)
	}
	if got := syms.name(0x10); got != "?" {
		t.Errorf("an address before the text is in %q, want ?", got)
	}
	n, err := countEntries(strings.NewReader(testTrace), at)
	if err != nil || n != 3 {
		t.Fatalf("%d entries, %v; want 3", n, err)
	}
	w, err := measureWindows(strings.NewReader(testTrace), at, end, 1, 0, n, syms)
	if err != nil {
		t.Fatal(err)
	}
	want := []footprintWindow{
		{dataLines: 3, codeLines: 2, dataPages: 3, codePages: 2, instrs: 2, outside: 1},
		{dataLines: 1, codeLines: 2, dataPages: 1, codePages: 2, instrs: 2, outside: 1},
	}
	if !slices.Equal(w.windows, want) {
		t.Fatalf("windows %+v, want %+v", w.windows, want)
	}
	if w.first["mark"] != 1 || w.first["other"] != 3 {
		t.Errorf("first touches %v, want mark 1 and other 3", w.first)
	}
	if w.instrs["mark"] != 2 || w.instrs["other"] != 2 {
		t.Errorf("instructions %v, want mark 2 and other 2 (the third entry starts no whole window)", w.instrs)
	}
	r := w.row(1, 1)
	if r.Windows != 2 || r.DataLines != 3 || r.CodePages != 2 || r.Instrs != 2 || r.Outside != 1 ||
		len(r.FirstTouch) != 1 || r.FirstTouch[0] != (footprintFunc{"other", 1.5}) ||
		len(r.TopInstrs) != 1 || r.TopInstrs[0] != (footprintFunc{"mark", 1}) {
		t.Errorf("row %+v", r)
	}
	// The entries from 1 on: the second window alone.
	if w, _ := measureWindows(strings.NewReader(testTrace), at, end, 1, 1, n, syms); !slices.Equal(w.windows, want[1:]) {
		t.Errorf("windows from the second entry: %+v, want %+v", w.windows, want[1:])
	}
}

// TestFootprintRuns runs the command on a short job and finds ORWL's arrays and the
// library's functions among the lines a process touches, and Open MPI's row beside it.
func TestFootprintRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two jobs under valgrind")
	}
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("no valgrind")
	}
	out := t.TempDir()
	if err := commands["footprint"].run([]string{"-procs", "2", "-iters", "40", "-window", "4", "-top", "40", "-out", out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "footprint.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []footprintRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || rows[0].Contender != "orwl" {
		t.Fatalf("rows %+v, want orwl first", rows)
	}
	o := rows[0]
	if o.Windows < 4 || o.DataLines <= 2*1000*8/64 || o.CodeLines == 0 || o.DataPages == 0 || o.CodePages == 0 {
		t.Errorf("orwl: %+v; want 4 windows or more, more data lines than its two arrays of 1000 cells", o)
	}
	if o.Outside <= 0 || o.Instrs <= o.Outside+1000 {
		t.Errorf("orwl: %d instructions an iteration, %d outside the kernel; want the kernel's 1000 cells among them", o.Instrs, o.Outside)
	}
	found := map[string]bool{}
	for _, f := range o.FirstTouch {
		found[f.Name] = true
	}
	for _, name := range []string{"github.com/orwl-go/orwl/examples/stencil/jacobi.line3", "github.com/orwl-go/orwl/handle.(*Handle).Acquire"} {
		if !found[name] {
			t.Errorf("%s touched no line first: %+v", name, o.FirstTouch)
		}
	}
	if len(o.TopInstrs) == 0 || o.TopInstrs[0].Name != "github.com/orwl-go/orwl/examples/stencil/jacobi.line3" {
		t.Errorf("the kernel does not run the most instructions: %+v", o.TopInstrs)
	}
	if _, err := exec.LookPath("mpicc"); err == nil && (len(rows) != 2 || rows[1].DataLines == 0) {
		t.Errorf("Open MPI's row: %+v", rows[1:])
	}
}
