package orwl

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/tick"
)

// Deadlock detection. Every watchPeriod each process looks at what its tasks are blocked on
// (detector.look). A job of one process checks itself (checkLocal). In a job of several, a
// process whose tasks are all blocked on requests that are not granted (or have returned),
// and which receives no message's payload (a large write-back arriving over a slow link
// would move somebody when it is complete), is stuck, and sends rank 0 what its tasks wait for and what the requests of other
// processes in its FIFOs wait for, with its epoch (the count of looks that saw it move).
// Rank 0 declares a deadlock when the reports of every process show a cycle of waits, twice
// in a row with the same epochs: nobody moved in between, and a message in flight would
// have moved its receiver.

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
	epoch, report, stuck := j.stuckReport()
	if !stuck {
		return true
	}
	payload, err := json.Marshal(report)
	if err != nil {
		j.log.Error("orwl: deadlock report", "err", err)
		return true
	}
	m := stuckMsg{epoch: epoch}
	if j.rank == 0 {
		j.node.stuck(0, m, payload)
		return true
	}
	return j.node.sendWide(0, m.header(), payload) == nil
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
		holders := l.holders()
		l.fifo.Each(func(r *fifo.Request) {
			from, id, ok := r.Tag.(queued).remote()
			if !ok || r.State() == fifo.Cancelled {
				return
			}
			rec := servedRecord{From: from, Ticket: id, Granted: r.State() == fifo.Granted}
			if !rec.Granted {
				rec.Holders = holders
			}
			recs = append(recs, rec)
		})
		l.mu.Unlock()
	}
	return recs
}

// deadlockWatch is rank 0's view of the stuck processes, in rounds: a round is complete
// when every process has reported since the last one.
type deadlockWatch struct {
	reports   []*stuckReport // this round's report by rank; nil until it comes
	gens      []uint64       // the generation of each report
	candidate []uint64       // the generations of the previous round, if it showed a cycle
}

// stuck records a report at rank 0 and declares a deadlock when it is confirmed.
func (n *node) stuck(from int, m stuckMsg, payload []byte) {
	var r stuckReport
	if err := json.Unmarshal(payload, &r); err != nil {
		n.log.Error("orwl: bad deadlock report", "rank", from, "err", err)
		return
	}
	n.wide.mu.Lock()
	w := &n.wide.watch
	if w.reports == nil {
		w.reports, w.gens = make([]*stuckReport, n.j.procs), make([]uint64, n.j.procs)
	}
	w.reports[from], w.gens[from] = &r, m.epoch
	if slices.Contains(w.reports, nil) {
		n.wide.mu.Unlock()
		return // the round is not complete
	}
	cycle := n.j.findCycle(w.reports)
	confirmed := cycle != nil && slices.Equal(w.candidate, w.gens)
	w.candidate = nil
	if cycle != nil {
		w.candidate = slices.Clone(w.gens)
	}
	clear(w.reports)
	n.wide.mu.Unlock()
	if confirmed {
		n.j.fail(cycle)
	}
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
