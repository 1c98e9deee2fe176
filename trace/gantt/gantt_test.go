package gantt_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/trace/gantt"
)

// recorded records a small job of procs processes and tasks tasks through the public
// recorder: every task waits for and writes its block, reads its left neighbour's bound
// (from another process: a transfer), after a schedule barrier.
func recorded(t *testing.T, procs, tasks, iters int) *trace.Trace {
	t.Helper()
	recs := make([]*trace.Recorder, procs)
	for p := range recs {
		recs[p] = trace.New(p)
		recs[p].BeginBarrier("schedule").End()
	}
	for task := range tasks {
		r := recs[task*procs/tasks]
		tr := r.TaskTrack(task)
		block, bound := trace.Loc{Task: task, Name: "block"}, trace.Loc{Task: (task + tasks - 1) % tasks, Name: "bound"}
		for range iters {
			w := tr.BeginWait(block, fifo.Write, 0)
			w.End()
			tr.Grant(block, fifo.Write, 0)
			tr.BeginSection(block, fifo.Write).End()
			tr.Release(block, fifo.Write)
			tr.BeginTransfer(bound, trace.In, 1-r.Rank(), 8).End()
			tr.Grant(bound, fifo.Read, 0)
			tr.BeginSection(bound, fifo.Read).End()
			tr.Release(bound, fifo.Read)
		}
	}
	parts := make([][]byte, procs)
	for p, r := range recs {
		parts[p] = r.Part()
	}
	merged, err := trace.Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	return merged
}

func TestRenderRecordedTrace(t *testing.T) {
	const tasks = 8
	var buf bytes.Buffer
	if err := gantt.Render(&buf, recorded(t, 2, tasks, 10), &gantt.Options{Title: "recorded"}); err != nil {
		t.Fatal(err)
	}
	rows := checkXML(t, buf.Bytes())
	if len(rows) != tasks {
		t.Fatalf("%d task rows, want %d", len(rows), tasks)
	}
	for i, task := range rows {
		if task != strconv.Itoa(i) {
			t.Errorf("row %d is task %s", i, task)
		}
	}
	for _, want := range []string{"section on block", "section on bound", "acquire wait", "transfer", "schedule barrier", "rank 1", "recorded"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

// TestRenderCapsElements: 64 tasks of 2000 tiny sections each are drawn with about
// MaxElements bars, by merging spans shorter than a pixel.
func TestRenderCapsElements(t *testing.T) {
	var tr trace.Trace
	for task := range 64 {
		for i := range 2000 {
			name := []string{"block", "bound"}[i%2]
			tr.Events = append(tr.Events, trace.Event{Ph: 'X', Name: name, Cat: "section", Tid: task, Ts: int64(i) * 200, Dur: 120,
				Args: trace.Args{Loc: name, Owner: task, Mode: "write"}})
			if i%10 == 0 {
				tr.Events = append(tr.Events, trace.Event{Ph: 'X', Name: "wait", Cat: "wait", Tid: task, Ts: int64(i)*200 + 120, Dur: 60,
					Args: trace.Args{Loc: name, Owner: task, Mode: "write"}})
			}
		}
	}
	var buf bytes.Buffer
	if err := gantt.Render(&buf, &tr, &gantt.Options{MaxElements: 3000}); err != nil {
		t.Fatal(err)
	}
	if rows := checkXML(t, buf.Bytes()); len(rows) != 64 {
		t.Fatalf("%d rows", len(rows))
	}
	if n := bytes.Count(buf.Bytes(), []byte("<rect")); n > 3000+200 {
		t.Errorf("%d rects, want about 3000 at most", n)
	}
	if buf.Len() > 2<<20 {
		t.Errorf("SVG is %d bytes", buf.Len())
	}
}

func TestRenderEmptyTrace(t *testing.T) {
	var buf bytes.Buffer
	if err := gantt.Render(&buf, &trace.Trace{}, nil); err != nil {
		t.Fatal(err)
	}
	if rows := checkXML(t, buf.Bytes()); len(rows) != 0 {
		t.Errorf("%d rows", len(rows))
	}
}

// TestRenderEscapes: names that XML must escape stay a well-formed document.
func TestRenderEscapes(t *testing.T) {
	r := trace.New(0)
	r.SetProcessName("rank 0 \"quoted\" \\ \n\x01 \xff")
	r.TaskTrack(0).BeginSection(trace.Loc{Task: 0, Name: "a<b>&\"c\""}, fifo.Write).End()
	merged, err := trace.Merge([][]byte{r.Part()})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := gantt.Render(&buf, merged, nil); err != nil {
		t.Fatal(err)
	}
	checkXML(t, buf.Bytes())
}

// checkXML decodes the whole document and returns the data-task attribute of every <g
// class="task"> in document order.
func checkXML(t *testing.T, doc []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var rows []string
	sawSVG := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "svg" {
			sawSVG = true
		}
		if se.Name.Local != "g" {
			continue
		}
		var class, task string
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "class":
				class = a.Value
			case "data-task":
				task = a.Value
			}
		}
		if class == "task" {
			rows = append(rows, task)
		}
	}
	if !sawSVG {
		t.Fatal("no <svg> element")
	}
	return rows
}

// A trace, recorded or read back from JSON, drawn as a standalone SVG document.
func Example() {
	r := trace.New(0)
	block := trace.Loc{Task: 0, Name: "block"}
	r.TaskTrack(0).BeginSection(block, fifo.Write).End()
	var svg bytes.Buffer
	err := gantt.Render(&svg, r.Trace(), &gantt.Options{Title: "one section"})
	fmt.Println(err, bytes.HasPrefix(svg.Bytes(), []byte("<svg")) || bytes.Contains(svg.Bytes(), []byte("<svg")))
	// Output: <nil> true
}
