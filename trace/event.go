package trace

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Event is one Chrome trace event of a [Trace]. Timestamps are integer
// nanoseconds on the trace's time line (the JSON holds microseconds with
// three decimals).
type Event struct {
	Ph   byte   // 'X' complete span, 'i' instant, 's'/'f' flow start/end, 'M' metadata
	Name string // see the package documentation for the names this package writes
	Cat  string // request, grant, wait, section, release, transfer, barrier, fifo, flow, anchor, span, instant
	Pid  int    // process rank
	Tid  int    // track (see TransferTidBase, FIFOTidBase, ProcessTidBase)
	Ts   int64  // start, ns
	Dur  int64  // duration of an 'X' event, ns
	ID   FlowID // flow id of an 's' or 'f' event
	Args Args
}

// Args are the arguments of an event. Which fields are meaningful depends on
// the category: request and wait: Loc, Owner, Mode, Pos; grant, section and
// release: Loc, Owner, Mode; transfer: Loc, Owner, Dir, Peer, Bytes; fifo:
// Task, Mode, and Pos for a request; metadata: Name or SortIndex.
type Args struct {
	Loc       string // location name
	Owner     int    // task owning the location
	Mode      string // "read" or "write"
	Pos       int    // FIFO position
	Bytes     int64  // bytes transferred
	Peer      int    // rank of the other process of a transfer
	Dir       string // "in" or "out"
	Task      int    // FIFO events: the requesting task
	Name      string // process_name, thread_name metadata
	SortIndex int    // process_sort_index, thread_sort_index metadata
}

// Location returns the location named by the arguments.
func (a Args) Location() Loc { return Loc{Task: a.Owner, Name: a.Loc} }

// End returns Ts+Dur.
func (e *Event) End() int64 { return e.Ts + e.Dur }

// Trace is a whole trace: one process's or a merged job's. Events are sorted
// metadata first, then by Ts (stable). A Trace is a plain value: it is not
// safe for concurrent modification.
type Trace struct {
	Events        []Event
	StartUnixNano int64 // wall-clock time (Unix ns) of Ts 0
	Dropped       int64 // events dropped by event limits
}

// Trace returns this process's events as a Trace, with timestamps relative to
// its start corrected by its clock offset. It is meant to be called once the
// tasks are done. Recording may continue meanwhile: the Trace then holds the
// events recorded so far, copied track by track, so a flow at the edge may
// lack its start or end. A nil recorder returns an empty Trace.
func (r *Recorder) Trace() *Trace {
	if r == nil {
		return &Trace{}
	}
	evs, dropped := r.events()
	t := &Trace{Events: evs, StartUnixNano: r.startUnix + r.offset.Load(), Dropped: dropped}
	t.sort()
	return t
}

// Part returns this process's part of the job's trace: Chrome trace JSON on
// the local clock, carrying the rank, wall-clock start and clock offset that
// [Merge] needs. It is a valid trace on its own. Like [Recorder.Trace], it is
// meant for the end of the run; its size is about 150 bytes per event.
func (r *Recorder) Part() []byte {
	var b bytes.Buffer
	_ = r.WritePart(&b) // a bytes.Buffer does not fail
	return b.Bytes()
}

// WritePart writes [Recorder.Part] to w.
func (r *Recorder) WritePart(w io.Writer) error {
	if r == nil {
		return writeJSON(w, nil, false, otherData{Rank: -1})
	}
	evs, dropped := r.events()
	t := Trace{Events: evs}
	t.sort()
	return writeJSON(w, t.Events, false, otherData{Rank: r.rank, StartUnixNano: r.startUnix, ClockOffsetNano: r.offset.Load(), Dropped: dropped})
}

// events converts every track's records to events (local clock).
func (r *Recorder) events() ([]Event, int64) {
	r.mu.Lock()
	tracks := append([]*Track(nil), r.tracks...)
	name := r.name
	r.mu.Unlock()
	var dropped int64
	n := 2
	snaps := make([][]rec, len(tracks))
	for i, t := range tracks {
		var d int64
		snaps[i], d = t.snapshot()
		dropped += d
		n += 2 + len(snaps[i]) + len(snaps[i])/2 // events, and room for flow events
	}
	// The names are read after the snapshots, so they include every name the
	// snapshots use.
	r.mu.Lock()
	names := r.names[:len(r.names):len(r.names)]
	r.mu.Unlock()
	pid := r.rank
	evs := make([]Event, 0, n)
	evs = append(evs,
		// Process metadata on the process track's tid, so that viewers do
		// not invent a thread 0 in every process.
		Event{Ph: 'M', Name: "process_name", Pid: pid, Tid: ProcessTidBase + pid, Args: Args{Name: name}},
		Event{Ph: 'M', Name: "process_sort_index", Pid: pid, Tid: ProcessTidBase + pid, Args: Args{SortIndex: pid}})
	for i, t := range tracks {
		evs = append(evs,
			Event{Ph: 'M', Name: "thread_name", Pid: pid, Tid: t.tid, Args: Args{Name: t.name}},
			Event{Ph: 'M', Name: "thread_sort_index", Pid: pid, Tid: t.tid, Args: Args{SortIndex: t.sort}})
		recs := snaps[i]
		for j := range recs {
			evs = appendRec(evs, pid, t.tid, &recs[j], names[recs[j].name])
		}
	}
	return evs, dropped
}

var fifoNames = [...]string{kFIFORequest: "request", kFIFOGrant: "grant", kFIFORelease: "release", kFIFOCancel: "cancel"}

// flowEvent is the flow start (ph 's') or end (ph 'f') of record e.
func flowEvent(ph byte, pid, tid int, e *rec) Event {
	return Event{Ph: ph, Name: "grant", Cat: "flow", Pid: pid, Tid: tid, Ts: e.ts, ID: e.flow}
}

func appendRec(evs []Event, pid, tid int, e *rec, name string) []Event {
	ev := Event{Pid: pid, Tid: tid, Ts: e.ts, Dur: e.dur}
	loc := Args{Loc: name, Owner: int(e.a), Mode: modeName(e.mode)}
	switch e.kind {
	case kRequest:
		ev.Ph, ev.Name, ev.Cat = 'i', "request", "request"
		ev.Args = loc
		ev.Args.Pos = int(e.b)
	case kGrant:
		ev.Ph, ev.Name, ev.Cat, ev.Args = 'X', "grant", "grant", loc
		evs = append(evs, ev)
		if e.flow != 0 {
			evs = append(evs, flowEvent('f', pid, tid, e))
		}
		return evs
	case kWait:
		ev.Ph, ev.Name, ev.Cat, ev.Args = 'X', "wait", "wait", loc
		ev.Args.Pos = int(e.b)
	case kSection:
		ev.Ph, ev.Name, ev.Cat, ev.Args = 'X', name, "section", loc
	case kRelease:
		ev.Ph, ev.Name, ev.Cat, ev.Args = 'X', "release", "release", loc
		return append(evs, ev, flowEvent('s', pid, tid, e))
	case kTransfer:
		ev.Ph, ev.Name, ev.Cat = 'X', "transfer "+e.dir.String(), "transfer"
		ev.Args = Args{Loc: name, Owner: int(e.a), Dir: e.dir.String(), Peer: int(e.c), Bytes: e.bytes}
	case kFlowOut, kFlowIn:
		ev.Ph, ev.Name, ev.Cat = 'X', "flow", "anchor"
		ph := byte('s')
		if e.kind == kFlowIn {
			ph = 'f'
		}
		return append(evs, ev, flowEvent(ph, pid, tid, e))
	case kSpan:
		ev.Ph, ev.Name, ev.Cat = 'X', name, "span"
	case kInstant:
		ev.Ph, ev.Name, ev.Cat = 'i', name, "instant"
	case kBarrier:
		ev.Ph, ev.Name, ev.Cat = 'X', name, "barrier"
	case kFIFORequest, kFIFOGrant, kFIFORelease, kFIFOCancel:
		ev.Ph, ev.Name, ev.Cat = 'i', fifoNames[e.kind], "fifo"
		ev.Args = Args{Task: int(e.a), Mode: modeName(e.mode)}
		if e.kind == kFIFORequest {
			ev.Args.Pos = int(e.b)
		}
	default:
		return evs
	}
	return append(evs, ev)
}

// sort orders events: metadata first, then by timestamp, stable. It sorts
// indices, not the (large) events, then permutes once.
func (t *Trace) sort() {
	evs := t.Events
	idx := make([]int32, len(evs))
	sorted := true
	for i := range idx {
		idx[i] = int32(i)
		if i > 0 && t.less(i, i-1) {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(idx, func(a, b int32) int {
		switch {
		case t.less(int(a), int(b)):
			return -1
		case t.less(int(b), int(a)):
			return 1
		}
		return cmp.Compare(a, b)
	})
	out := make([]Event, len(evs))
	for i, j := range idx {
		out[i] = evs[j]
	}
	t.Events = out
}

func (t *Trace) less(i, j int) bool {
	a, b := &t.Events[i], &t.Events[j]
	if (a.Ph == 'M') != (b.Ph == 'M') {
		return a.Ph == 'M'
	}
	return a.Ts < b.Ts
}

type otherData struct {
	Rank            int   `json:"rank"`
	StartUnixNano   int64 `json:"start_unix_ns"`
	ClockOffsetNano int64 `json:"clock_offset_ns"`
	Dropped         int64 `json:"dropped"`
}

// WriteJSON writes the trace as Chrome trace event JSON:
// {"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}. It opens in
// Perfetto UI and chrome://tracing, and [Parse] reads it back. Flow starts
// that no grant ended are left out, and a release that granted several
// requests (a read group) gets one arrow per grant.
func (t *Trace) WriteJSON(w io.Writer) error {
	return writeJSON(w, t.Events, true, otherData{Rank: -1, StartUnixNano: t.StartUnixNano, Dropped: t.Dropped})
}

func writeJSON(w io.Writer, evs []Event, fixFlows bool, od otherData) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var ends map[FlowID]int
	var seen map[FlowID]int
	if fixFlows {
		ends = make(map[FlowID]int)
		for i := range evs {
			if evs[i].Ph == 'f' {
				ends[evs[i].ID]++
			}
		}
		seen = make(map[FlowID]int)
	}
	bw.WriteString(`{"traceEvents":[`)
	buf := make([]byte, 0, 512)
	first := true
	emit := func(e *Event, id FlowID) {
		buf = buf[:0]
		if !first {
			buf = append(buf, ",\n"...)
		} else {
			buf = append(buf, '\n')
		}
		first = false
		buf = appendEvent(buf, e, id)
		bw.Write(buf)
	}
	for i := range evs {
		e := &evs[i]
		switch {
		case fixFlows && e.Ph == 's':
			n := ends[e.ID]
			for k := 0; k < n; k++ {
				emit(e, e.ID|FlowID(k)<<56)
			}
		case fixFlows && e.Ph == 'f':
			k := seen[e.ID]
			seen[e.ID] = k + 1
			emit(e, e.ID|FlowID(k)<<56)
		default:
			emit(e, e.ID)
		}
	}
	buf = append(buf[:0], "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"rank\":"...)
	buf = strconv.AppendInt(buf, int64(od.Rank), 10)
	buf = append(buf, `,"start_unix_ns":`...)
	buf = strconv.AppendInt(buf, od.StartUnixNano, 10)
	buf = append(buf, `,"clock_offset_ns":`...)
	buf = strconv.AppendInt(buf, od.ClockOffsetNano, 10)
	buf = append(buf, `,"dropped":`...)
	buf = strconv.AppendInt(buf, od.Dropped, 10)
	buf = append(buf, "}}\n"...)
	bw.Write(buf)
	return bw.Flush()
}

func appendEvent(b []byte, e *Event, id FlowID) []byte {
	b = append(b, `{"ph":"`...)
	b = append(b, e.Ph)
	b = append(b, `","name":`...)
	b = appendString(b, e.Name)
	if e.Cat != "" {
		b = append(b, `,"cat":`...)
		b = appendString(b, e.Cat)
	}
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(e.Pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(e.Tid), 10)
	if e.Ph == 'M' {
		b = append(b, `,"args":{`...)
		if strings.HasSuffix(e.Name, "_sort_index") {
			b = append(b, `"sort_index":`...)
			b = strconv.AppendInt(b, int64(e.Args.SortIndex), 10)
		} else {
			b = append(b, `"name":`...)
			b = appendString(b, e.Args.Name)
		}
		return append(b, "}}"...)
	}
	b = append(b, `,"ts":`...)
	b = appendMicros(b, e.Ts)
	switch e.Ph {
	case 'X':
		b = append(b, `,"dur":`...)
		b = appendMicros(b, e.Dur)
	case 'i':
		b = append(b, `,"s":"t"`...)
	case 's', 'f':
		b = append(b, `,"id":"0x`...)
		b = strconv.AppendUint(b, uint64(id), 16)
		b = append(b, '"')
		if e.Ph == 'f' {
			b = append(b, `,"bp":"e"`...)
		}
	}
	a := &e.Args
	switch e.Cat {
	case "request", "wait", "grant", "section", "release":
		b = appendLocArgs(b, a)
		b = append(b, `,"mode":`...)
		b = appendString(b, a.Mode)
		if e.Cat == "request" || e.Cat == "wait" {
			b = append(b, `,"pos":`...)
			b = strconv.AppendInt(b, int64(a.Pos), 10)
		}
		b = append(b, '}')
	case "transfer":
		b = appendLocArgs(b, a)
		b = append(b, `,"dir":`...)
		b = appendString(b, a.Dir)
		b = append(b, `,"peer":`...)
		b = strconv.AppendInt(b, int64(a.Peer), 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, a.Bytes, 10)
		b = append(b, '}')
	case "fifo":
		b = append(b, `,"args":{"task":`...)
		b = strconv.AppendInt(b, int64(a.Task), 10)
		b = append(b, `,"mode":`...)
		b = appendString(b, a.Mode)
		if e.Name == "request" {
			b = append(b, `,"pos":`...)
			b = strconv.AppendInt(b, int64(a.Pos), 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendLocArgs opens the args object of an event on a location with its
// "loc" and "owner" members.
func appendLocArgs(b []byte, a *Args) []byte {
	b = append(b, `,"args":{"loc":`...)
	b = appendString(b, a.Loc)
	b = append(b, `,"owner":`...)
	return strconv.AppendInt(b, int64(a.Owner), 10)
}

// appendMicros writes ns as microseconds with three decimals.
func appendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	if f == 0 {
		return b
	}
	b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	return b
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// jsonEvent is the decoding form of an event.
type jsonEvent struct {
	Ph   string          `json:"ph"`
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	Ts   float64         `json:"ts"`
	Dur  float64         `json:"dur"`
	ID   json.RawMessage `json:"id"`
	Args jsonArgs        `json:"args"`
}

// jsonArgs is the decoding form of [Args]: the same fields, so that one
// converts to the other.
type jsonArgs struct {
	Loc       string `json:"loc"`
	Owner     int    `json:"owner"`
	Mode      string `json:"mode"`
	Pos       int    `json:"pos"`
	Bytes     int64  `json:"bytes"`
	Peer      int    `json:"peer"`
	Dir       string `json:"dir"`
	Task      int    `json:"task"`
	Name      string `json:"name"`
	SortIndex int    `json:"sort_index"`
}

type jsonFile struct {
	TraceEvents []jsonEvent `json:"traceEvents"`
	OtherData   otherData   `json:"otherData"`
}

func nanos(us float64) int64 { return int64(math.Round(us * 1000)) }

func parseID(raw json.RawMessage) (FlowID, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	} else {
		s = string(raw)
	}
	v, err := strconv.ParseUint(s, 0, 64)
	return FlowID(v), err
}

// Parse reads one trace written by this package: a process's part
// ([Recorder.Part]) or a merged trace ([Trace.WriteJSON]). Arguments this
// package does not write are ignored; pid and tid must be numbers.
func Parse(data []byte) (*Trace, error) { return Merge([][]byte{data}) }

// Merge puts the parts of a job on one time line: each part's events are
// shifted by its wall-clock start plus its clock offset, relative to the
// earliest of them. The result's metadata comes first, then its events by
// time. Parts may themselves be merged traces.
func Merge(parts [][]byte) (*Trace, error) {
	files := make([]jsonFile, len(parts))
	var t0 int64 = math.MaxInt64
	n := 0
	for i, p := range parts {
		if err := json.Unmarshal(p, &files[i]); err != nil {
			return nil, fmt.Errorf("trace: part %d: %w", i, err)
		}
		n += len(files[i].TraceEvents)
		if base := files[i].OtherData.StartUnixNano + files[i].OtherData.ClockOffsetNano; base < t0 {
			t0 = base
		}
	}
	if len(parts) == 0 {
		t0 = 0
	}
	out := &Trace{Events: make([]Event, 0, n), StartUnixNano: t0}
	for i := range files {
		f := &files[i]
		shift := f.OtherData.StartUnixNano + f.OtherData.ClockOffsetNano - t0
		out.Dropped += f.OtherData.Dropped
		for j := range f.TraceEvents {
			je := &f.TraceEvents[j]
			if len(je.Ph) != 1 {
				return nil, fmt.Errorf("trace: part %d: event %d: bad phase %q", i, j, je.Ph)
			}
			id, err := parseID(je.ID)
			if err != nil {
				return nil, fmt.Errorf("trace: part %d: event %d: bad id: %w", i, j, err)
			}
			e := Event{Ph: je.Ph[0], Name: je.Name, Cat: je.Cat, Pid: je.Pid, Tid: je.Tid, ID: id, Args: Args(je.Args)}
			if e.Ph != 'M' {
				e.Ts = nanos(je.Ts) + shift
				e.Dur = nanos(je.Dur)
			}
			out.Events = append(out.Events, e)
		}
	}
	out.sort()
	return out, nil
}

// TaskInfo identifies a task of a trace and the process it ran in.
type TaskInfo struct {
	Task int // task id (the tid of its track)
	Rank int // process rank (the pid)
}

// Tasks returns the tasks that have a track in the trace, ordered by process
// rank, then task id.
func (t *Trace) Tasks() []TaskInfo {
	seen := make(map[TaskInfo]bool)
	var out []TaskInfo
	for i := range t.Events {
		e := &t.Events[i]
		if e.Ph == 'M' && !strings.HasPrefix(e.Name, "thread_") {
			continue // process metadata names no task, whatever its tid
		}
		if e.Tid >= 0 && e.Tid < TransferTidBase {
			ti := TaskInfo{Task: e.Tid, Rank: e.Pid}
			if !seen[ti] {
				seen[ti] = true
				out = append(out, ti)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rank != out[j].Rank {
			return out[i].Rank < out[j].Rank
		}
		return out[i].Task < out[j].Task
	})
	return out
}

// Validate checks the trace's structure: on every track the spans ('X'
// events) nest (two spans either are disjoint or one contains the other), and
// every flow end has a flow start no later than itself. It returns nil or the
// problems found, joined (at most 20 of them).
func (t *Trace) Validate() error {
	var errs []error
	add := func(err error) bool {
		errs = append(errs, err)
		return len(errs) < 20
	}
	type key struct{ pid, tid int }
	spans := make(map[key][]*Event)
	starts := make(map[FlowID]*Event)
	var ends []*Event
	for i := range t.Events {
		e := &t.Events[i]
		switch e.Ph {
		case 'X':
			if e.Dur < 0 {
				if !add(fmt.Errorf("trace: %s span %q at %d has negative duration", trackName(e), e.Name, e.Ts)) {
					return errors.Join(errs...)
				}
			}
			k := key{e.Pid, e.Tid}
			spans[k] = append(spans[k], e)
		case 's':
			if starts[e.ID] != nil {
				if !add(fmt.Errorf("trace: flow %#x started twice", uint64(e.ID))) {
					return errors.Join(errs...)
				}
			}
			starts[e.ID] = e
		case 'f':
			ends = append(ends, e)
		}
	}
	keys := make([]key, 0, len(spans))
	for k := range spans {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pid != keys[j].pid {
			return keys[i].pid < keys[j].pid
		}
		return keys[i].tid < keys[j].tid
	})
	for _, k := range keys {
		ss := spans[k]
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].Ts != ss[j].Ts {
				return ss[i].Ts < ss[j].Ts
			}
			return ss[i].Dur > ss[j].Dur
		})
		var stack []*Event
		for _, e := range ss {
			for len(stack) > 0 && stack[len(stack)-1].End() <= e.Ts {
				stack = stack[:len(stack)-1]
			}
			if n := len(stack); n > 0 && e.End() > stack[n-1].End() {
				p := stack[n-1]
				if !add(fmt.Errorf("trace: %s: span %q [%d,%d] overlaps %q [%d,%d] without nesting", trackName(e), e.Name, e.Ts, e.End(), p.Name, p.Ts, p.End())) {
					return errors.Join(errs...)
				}
				continue
			}
			stack = append(stack, e)
		}
	}
	for _, e := range ends {
		s := starts[e.ID]
		switch {
		case s == nil:
			if !add(fmt.Errorf("trace: flow %#x ends at %s %d without a start", uint64(e.ID), trackName(e), e.Ts)) {
				return errors.Join(errs...)
			}
		case e.Ts < s.Ts:
			if !add(fmt.Errorf("trace: flow %#x ends at %s %d before it starts at %s %d", uint64(e.ID), trackName(e), e.Ts, trackName(s), s.Ts)) {
				return errors.Join(errs...)
			}
		}
	}
	return errors.Join(errs...)
}

func trackName(e *Event) string {
	switch {
	case e.Tid >= ProcessTidBase:
		return fmt.Sprintf("rank %d process", e.Pid)
	case e.Tid >= FIFOTidBase:
		return fmt.Sprintf("rank %d fifo track %d", e.Pid, e.Tid)
	case e.Tid >= TransferTidBase:
		return fmt.Sprintf("rank %d task %d transfer lane %d", e.Pid, (e.Tid-TransferTidBase)/Lanes, (e.Tid-TransferTidBase)%Lanes)
	}
	return fmt.Sprintf("rank %d task %d", e.Pid, e.Tid)
}
