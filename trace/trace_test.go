package trace

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orwl-go/orwl/fifo"
)

var sampleOut = flag.String("trace.sample", "", "write the synthetic merged trace JSON to this file (for looking at it)")

func TestMergedSyntheticTrace(t *testing.T) {
	job := synthJob{procs: 3, tasks: 12, iters: 15, work: 3000, skew: 3 * time.Second, correct: true}
	recs := job.run(t)
	tr, err := Merge(parts(recs))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("merged trace does not validate:\n%v", err)
	}
	var buf bytes.Buffer
	if err := tr.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if *sampleOut != "" {
		if err := os.WriteFile(*sampleOut, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The JSON parses with encoding/json and has the Chrome trace shape.
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
		Unit        string           `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if doc.Unit != "ns" {
		t.Errorf("displayTimeUnit = %q, want ns", doc.Unit)
	}
	type key struct {
		pid, tid int
	}
	perTask := map[key]map[string]int{}
	pids := map[int]bool{}
	phs := map[string]int{}
	for _, e := range doc.TraceEvents {
		ph, _ := e["ph"].(string)
		phs[ph]++
		pid, tid := int(e["pid"].(float64)), int(e["tid"].(float64))
		pids[pid] = true
		if ph != "M" && tid < TransferTidBase {
			k := key{pid, tid}
			if perTask[k] == nil {
				perTask[k] = map[string]int{}
			}
			perTask[k][e["cat"].(string)]++
		}
	}
	for _, ph := range []string{"X", "i", "s", "f", "M"} {
		if phs[ph] == 0 {
			t.Errorf("no %q events", ph)
		}
	}
	if phs["s"] != phs["f"] {
		t.Errorf("%d flow starts but %d flow ends: unmatched starts should be pruned, read groups split", phs["s"], phs["f"])
	}
	per := job.tasks / job.procs
	for task := 0; task < job.tasks; task++ {
		got := perTask[key{task / per, task}]
		for _, cat := range []string{"request", "grant", "wait", "section", "release"} {
			if got[cat] == 0 {
				t.Errorf("task %d has no %s events", task, cat)
			}
		}
		if got["section"] != 3*job.iters {
			t.Errorf("task %d: %d sections, want %d", task, got["section"], 3*job.iters)
		}
	}
	for p := 0; p < job.procs; p++ {
		if !pids[p] {
			t.Errorf("no events from process %d", p)
		}
	}

	// Round trip: the written JSON parses back to an equivalent trace.
	back, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("re-parsed trace does not validate: %v", err)
	}
	if len(back.Tasks()) != job.tasks {
		t.Errorf("re-parsed trace has %d tasks, want %d", len(back.Tasks()), job.tasks)
	}
	// Flows cross processes.
	starts := map[FlowID]int{}
	cross := 0
	for _, e := range back.Events {
		if e.Ph == 's' {
			starts[e.ID] = e.Pid
		}
	}
	for _, e := range back.Events {
		if e.Ph == 'f' && starts[e.ID] != e.Pid {
			cross++
		}
	}
	if cross == 0 {
		t.Error("no flow crosses processes")
	}
}

func TestMergeNeedsClockOffsets(t *testing.T) {
	// Process 1 and 2 pretend their wall clocks run ahead; without the
	// offsets measured at start, grants in process 0 appear before the
	// releases (in process 2) that caused them.
	job := synthJob{procs: 3, tasks: 6, iters: 3, work: 200, skew: -time.Second}
	tr, err := Merge(parts(job.run(t)))
	if err != nil {
		t.Fatal(err)
	}
	err = tr.Validate()
	if err == nil || !strings.Contains(err.Error(), "before it starts") {
		t.Fatalf("Validate = %v, want a flow that ends before it starts", err)
	}
}

func TestValidateNesting(t *testing.T) {
	tr := &Trace{Events: []Event{
		{Ph: 'X', Name: "a", Ts: 0, Dur: 10},
		{Ph: 'X', Name: "b", Ts: 2, Dur: 3},
		{Ph: 'X', Name: "c", Ts: 5, Dur: 0},
		{Ph: 'X', Name: "d", Ts: 10, Dur: 5},
		{Ph: 'X', Name: "e", Tid: 1, Ts: 0, Dur: 10},
		{Ph: 'X', Name: "f", Tid: 1, Ts: 5, Dur: 10},
		{Ph: 's', ID: 7, Ts: 3},
		{Ph: 'f', ID: 7, Tid: 1, Ts: 3},
		{Ph: 'f', ID: 8, Tid: 1, Ts: 3},
	}}
	err := tr.Validate()
	if err == nil {
		t.Fatal("Validate = nil")
	}
	msg := err.Error()
	if !strings.Contains(msg, `"f"`) || !strings.Contains(msg, `overlaps "e"`) {
		t.Errorf("want overlap of f and e, got %v", msg)
	}
	if !strings.Contains(msg, "0x8 ends") || strings.Contains(msg, "0x7") {
		t.Errorf("want only flow 0x8 reported, got %v", msg)
	}
	if strings.Count(msg, "\n") != 1 {
		t.Errorf("want exactly two problems, got %v", msg)
	}
}

func TestNilRecorderIsNoOp(t *testing.T) {
	var r *Recorder
	tr := r.TaskTrack(3)
	if tr != nil {
		t.Fatal("nil recorder returned a track")
	}
	l := Loc{Task: 1, Name: "block"}
	tr.Request(l, fifo.Read, 0)
	w := tr.BeginWait(l, fifo.Read, 0)
	tr.Grant(l, fifo.Read, 0)
	w.End()
	s := tr.BeginSection(l, fifo.Read)
	s.End()
	if id := tr.Release(l, fifo.Read); id != 0 {
		t.Errorf("Release on nil track = %v", id)
	}
	tr.BeginTransfer(l, In, 1, 10).End()
	tr.FlowIn(r.NewFlowID())
	r.FIFO(l).Request(1, fifo.Write, 0)
	r.BeginBarrier("schedule").End()
	r.SetClockOffset(time.Second)
	if len(r.Trace().Events) != 0 {
		t.Error("nil recorder has events")
	}
	if _, err := Parse(r.Part()); err != nil {
		t.Errorf("nil recorder's part does not parse: %v", err)
	}
}

func TestFlowIDsUniqueAcrossRanks(t *testing.T) {
	a, b := New(0), New(5)
	seen := map[FlowID]bool{}
	for i := 0; i < 1000; i++ {
		for _, id := range []FlowID{a.NewFlowID(), b.NewFlowID()} {
			if id == 0 || seen[id] {
				t.Fatalf("flow id %#x zero or repeated", uint64(id))
			}
			seen[id] = true
		}
	}
	if id := b.NewFlowID(); uint64(id)>>40 != 5 {
		t.Errorf("rank not in bits 40..: %#x", uint64(id))
	}
}

func TestReadGroupGetsOneArrowPerGrant(t *testing.T) {
	r := New(0)
	w, r1, r2 := r.TaskTrack(0), r.TaskTrack(1), r.TaskTrack(2)
	l := Loc{Task: 0, Name: "block"}
	id := w.Release(l, fifo.Write)
	r1.Grant(l, fifo.Read, id)
	r2.Grant(l, fifo.Read, id)
	w.Release(l, fifo.Write) // nobody granted: no dangling arrow
	var buf bytes.Buffer
	if err := r.Trace().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	var s, f int
	ids := map[FlowID]int{}
	for _, e := range back.Events {
		switch e.Ph {
		case 's':
			s++
			ids[e.ID]++
		case 'f':
			f++
			ids[e.ID]++
		}
	}
	if s != 2 || f != 2 || len(ids) != 2 {
		t.Errorf("got %d starts, %d ends, %d ids; want 2, 2, 2", s, f, len(ids))
	}
}

func TestEventLimit(t *testing.T) {
	r := New(0)
	r.SetEventLimit(10)
	tr := r.TaskTrack(0)
	for i := 0; i < 25; i++ {
		tr.Instant("tick")
	}
	got := r.Trace()
	n := 0
	for _, e := range got.Events {
		if e.Name == "tick" {
			n++
		}
	}
	if n != 10 || got.Dropped != 15 {
		t.Errorf("kept %d, dropped %d; want 10, 15", n, got.Dropped)
	}
}

func TestJSONStringEscaping(t *testing.T) {
	r := New(0)
	r.SetProcessName("rank 0 \"quoted\" \\ \n\x01 \xff")
	tr := r.TaskTrack(0)
	sp := tr.BeginSection(Loc{Task: 0, Name: "a<b>&\"c\""}, fifo.Write)
	sp.End()
	var buf bytes.Buffer
	if err := r.Trace().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.Bytes())
	}
	found := false
	for _, e := range back.Events {
		if e.Cat == "section" && e.Name == "a<b>&\"c\"" && e.Args.Loc == e.Name {
			found = true
		}
		if e.Name == "process_name" && e.Args.Name != "rank 0 \"quoted\" \\ \n\x01 \uFFFD" {
			t.Errorf("process name round trip: %q", e.Args.Name)
		}
	}
	if !found {
		t.Error("section name did not round trip")
	}
}

func TestSummary(t *testing.T) {
	r := New(0)
	tr := r.TaskTrack(0)
	l := Loc{Task: 1, Name: "bound"}
	// Hand-made events with exact times: a 100ns section containing a 30ns
	// wait, a 50ns wait, and a 40ns transfer.
	tr.add(rec{kind: kSection, ts: 0, dur: 100, mode: fifo.Write}, "block")
	tr.add(rec{kind: kWait, ts: 20, dur: 30, a: 1, mode: fifo.Read}, "bound")
	tr.add(rec{kind: kWait, ts: 200, dur: 50, a: 1, mode: fifo.Read}, "bound")
	x := r.transferLane(tr, 0)
	x.add(rec{kind: kTransfer, ts: 210, dur: 40, a: 1, bytes: 1 << 20, dir: In, c: 1}, "bound")
	s := ComputeSummary(r.Trace())
	if len(s.Tasks) != 1 {
		t.Fatalf("%d tasks", len(s.Tasks))
	}
	ts := s.Tasks[0]
	if ts.Compute != 70 || ts.Wait != 80 || ts.Transfer != 40 || ts.Bytes != 1<<20 || ts.MostWaited != l || ts.Span != 250 {
		t.Errorf("summary = %+v", ts)
	}
	if len(s.Locations) != 1 || s.Locations[0].Loc != l || s.Locations[0].Waits != 2 || s.Locations[0].Total != 80 {
		t.Errorf("locations = %+v", s.Locations)
	}
	var out strings.Builder
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compute", "wait", "transfer", "bound@1", "2 waits", "1.00MiB", "70ns"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary text lacks %q:\n%s", want, out.String())
		}
	}
}

// TestWriteLargeSample writes a 64-task, 4-process trace for looking at:
// go test ./trace -run TestWriteLargeSample -trace.large=/tmp/large.json
func TestWriteLargeSample(t *testing.T) {
	if *largeOut == "" {
		t.Skip("no -trace.large file given")
	}
	job := synthJob{procs: 4, tasks: 64, iters: 200, work: 2000}
	tr, err := Merge(parts(job.run(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(*largeOut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tr.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
}

var largeOut = flag.String("trace.large", "", "write a 64-task synthetic trace JSON to this file")

func TestOverlappingTransfersTakeLanes(t *testing.T) {
	r := New(0)
	tr := r.TaskTrack(5)
	l := Loc{Task: 2, Name: "block"}
	a := tr.BeginTransfer(l, In, 1, 100)
	b := tr.BeginTransfer(l, In, 1, 200)
	a.End()
	c := tr.BeginTransfer(l, Out, 1, 300) // lane 0 is free again
	b.End()
	c.End()
	got := r.Trace()
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	lanes := map[int]int64{}
	for _, e := range got.Events {
		if e.Cat == "transfer" {
			lanes[e.Tid] += e.Args.Bytes
		}
	}
	want := map[int]int64{TransferTidBase + 5*Lanes: 400, TransferTidBase + 5*Lanes + 1: 200}
	if len(lanes) != len(want) {
		t.Errorf("lanes used: %v, want %v", lanes, want)
	}
	for tid, n := range want {
		if lanes[tid] != n {
			t.Errorf("lane tid %d carried %d bytes, want %d (all: %v)", tid, lanes[tid], n, lanes)
		}
	}
	if s := ComputeSummary(got); len(s.Tasks) != 1 || s.Tasks[0].Task != 5 || s.Tasks[0].Bytes != 600 {
		t.Errorf("summary %+v", s.Tasks)
	}
}

func TestSnapshotWhileRecording(t *testing.T) {
	r := New(0)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for task := 0; task < 4; task++ {
		wg.Add(1)
		go func(task int) {
			defer wg.Done()
			tr := r.TaskTrack(task)
			fq := r.FIFO(Loc{Task: task, Name: "block"})
			for i := 0; i < 500; i++ {
				select {
				case <-done:
					return
				default:
				}
				l := Loc{Task: (task + 1) % 4, Name: "n" + strconv.Itoa(i%20)} // new names while snapshotting
				tr.Request(l, fifo.Read, i)
				s := tr.BeginSection(l, fifo.Read)
				s.End()
				r.TaskTrack((task+1)%4).Grant(l, fifo.Read, tr.Release(l, fifo.Read))
				fq.Request(task, fifo.Write, i)
			}
		}(task)
	}
	// Snapshots taken while recording parse; their flows may be cut at the
	// edge (a grant recorded after its release's track was copied).
	for i := 0; i < 3; i++ {
		if _, err := Parse(r.Part()); err != nil {
			t.Error(err)
		}
		r.Trace()
	}
	close(done)
	wg.Wait()
	if err := r.Trace().Validate(); err != nil {
		t.Error(err)
	}
}
