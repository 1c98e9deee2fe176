package orwl

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/orwl-go/orwl/checkpoint"
)

// Rank 0's coordinator of checkpoints and of the restart as a state machine, in the manner
// of the start's (transport/startfsm.go): ckptCoordinator takes one coordInput at a time (a
// tick of Checkpoint.Every, a process's answer or warning, a task that iterated,
// the job's end or success) and returns the coordActions that follow (messages to send, a
// line to log, the job to fail). It does no I/O, reads no clock, starts no goroutine and is
// used by one goroutine at a time: the driver in checkpoint_driver.go feeds it and does what
// it says. Every decision of the exchanges is taken here (checkpoint.go has the overview,
// restore.go the restart's).

// coordState is what the coordinator waits for.
type coordState int

const (
	coordSurveying  coordState = iota // at the start: the inventories of each process (restore.go)
	coordIdle                         // between checkpoints: the next tick prepares one
	coordPreparing                    // prepare sent: a report from each process
	coordArming                       // arm k sent: armed k from each
	coordCopying                      // go k sent: copied k from each
	coordWriting                      // write k sent: done k from each, with the Summary of the pieces it wrote
	coordCommitting                   // commit k sent: committed k from each, its manifest written
	coordEnded                        // the job ended, failed, or cannot start: no checkpoint is taken
)

// Kinds of coordInput.
const (
	onTick      = iota // Checkpoint.Every passed
	onAnswer           // process from answered (msg: inventoryMsg, reportMsg, armedMsg, copiedMsg, doneMsg or committedMsg)
	onWarn             // process from could not write a piece or a commit (msg: warnMsg; why)
	onIterated         // a task of process from ran Task.Iterate
	onEnd              // the job ended: the checkpoint being taken is given up
	onSucceeded        // the job succeeded on every process
)

// coordInput is one event for the coordinator.
type coordInput struct {
	kind int
	from int
	msg  ckptMessage
	why  string      // onWarn
	invs []inventory // with an inventoryMsg: what the directories of each process of from's subtree hold
}

// Kinds of coordAction.
const (
	doSend     = iota // send msg with payload to process to, or to every process (this one included) when to is -1
	doLog             // log text at level
	doFail            // fail the job with err
	doComplete        // log that checkpoint msg.k (a committedMsg) is complete, with the time it took
)

// coordAction is one thing the driver must do, in order.
type coordAction struct {
	kind    int
	to      int
	msg     ckptMessage
	payload []byte
	level   slog.Level
	text    string
	err     error
}

// ckptCoordinator is rank 0's part in the checkpoints and the restart of a job. It begins
// surveying: with every process's inventory (gathered along the job's tree, as answers
// are) it chooses the checkpoint the job restarts from, and sends the plan (or why the job
// cannot start) to rank 0 itself, which passes each child its subtree's parts (restore.go).
// Then, at each tick while idle, it takes a checkpoint in four exchanges (prepare, arm, go,
// write; checkpoint.go), each a message to every process and an answer from each, and
// commits or discards it. An answer out of turn, or a second one from a process in one
// exchange, fails the job at once, naming the process and the exchange.
type ckptCoordinator struct {
	procs, tasks int
	owner        []int  // the rank that runs each task
	setting      string // where the directory pattern comes from, for messages

	state    coordState
	start    int    // the checkpoint the job resumed from; 0: a fresh start
	k        int    // the checkpoint being taken
	answered []bool // by rank: it answered in this exchange
	count    int    // ranks that answered

	bound, minIter  int64              // preparing: the highest bound, the smallest Iterate n
	busy, firstBusy int                // preparing: ranks still writing an earlier checkpoint, the lowest of them
	wrote           checkpoint.Summary // writing: the pieces written, counted and digested
	failed          bool               // writing: a process failed to write its part

	invs     []*checkpoint.Inventory // surveying: by rank
	finished []int                   // surveying: checkpoints of a run that finished
	errs     []string                // surveying: why processes have no inventory

	full     bool // a full disk was logged
	iterated bool // a task of the job ran Task.Iterate
	out      []coordAction
}

// newCkptCoordinator returns the coordinator of a job of procs processes and tasks tasks,
// task t run by owner[t], surveying.
func newCkptCoordinator(procs, tasks int, owner []int, setting string) *ckptCoordinator {
	s := &ckptCoordinator{procs: procs, tasks: tasks, owner: owner, setting: setting}
	s.enter(coordSurveying)
	s.invs = make([]*checkpoint.Inventory, procs)
	return s
}

// step takes one input and returns what follows from it.
func (s *ckptCoordinator) step(in coordInput) []coordAction {
	s.out = nil
	switch in.kind {
	case onTick:
		if s.state == coordIdle {
			s.send(prepareMsg{}, nil)
			s.enter(coordPreparing)
			s.bound, s.minIter, s.busy = -1, math.MaxInt64, 0
		}
	case onAnswer:
		s.answer(in)
	case onWarn:
		s.warn(in.from, in.msg.(warnMsg), in.why)
	case onIterated:
		s.iterated = true
	case onEnd:
		if s.state >= coordPreparing && s.state < coordEnded {
			s.log(slog.LevelDebug, fmt.Sprintf("orwl: checkpoint given up at the job's end: rank 0 %s, and ranks %v had not answered", s.exchange(), s.waiting()))
		}
		s.state = coordEnded
	case onSucceeded:
		if !s.iterated {
			s.log(slog.LevelWarn, fmt.Sprintf("orwl: checkpoints are on (%s), and no task of the job ran Task.Iterate: no checkpoint was taken. Checkpoints are taken between the iterations of Task.Iterate, with the state each task registers with Task.Keep: run the iterations with them, or turn checkpoints off", s.setting))
		}
	}
	return s.out
}

// surveyed reports whether the restart's plan is made (or the job failed first).
func (s *ckptCoordinator) surveyed() bool { return s.state != coordSurveying }

// enter begins state: no process has answered in it yet.
func (s *ckptCoordinator) enter(state coordState) {
	s.state, s.count = state, 0
	s.answered = make([]bool, s.procs)
}

// turn checks that from may answer now (inTurn: its answer, what, is the one this state
// waits for), and counts it for the ranks it speaks for: rank 0 alone (its own answer), or
// the subtree of a child of rank 0 (an answer gathered along the job's tree,
// checkpoint_tree.go). It fails the job when it may not, naming the rank, what it sent and
// what was expected. It reports whether the answer is taken.
func (s *ckptCoordinator) turn(from int, inTurn bool, what string) bool {
	switch {
	case s.state == coordEnded:
		return false // the job is over: nothing waits for it
	case from < 0 || from >= s.procs:
		s.fail(fmt.Errorf("orwl: checkpoint: %s from rank %d, and the job has ranks 0 to %d", what, from, s.procs-1))
	case from != 0 && treeParent(from) != 0:
		s.fail(fmt.Errorf("orwl: checkpoint: rank %d sent %s to rank 0, and its answers go through rank %d, its parent in the job's tree", from, what, treeParent(from)))
	case !inTurn:
		s.fail(fmt.Errorf("orwl: checkpoint: rank %d sent %s out of turn: rank 0 %s", from, what, s.exchange()))
	case s.answered[from]:
		s.fail(fmt.Errorf("orwl: checkpoint: rank %d sent %s twice: rank 0 %s", from, what, s.exchange()))
	default:
		s.answered[from] = true
		s.count++
		if from != 0 {
			s.count += subtreeSize(from, s.procs) - 1
		}
		return true
	}
	return false
}

// answer takes a process's answer in an exchange of a checkpoint, and begins the next
// exchange when every process has answered.
func (s *ckptCoordinator) answer(in coordInput) {
	state, k := answerOf(in.msg, s.k)
	if !s.turn(in.from, state == s.state && k == s.k, describe(in.msg)) {
		return
	}
	switch m := in.msg.(type) {
	case inventoryMsg:
		s.inventories(in.invs)
	case reportMsg:
		s.bound, s.minIter = max(s.bound, m.bound), min(s.minIter, m.minIter)
		if m.busy > 0 && (s.busy == 0 || m.firstBusy < s.firstBusy) {
			s.firstBusy = m.firstBusy
		}
		s.busy += m.busy
	case doneMsg:
		s.failed = s.failed || m.failed
		s.wrote = s.wrote.Add(m.wrote)
	case committedMsg:
		s.failed = s.failed || m.failed
	}
	if s.count < s.procs {
		return
	}
	switch s.state {
	case coordSurveying:
		s.plan()
	case coordPreparing:
		s.prepared()
	case coordArming:
		s.send(goMsg{s.k}, nil)
		s.enter(coordCopying)
	case coordCopying:
		s.send(writeMsg{s.k}, nil)
		s.enter(coordWriting)
	case coordWriting:
		if s.failed {
			s.send(discardMsg{s.k}, nil)
			s.enter(coordIdle)
		} else {
			s.send(commitMsg{k: s.k, whole: s.wrote}, nil)
			s.enter(coordCommitting)
		}
		s.wrote, s.failed = checkpoint.Summary{}, false
	case coordCommitting:
		if !s.failed { // every manifest is written: a restart finds the checkpoint whole
			s.out = append(s.out, coordAction{kind: doComplete, msg: committedMsg{k: s.k}})
		}
		s.failed = false
		s.enter(coordIdle)
	}
}

// prepared numbers the checkpoint once every process has reported, and arms it; or lifts
// the hold when none can be taken now: a process still writes pieces of an earlier one, or
// the job ends (or iterates without Iterate) first.
func (s *ckptCoordinator) prepared() {
	k, ok := nextCheckpoint(s.bound, s.minIter, s.start)
	if s.busy > 0 {
		s.log(slog.LevelDebug, fmt.Sprintf("orwl: checkpoint skipped: processes still writing pieces of an earlier checkpoint: %d, the lowest rank %d (a slow disk, or one that failed)", s.busy, s.firstBusy))
	}
	if !ok || s.busy > 0 {
		s.send(goMsg{}, nil)
		s.enter(coordIdle)
	} else {
		s.k = int(k)
		s.send(armMsg{s.k}, nil)
		s.enter(coordArming)
	}
}

// nextCheckpoint returns the number of the checkpoint that the processes' reports allow,
// given the highest bound reported and the smallest n of their Iterate calls: one past the
// iteration after the highest any task may enter, and never one at or below start, the
// checkpoint the job resumed from (a Store removes its checkpoints numbered as high or
// higher at the first write of a number). ok is false when the job ends first, or iterates
// without Iterate.
func nextCheckpoint(bound, minIter int64, start int) (k int64, ok bool) {
	k = max(bound+2, int64(start)+1)
	return k, k < minIter && minIter != math.MaxInt64
}

// inventories takes the inventories of the processes of a subtree.
func (s *ckptCoordinator) inventories(invs []inventory) {
	for _, inv := range invs {
		s.invs[inv.Rank] = &inv.Inventory
		s.finished = append(s.finished, inv.Finished...)
		if inv.Error != "" {
			s.errs = append(s.errs, fmt.Sprintf("rank %d: %s", inv.Rank, inv.Error))
		}
	}
}

// plan makes the restart's plan once every process's inventory is in, and sends it to rank
// 0 itself, which passes each child the parts of its subtree; or, when a process could
// not survey its directories, why the job cannot start, naming each such rank.
func (s *ckptCoordinator) plan() {
	if len(s.errs) > 0 {
		slices.Sort(s.errs)
		payload, _ := json.Marshal(planMsg{Error: "orwl: checkpoints: " + strings.Join(s.errs, "; ")}) // plain structs
		s.sendTo(0, restartPlanMsg{}, payload)
		s.state = coordEnded // every process fails with the plan's error
		return
	}
	skipped := skipFinished(s.invs, s.finished)
	dest := func(k checkpoint.Key) int {
		if k.Task < 0 || k.Task >= s.tasks {
			return -1
		}
		return s.owner[k.Task]
	}
	plan, notes := checkpoint.Choose(s.invs, dest)
	for _, n := range notes {
		s.log(slog.LevelWarn, "orwl: checkpoint: "+n)
	}
	if len(skipped) > 0 {
		s.log(slog.LevelWarn, s.finishedNote(skipped, plan.Checkpoint))
	}
	s.start = plan.Checkpoint
	payload, _ := json.Marshal(planMsg{Parts: planParts(plan, dest, s.procs)}) // plain structs
	s.sendTo(0, restartPlanMsg{}, payload)
	s.invs, s.finished, s.errs = nil, nil, nil
	s.enter(coordIdle)
}

// planParts splits plan, over procs processes, into the part each process needs: the
// pieces it reads from its directories (to send, or for its own tasks, dest) and those it
// is sent, with their numbers in plan, which the parts sent at the restart carry; by rank.
// A process's part grows with its own pieces and those it sends, not with the job.
func planParts(plan *checkpoint.Plan, dest func(checkpoint.Key) int, procs int) []planPart {
	parts := make([]planPart, procs)
	for r := range parts {
		parts[r].Rank, parts[r].Checkpoint = r, plan.Checkpoint
	}
	for i, p := range plan.Pieces {
		from, to := plan.From[i], dest(p.Key)
		for _, r := range []int{from, to} {
			if r < 0 || r >= procs {
				continue
			}
			part := &parts[r]
			if n := len(part.Index); n > 0 && part.Index[n-1] == i {
				continue // from and to are one process
			}
			dir := ""
			if r == from { // only the reader needs the directory
				dir = plan.Dirs[i]
			}
			part.Pieces = append(part.Pieces, p)
			part.From = append(part.From, from)
			part.Dirs = append(part.Dirs, dir)
			part.Index = append(part.Index, i)
		}
	}
	return parts
}

// finishedNote says why the job does not resume from the checkpoints skipped, those of a
// finished run, and what it does instead: resume from checkpoint k, or start afresh (0).
func (s *ckptCoordinator) finishedNote(skipped []int, k int) string {
	what := "starting afresh"
	if k > 0 {
		what = fmt.Sprintf("resuming from checkpoint %d, of a later run that did not finish", k)
	}
	return fmt.Sprintf("orwl: checkpoints %v in %s are those of a run of this job that finished: %s. "+
		"A job is known by its program, tasks, locations and Config.Checkpoint.Params: a changed program that should not resume from another's checkpoints must change Program or Params, or use another directory",
		skipped, s.setting, what)
}

// warn logs what rank from could not write of checkpoint m.k (m.full: a full disk), and
// why. A full disk is logged once for the whole job, however many processes find it, at
// however many checkpoints; any other trouble each time.
func (s *ckptCoordinator) warn(from int, m warnMsg, why string) {
	if m.full && s.full {
		return
	}
	s.full = s.full || m.full
	text := fmt.Sprintf("orwl: checkpoint %d not written (rank %d); the job goes on and the previous checkpoint stays: %s", m.k, from, why)
	if m.full {
		text += " (a full disk is reported once per job)"
	}
	s.log(slog.LevelWarn, text)
}

// send sends m with payload to every process.
func (s *ckptCoordinator) send(m ckptMessage, payload []byte) { s.sendTo(-1, m, payload) }

// sendTo sends m with payload to process to, or to every process when to is -1.
func (s *ckptCoordinator) sendTo(to int, m ckptMessage, payload []byte) {
	s.out = append(s.out, coordAction{kind: doSend, to: to, msg: m, payload: payload})
}

func (s *ckptCoordinator) log(level slog.Level, text string) {
	s.out = append(s.out, coordAction{kind: doLog, level: level, text: text})
}

// fail fails the job with err; the coordinator takes no further part.
func (s *ckptCoordinator) fail(err error) {
	s.out = append(s.out, coordAction{kind: doFail, err: err})
	s.state = coordEnded
}

// waiting returns the ranks that have not answered in this exchange (for their subtrees).
func (s *ckptCoordinator) waiting() []int {
	var ranks []int
	for r, ok := range s.answered {
		if !ok && (r == 0 || treeParent(r) == 0) {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// exchange says what the coordinator does and waits for, for messages.
func (s *ckptCoordinator) exchange() string {
	switch s.state {
	case coordSurveying:
		return "surveys the checkpoints, and waits for " + describe(inventoryMsg{}) + " from each process"
	case coordIdle:
		return "takes no checkpoint now"
	case coordPreparing:
		return "prepares a checkpoint, and waits for " + describe(reportMsg{}) + " from each process"
	case coordArming:
		return fmt.Sprintf("arms checkpoint %d, and waits for %s from each process", s.k, describe(armedMsg{s.k}))
	case coordCopying:
		return fmt.Sprintf("waits for %s from each process (its tasks' copies)", describe(copiedMsg{s.k}))
	case coordWriting:
		return fmt.Sprintf("waits for %s from each process (its pieces written)", describe(doneMsg{k: s.k}))
	case coordCommitting:
		return fmt.Sprintf("commits checkpoint %d, and waits for %s from each process (its manifest written)", s.k, describe(committedMsg{k: s.k}))
	}
	return "takes no further part"
}

// answerOf returns the state in which m answers rank 0, and the checkpoint it answers
// about (a report is about none yet: s.k is that of the previous checkpoint then).
func answerOf(m ckptMessage, k int) (coordState, int) {
	switch m := m.(type) {
	case inventoryMsg:
		return coordSurveying, k
	case reportMsg:
		return coordPreparing, k
	case armedMsg:
		return coordArming, m.k
	case copiedMsg:
		return coordCopying, m.k
	case doneMsg:
		return coordWriting, m.k
	case committedMsg:
		return coordCommitting, m.k
	}
	return coordEnded, -1
}

// describe names an answer to rank 0, or one of rank 0's messages, for messages.
func describe(m ckptMessage) string {
	switch m := m.(type) {
	case prepareMsg:
		return "a prepare"
	case armMsg:
		return fmt.Sprintf("arm %d", m.k)
	case goMsg:
		return fmt.Sprintf("go %d", m.k)
	case writeMsg:
		return fmt.Sprintf("write %d", m.k)
	case commitMsg:
		return fmt.Sprintf("commit %d", m.k)
	case discardMsg:
		return fmt.Sprintf("discard %d", m.k)
	case reportMsg:
		return "a report"
	case armedMsg:
		return fmt.Sprintf("armed %d", m.k)
	case copiedMsg:
		return fmt.Sprintf("copied %d", m.k)
	case doneMsg:
		return fmt.Sprintf("done %d", m.k)
	case committedMsg:
		return fmt.Sprintf("committed %d", m.k)
	case warnMsg:
		return fmt.Sprintf("a warning about checkpoint %d", m.k)
	case iteratedMsg:
		return "word that a task ran Task.Iterate"
	case inventoryMsg:
		return "an inventory of its checkpoints"
	case restartPlanMsg:
		return "a restart plan"
	}
	return fmt.Sprintf("a checkpoint message of phase %d", m.header().Flags)
}
