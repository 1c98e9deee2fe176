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

// -validate refuses a file that is no trace, or whose events lack what they need or say
// the impossible, with one line naming the event and what is wrong; a valid trace passes.
func TestValidateRefusesMalformedTraces(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, json, want string }{
		{"null", `null`, "not a trace"},
		{"empty object", `{}`, `no "traceEvents"`},
		{"events not a list", `{"traceEvents":{}}`, `"traceEvents"`},
		{"event null", `{"traceEvents":[null]}`, "event 0: not an object"},
		{"event without ph", `{"traceEvents":[{"name":"a","pid":0,"tid":0,"ts":1}]}`, `event 0: no "ph"`},
		{"event without ts", `{"traceEvents":[{"ph":"X","name":"a","pid":0,"tid":0,"dur":1}]}`, `event 0: no "ts"`},
		{"event without pid", `{"traceEvents":[{"ph":"i","name":"a","tid":0,"ts":1}]}`, `event 0: no "pid"`},
		{"negative ts", `{"traceEvents":[{"ph":"i","name":"a","pid":0,"tid":0,"ts":-5}]}`, "event 0: timestamp -5"},
		{"absurd ts", `{"traceEvents":[{"ph":"i","name":"a","pid":0,"tid":0,"ts":1e300}]}`, "event 0: timestamp 1e+300"},
		{"negative dur", `{"traceEvents":[{"ph":"X","name":"a","pid":0,"tid":0,"ts":1,"dur":-1}]}`, "event 0: duration -1"},
		{"end without begin", `{"traceEvents":[{"ph":"E","name":"a","pid":0,"tid":0,"ts":1}]}`, "event 0: an end (E) without a begin"},
		{"begin without end", `{"traceEvents":[{"ph":"i","name":"x","pid":0,"tid":0,"ts":0},{"ph":"B","name":"a","pid":0,"tid":3,"ts":1}]}`, "event 1: a begin (B) of \"a\" without an end"},
		{"end before begin", `{"traceEvents":[{"ph":"B","name":"a","pid":0,"tid":0,"ts":5},{"ph":"E","name":"a","pid":0,"tid":0,"ts":2}]}`, "event 1: an end (E) at 2 before its begin at 5"},
	} {
		f := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(f, []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		err := run([]string{f, "-validate", "-summary"}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", c.name, err, c.want)
		}
	}
	good := `{"traceEvents":[{"ph":"B","name":"a","pid":0,"tid":0,"ts":1},{"ph":"E","pid":0,"tid":0,"ts":2},{"ph":"M","name":"process_name","pid":0,"args":{"name":"r"}}]}`
	f := filepath.Join(dir, "good.json")
	os.WriteFile(f, []byte(good), 0o644)
	if err := run([]string{f, "-validate", "-summary"}, io.Discard, io.Discard); err != nil {
		t.Errorf("a valid trace with matched B/E events: %v", err)
	}
	if err := run(append(writeParts(t, dir), "-validate", "-summary"), io.Discard, io.Discard); err != nil {
		t.Errorf("the parts of a job written by package trace: %v", err)
	}
}
