package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/trace"
)

// writeParts records a small two-process job and writes each part to a file.
func writeParts(t *testing.T, dir string) []string {
	t.Helper()
	p0, p1 := trace.New(0), trace.New(1)
	l := trace.Loc{Task: 0, Name: "block"}
	a, b := p0.TaskTrack(0), p1.TaskTrack(1)
	b.Request(l, fifo.Read, 1)
	w := b.BeginWait(l, fifo.Read, 1)
	s := a.BeginSection(l, fifo.Write)
	s.End()
	id := a.Release(l, fifo.Write)
	x := b.BeginTransfer(l, trace.In, 0, 1024)
	x.End()
	b.Grant(l, fifo.Read, id)
	w.End()
	s = b.BeginSection(l, fifo.Read)
	s.End()
	var files []string
	for i, r := range []*trace.Recorder{p0, p1} {
		f := filepath.Join(dir, "part"+string(rune('0'+i))+".json")
		if err := os.WriteFile(f, r.Part(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func TestSVGFromParts(t *testing.T) {
	dir := t.TempDir()
	files := writeParts(t, dir)
	svg := filepath.Join(dir, "job.svg")
	merged := filepath.Join(dir, "merged.json")
	var out strings.Builder
	// Flags after the file names, as in "orwltrace FILE.json -o FILE.svg".
	if err := run(append(files, "-o", svg, "-json", merged, "-validate"), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 tasks") {
		t.Errorf("output %q", out.String())
	}
	doc, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(doc))
	rows := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && a.Value == "task" {
					rows++
				}
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d task rows, want 2", rows)
	}
	// The merged JSON reads back, and -summary prints from it.
	out.Reset()
	if err := run([]string{"-summary", merged}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 tasks in 2 processes", "block@0", "1.00KiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(strings.TrimSuffix(merged, ".json") + ".svg"); err == nil {
		t.Error("-summary alone wrote an SVG")
	}
}

func TestDefaultOutputName(t *testing.T) {
	dir := t.TempDir()
	files := writeParts(t, dir)
	if err := run(files[:1], io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "part0.svg")); err != nil {
		t.Error(err)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	for _, args := range [][]string{nil, {filepath.Join(dir, "missing.json")}, {bad}, {"-nosuchflag"}} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
	// A width that would eat the machine is refused before anything is read.
	for _, w := range []string{"1000000000", "0", "-5"} {
		err := run([]string{"-width", w, bad}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-width "+w+": want 400 to 100000 pixels") {
			t.Errorf("-width %s: %v", w, err)
		}
	}
}
