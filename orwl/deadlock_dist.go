package orwl

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/tick"
)

// Deadlock detection. Every watchPeriod each process looks at what its tasks are blocked on
// (detector.look). A job of one process checks itself (checkLocal). In a job of several, a
// process whose tasks are all blocked on requests that are not granted (or have returned),
// and which receives no message's payload (a large write-back arriving over a slow link
// would move somebody when it is complete), is stuck; its report says what its tasks wait
// for and what the requests of other processes in its FIFOs wait for, with its epoch (the
// count of looks that saw it move). The reports travel to rank 0 along the job's tree
// (tree.go), and only when they change: at each look a process sends its parent one
// message with the reports of its subtree that changed since it last sent (its own when its
// epoch changed, its children's as they came), so rank 0 receives at most one message per
// child and look, and nothing while nothing changes. Rank 0 keeps the latest report of
// every process. When it holds one from every process and they show a cycle of waits, it
// confirms it with a probe down the tree: every process answers, after a look that began
// once the probe came, with its epoch and whether it is still stuck, and its answer goes up
// merged with its subtree's. Rank 0 declares the deadlock when every answer is stuck with
// the epoch of the report it used: nobody moved between its report and the probe, which
// left after the last report arrived, and a message in flight would have moved its
// receiver.

// watchPeriod is how often a process looks at its tasks.
const watchPeriod = 100 * time.Millisecond

// stuckReport is what one stuck process tells rank 0.
type stuckReport struct {
	Waits  []waitRecord   // its blocked tasks
	Served []servedRecord // requests of other processes in its FIFOs
}

// waitRecord is a blocked task: on a location of its own process (Holders known), or on a
// remote one (the owner knows them, by ticket).
type waitRecord struct {
	Task, Loc, Pos int
	Write          bool
	Holders        []holder `json:",omitempty"`
	Ticket         uint64   `json:",omitempty"` // the request's id at the owner, when remote
	grants         uint64   // the local location's count of grants (see waitKey); not sent
}

// servedRecord is the state of a remote request in one of this process's FIFOs.
type servedRecord struct {
	From    int
	Ticket  uint64
	Granted bool
	Holders []holder `json:",omitempty"`
}

// watch looks for deadlocks until ctx is done: in this process alone, or by reporting this
// process to rank 0 while it is stuck.
func (j *job) watch(ctx context.Context) {
	tick.Every(ctx, watchPeriod, j.look)
	if j.node != nil {
		j.node.logCounts() // the watch runs until the job's end
	}
}

// look looks for a deadlock once; it returns false when this process cannot report any
// more (its mesh is closed).
func (j *job) look() bool {
	if j.node == nil {
		j.checkLocal()
		return true
	}
	probe := j.node.probing() // the look that answers a probe begins after it came
	epoch, report, stuck := j.stuckReport()
	return j.node.looked(probe, stuckEntry{Rank: j.rank, Epoch: epoch, Report: report}, stuck)
}

// stuckReport describes this process when all its tasks are blocked on requests that are
// not granted, or have returned (or it runs none): it is part of a deadlock only if the
// other processes are stuck too.
func (j *job) stuckReport() (epoch uint64, r stuckReport, stuck bool) {
	waits, stuck, _ := j.det.look(j.local)
	if !stuck || j.mesh.Receiving() { // data on its way here will move somebody
		return 0, r, false
	}
	r.Waits = waits
	r.Served = j.servedRecords()
	return j.det.epoch, r, true
}

// servedRecords lists the requests of other processes in this process's FIFOs.
func (j *job) servedRecords() []servedRecord {
	var recs []servedRecord
	for _, l := range j.owned {
		if l == nil {
			continue
		}
		l.mu.Lock()
		if rec, ok := l.pairServedRecord(); ok {
			recs = append(recs, rec)
		}
		holders := l.holders()
		l.fifo.Each(func(r *fifo.Request) {
			if r.State() == fifo.Cancelled {
				return
			}
			var rec servedRecord
			switch s := r.Tag.(type) {
			case *served:
				rec = servedRecord{From: s.from, Ticket: s.id}
			case *pairServed:
				rec = servedRecord{From: s.l.pair.rank, Ticket: s.l.pair.hdr.ticket.Load()}
			default:
				return
			}
			rec.Granted = r.State() == fifo.Granted
			if !rec.Granted {
				rec.Holders = holders
			}
			recs = append(recs, rec)
		})
		l.mu.Unlock()
	}
	return recs
}

// stuckEntry is the report of a stuck process, and stuckAnswer a process's answer to a
// probe, as they travel up the tree.
type (
	stuckEntry struct {
		Rank   int
		Epoch  uint64
		Report stuckReport
	}
	stuckAnswer struct {
		Rank  int
		Epoch uint64
		Stuck bool
	}
)

// deadlockWatch is a process's part of the deadlock watch; jobWide.mu guards it.
type deadlockWatch struct {
	// The reports to send up at the next look, by rank: this process's, and its subtree's.
	pending map[int]stuckEntry
	sent    bool   // this process's report was sent (put in pending), and it is still stuck, ...
	epoch   uint64 // ... with this epoch
	// The probe being answered (0: none), the answers of this process and its subtree so
	// far, and how many children have not answered yet.
	probe   uint64
	answers []stuckAnswer
	looked  bool
	waiting int

	// Rank 0: the latest report of every process (nil until one came), whether one changed
	// since the last search for a cycle, the number of the last probe, and the cycle that
	// the probe in flight confirms, with the epochs of the reports it was found in.
	reports []*stuckEntry
	changed bool
	probes  uint64
	cycle   *DeadlockError
	epochs  []uint64
}

// probing returns the number of the probe this process answers at its next look, 0 when
// none.
func (n *node) probing() uint64 {
	n.wide.mu.Lock()
	defer n.wide.mu.Unlock()
	return n.wide.watch.probe
}

// looked takes this process's look, which began after probe came (0: none) and found it
// stuck or not with the report e: e goes up when it changed, with the changed reports of
// the subtree, and the answer to probe when the subtree's are in. It returns false when
// this process cannot send any more (its mesh is closed).
func (n *node) looked(probe uint64, e stuckEntry, stuck bool) bool {
	n.wide.mu.Lock()
	w := &n.wide.watch
	if stuck && (!w.sent || e.Epoch != w.epoch) {
		w.sent, w.epoch = true, e.Epoch
		n.pend([]stuckEntry{e})
	}
	// A look that finds this process not stuck makes the next one that finds it stuck send
	// its report again, even with the same epoch (a payload was on its way in): rank 0,
	// whose probe may have found it not stuck meanwhile, then searches again.
	w.sent = w.sent && stuck
	ok := true
	if len(w.pending) > 0 && n.j.rank != 0 {
		ok = n.sendStuck(stuckMsg{form: stuckUp}, slices.Collect(maps.Values(w.pending)))
		clear(w.pending)
	}
	var deadlock *DeadlockError
	if probe != 0 && probe == w.probe && !w.looked {
		w.looked = true
		w.answers = append(w.answers, stuckAnswer{Rank: n.j.rank, Epoch: e.Epoch, Stuck: stuck})
		var sent bool
		sent, deadlock = n.answered()
		ok = ok && sent
	}
	n.wide.mu.Unlock()
	if deadlock != nil {
		n.j.fail(deadlock)
	}
	return ok
}

// pend takes reports of this process's subtree: rank 0 keeps them, the others send them
// up at their next look. jobWide.mu held.
func (n *node) pend(es []stuckEntry) {
	w := &n.wide.watch
	if n.j.rank != 0 {
		if w.pending == nil {
			w.pending = map[int]stuckEntry{}
		}
		for _, e := range es {
			w.pending[e.Rank] = e
		}
		return
	}
	if w.reports == nil {
		w.reports = make([]*stuckEntry, n.j.procs)
	}
	for _, e := range es {
		w.reports[e.Rank] = &e
	}
	w.changed = true
	n.search()
}

// search looks, at rank 0, for a cycle in the latest reports of every process, when one
// changed since the last search and no probe is in flight; it sends a probe down the tree
// to confirm one. jobWide.mu held.
func (n *node) search() {
	w := &n.wide.watch
	if !w.changed || w.cycle != nil || slices.Contains(w.reports, nil) {
		return
	}
	w.changed = false
	reports := make([]*stuckReport, len(w.reports))
	w.epochs = make([]uint64, len(w.reports))
	for r, e := range w.reports {
		reports[r], w.epochs[r] = &e.Report, e.Epoch
	}
	if w.cycle = n.j.findCycle(reports); w.cycle != nil {
		w.probes++
		n.probe(w.probes)
	}
}

// probe starts answering probe number k and sends it on to this process's children.
// jobWide.mu held.
func (n *node) probe(k uint64) {
	w := &n.wide.watch
	children := treeChildren(n.j.rank, n.j.procs)
	w.probe, w.answers, w.looked, w.waiting = k, nil, false, len(children)
	for _, c := range children {
		m := stuckMsg{form: stuckProbe, probe: k}
		n.sendWide(c, m.header(), nil)
	}
}

// answered sends the answers to the probe up once this process's and its subtree's are
// in; at rank 0, it returns the deadlock that the probe confirms, or searches again. It
// returns false when this process cannot send any more. jobWide.mu held.
func (n *node) answered() (sent bool, deadlock *DeadlockError) {
	w := &n.wide.watch
	if !w.looked || w.waiting > 0 {
		return true, nil
	}
	k, answers := w.probe, w.answers
	w.probe, w.answers = 0, nil
	if n.j.rank != 0 {
		return n.sendStuck(stuckMsg{form: stuckAnswers, probe: k}, answers), nil
	}
	cycle := w.cycle
	w.cycle = nil
	confirmed := len(answers) == n.j.procs
	for _, a := range answers {
		confirmed = confirmed && a.Stuck && a.Epoch == w.epochs[a.Rank]
	}
	if confirmed {
		return true, cycle
	}
	n.search() // a report that changed meanwhile, if any
	return true, nil
}

// sendStuck sends m with v in JSON to this process's parent; it returns false when this
// process cannot send any more.
func (n *node) sendStuck(m stuckMsg, v any) bool {
	payload, err := json.Marshal(v)
	if err != nil {
		n.log.Error("orwl: deadlock report", "err", err)
		return true
	}
	return n.sendWide(treeParent(n.j.rank), m.header(), payload) == nil
}

// stuck takes a message of the deadlock watch from a neighbour in the tree.
func (n *node) stuck(from int, m stuckMsg, payload []byte) error {
	n.wide.mu.Lock()
	deadlock, err := n.stuckLocked(from, m, payload)
	n.wide.mu.Unlock()
	if deadlock != nil {
		n.j.fail(deadlock)
	}
	return err
}

// stuckLocked is stuck under jobWide.mu; it returns the deadlock that an answer confirms.
func (n *node) stuckLocked(from int, m stuckMsg, payload []byte) (*DeadlockError, error) {
	w := &n.wide.watch
	switch m.form {
	case stuckUp:
		var es []stuckEntry
		if err := json.Unmarshal(payload, &es); err != nil {
			return nil, fmt.Errorf("deadlock reports: %w", err)
		}
		if err := n.inSubtree("deadlock reports", from, len(es), func(i int) int { return es[i].Rank }); err != nil {
			return nil, err
		}
		n.pend(es)
	case stuckProbe:
		if from != treeParent(n.j.rank) || m.probe == 0 {
			return nil, fmt.Errorf("deadlock probe %d from a process that is not rank %d's parent", m.probe, n.j.rank)
		}
		n.probe(m.probe)
	case stuckAnswers:
		var as []stuckAnswer
		if err := json.Unmarshal(payload, &as); err != nil {
			return nil, fmt.Errorf("deadlock answers: %w", err)
		}
		if err := n.inSubtree("deadlock answers", from, len(as), func(i int) int { return as[i].Rank }); err != nil {
			return nil, err
		}
		if m.probe != w.probe || w.waiting == 0 {
			return nil, fmt.Errorf("an answer to deadlock probe %d, and rank %d awaits none for it", m.probe, n.j.rank)
		}
		w.answers = append(w.answers, as...)
		w.waiting--
		_, deadlock := n.answered()
		return deadlock, nil
	default:
		return nil, fmt.Errorf("a deadlock message of unknown form %d", m.form)
	}
	return nil, nil
}

// findCycle looks for a cycle of waits in the reports of every process.
func (j *job) findCycle(reports []*stuckReport) *DeadlockError {
	waits := map[int]waitRecord{}
	served := map[[2]uint64]servedRecord{}
	for _, r := range reports {
		for _, w := range r.Waits {
			waits[w.Task] = w
		}
		for _, s := range r.Served {
			served[[2]uint64{uint64(s.From), s.Ticket}] = s
		}
	}
	if len(waits) == 0 {
		return nil
	}
	heldBy := map[int]holder{}
	for task, w := range waits {
		holders := w.Holders
		if w.Ticket != 0 {
			s, ok := served[[2]uint64{uint64(j.owner[task]), w.Ticket}]
			if !ok || s.Granted {
				return nil // the request or its grant is still on its way
			}
			holders = s.Holders
		}
		if len(holders) == 0 {
			return nil
		}
		if _, blocked := waits[holders[0].Task]; !blocked {
			return nil // the holder runs: it will release
		}
		heldBy[task] = holders[0]
	}
	return cycleError(heldBy, func(task int) Wait {
		w := waits[task]
		mode := Read
		if w.Write {
			mode = Write
		}
		return Wait{Task: task, Location: j.locationAt(uint32(w.Loc)).String(), Mode: mode, Pos: w.Pos}
	})
}
