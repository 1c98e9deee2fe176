package orwl

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/checkpoint"
)

// Table tests of rank 0's coordinator (checkpoint_coord.go): inputs in, actions out, with
// no goroutine, no clock and no I/O.

// coordStep is an input and the actions it must give, each as show writes it: a send is
// "send " and the message (%#v), a log "log LEVEL: " and a part of its text, a failure
// "fail: " and a part of the error.
type coordStep struct {
	in   coordInput
	want []string
}

// show writes an action for comparison with a coordStep's.
func show(a coordAction) string {
	switch a.kind {
	case doSend:
		if a.to >= 0 {
			return fmt.Sprintf("send to %d %#v", a.to, a.msg)
		}
		return fmt.Sprintf("send %#v", a.msg)
	case doLog:
		return fmt.Sprintf("log %v: %s", a.level, a.text)
	case doComplete:
		return fmt.Sprintf("complete: checkpoint %d", a.msg.(committedMsg).k)
	}
	return fmt.Sprintf("fail: %v", a.err)
}

// runCoord feeds s the steps, in order, and checks each one's actions: a send must be the one
// wanted, a log or a failure must begin as wanted and contain the rest.
func runCoord(t *testing.T, s *ckptCoordinator, steps []coordStep) {
	t.Helper()
	for i, st := range steps {
		acts := s.step(st.in)
		got := make([]string, len(acts))
		for j, a := range acts {
			got[j] = show(a)
		}
		ok := len(got) == len(st.want)
		for j := 0; ok && j < len(got); j++ {
			want := st.want[j]
			if strings.HasPrefix(want, "send ") {
				ok = got[j] == want
				continue
			}
			head, rest, _ := strings.Cut(want, ": ")
			ok = strings.HasPrefix(got[j], head+": ") && strings.Contains(got[j], rest)
		}
		if !ok {
			t.Fatalf("step %d (input %+v): actions\n\t%s\nwant\n\t%s", i, st.in, strings.Join(got, "\n\t"), strings.Join(st.want, "\n\t"))
		}
	}
}

// Inputs.
func tickIn() coordInput { return coordInput{kind: onTick} }
func answerIn(from int, m ckptMessage) coordInput {
	return coordInput{kind: onAnswer, from: from, msg: m}
}

// inventoryIn is the inventory of process from alone (rank 0's, or that of a child of
// rank 0 without children).
func inventoryIn(from int, inv inventory) coordInput {
	inv.Rank = from
	return coordInput{kind: onAnswer, from: from, msg: inventoryMsg{}, invs: []inventory{inv}}
}

// Sends, as show writes them: to every process, and to one.
func sent(m ckptMessage) string          { return fmt.Sprintf("send %#v", m) }
func sentTo(r int, m ckptMessage) string { return fmt.Sprintf("send to %d %#v", r, m) }

// surveyed is the survey of a fresh job of two processes: no checkpoint anywhere.
var surveyed = []coordStep{
	{inventoryIn(1, inventory{}), nil},
	{inventoryIn(0, inventory{}), []string{sentTo(0, restartPlanMsg{})}},
}

// prepared7 takes a job of two processes, surveyed, through the prepare of checkpoint 7: the
// tasks are held at iteration 5 at most.
var prepared7 = []coordStep{
	{tickIn(), []string{sent(prepareMsg{})}},
	{tickIn(), nil}, // a tick while a checkpoint is being taken is dropped
	{answerIn(0, reportMsg{bound: 4, minIter: 100}), nil},
	{answerIn(1, reportMsg{bound: 5, minIter: 100}), []string{sent(armMsg{7})}},
}

// steps joins step lists.
func steps(parts ...[]coordStep) []coordStep { return slices.Concat(parts...) }

// TestCoordinatorTakesCheckpoints: a full sequence, from the survey to the commit of
// checkpoint 7 with the Summary of every process's pieces, complete once every process
// has written its manifest, then a checkpoint discarded because a piece failed, then one
// skipped because a process still holds the buffers of that one, then none when the job
// ends before the checkpoint's iteration.
func TestCoordinatorTakesCheckpoints(t *testing.T) {
	a := checkpoint.PieceInfo{Key: checkpoint.StateKey(0, "s"), Size: 8, CRC: 1}
	b := checkpoint.PieceInfo{Key: checkpoint.LocationKey(1, "v"), Size: 16, CRC: 2}
	s := newCkptCoordinator(2, 2, []int{0, 1}, "")
	runCoord(t, s, steps(surveyed, prepared7, []coordStep{
		{answerIn(1, armedMsg{7}), nil},
		{answerIn(0, armedMsg{7}), []string{sent(goMsg{7})}},
		{answerIn(0, copiedMsg{7}), nil},
		{answerIn(1, copiedMsg{7}), []string{sent(writeMsg{7})}},
		{answerIn(1, doneMsg{k: 7, wrote: checkpoint.Summarize([]checkpoint.PieceInfo{b})}), nil},
		{answerIn(0, doneMsg{k: 7, wrote: checkpoint.Summarize([]checkpoint.PieceInfo{a})}),
			[]string{sent(commitMsg{k: 7, whole: checkpoint.Summarize([]checkpoint.PieceInfo{a, b})})}},
		{tickIn(), nil}, // not before every manifest is written
		{answerIn(1, committedMsg{k: 7}), nil},
		{answerIn(0, committedMsg{k: 7}), []string{"complete: checkpoint 7"}},
	}))
	runCoord(t, s, []coordStep{
		{tickIn(), []string{sent(prepareMsg{})}},
		{answerIn(0, reportMsg{bound: 20, minIter: 100}), nil},
		{answerIn(1, reportMsg{bound: 18, minIter: 100}), []string{sent(armMsg{22})}},
		{answerIn(0, armedMsg{22}), nil},
		{answerIn(1, armedMsg{22}), []string{sent(goMsg{22})}},
		{answerIn(1, copiedMsg{22}), nil},
		{answerIn(0, copiedMsg{22}), []string{sent(writeMsg{22})}},
		{answerIn(0, doneMsg{k: 22, wrote: checkpoint.Summarize([]checkpoint.PieceInfo{a})}), nil},
		{answerIn(1, doneMsg{k: 22, failed: true}), []string{sent(discardMsg{22})}},
		{tickIn(), []string{sent(prepareMsg{})}},
		{answerIn(0, reportMsg{bound: 30, minIter: 100}), nil},
		{answerIn(1, reportMsg{bound: 30, minIter: 100, busy: 1, firstBusy: 1}), []string{"log DEBUG: orwl: checkpoint skipped: processes still writing pieces of an earlier checkpoint: 1, the lowest rank 1", sent(goMsg{})}},
		{tickIn(), []string{sent(prepareMsg{})}},
		{answerIn(0, reportMsg{bound: 98, minIter: 100}), nil},
		{answerIn(1, reportMsg{bound: 90, minIter: 100}), []string{sent(goMsg{})}},
	})
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCoordinatorRefusesAnswersOutOfTurn: an answer that is not the one the exchange waits
// for, or a second answer of a process in one exchange, fails the job at once, naming the
// rank, what it sent and what rank 0 was doing; the coordinator then takes no further
// part. Before, rank 0 found such an answer only at its next gather, and took a second
// answer of a process for another's.
func TestCoordinatorRefusesAnswersOutOfTurn(t *testing.T) {
	for _, c := range []struct {
		name   string
		before []coordStep
		in     coordInput
		want   string
	}{
		{"a second report", steps(surveyed, prepared7[:1], []coordStep{{answerIn(1, reportMsg{bound: 3, minIter: 9}), nil}}), answerIn(1, reportMsg{bound: 3, minIter: 9}),
			"rank 1 sent a report twice: rank 0 prepares a checkpoint, and waits for a report from each process"},
		{"armed while preparing", steps(surveyed, prepared7[:1]), answerIn(1, armedMsg{7}),
			"rank 1 sent armed 7 out of turn: rank 0 prepares a checkpoint, and waits for a report from each process"},
		{"a second armed", steps(surveyed, prepared7, []coordStep{{answerIn(0, armedMsg{7}), nil}}), answerIn(0, armedMsg{7}),
			"rank 0 sent armed 7 twice: rank 0 arms checkpoint 7, and waits for armed 7 from each process"},
		{"copied of another checkpoint", steps(surveyed, prepared7, []coordStep{{answerIn(0, armedMsg{7}), nil}, {answerIn(1, armedMsg{7}), []string{sent(goMsg{7})}}}),
			answerIn(1, copiedMsg{6}), "rank 1 sent copied 6 out of turn: rank 0 waits for copied 7 from each process"},
		{"done before the write", steps(surveyed, prepared7, []coordStep{{answerIn(0, armedMsg{7}), nil}, {answerIn(1, armedMsg{7}), []string{sent(goMsg{7})}}}),
			answerIn(1, doneMsg{k: 7}), "rank 1 sent done 7 out of turn: rank 0 waits for copied 7"},
		{"a report while idle", surveyed, answerIn(1, reportMsg{}), "rank 1 sent a report out of turn: rank 0 takes no checkpoint now"},
		{"a rank of no process", steps(surveyed, prepared7[:1]), answerIn(2, reportMsg{}), "a report from rank 2, and the job has ranks 0 to 1"},
		{"a second inventory", surveyed[:1], inventoryIn(1, inventory{}),
			"rank 1 sent an inventory of its checkpoints twice: rank 0 surveys the checkpoints"},
		{"an inventory after the survey", surveyed, inventoryIn(1, inventory{}),
			"rank 1 sent an inventory of its checkpoints out of turn: rank 0 takes no checkpoint now"},
		{"an answer during the survey", surveyed[:1], answerIn(0, reportMsg{}),
			"rank 0 sent a report out of turn: rank 0 surveys the checkpoints, and waits for an inventory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newCkptCoordinator(2, 2, []int{0, 1}, "")
			runCoord(t, s, steps(c.before, []coordStep{
				{c.in, []string{"fail: orwl: checkpoint: " + c.want}},
				{answerIn(0, reportMsg{}), nil}, // no further part
				{tickIn(), nil},
			}))
		})
	}
}

// TestCoordinatorLostRank: a process that never answers (lost: the transport fails the job,
// whose end stops the driver) leaves the checkpoint given up at the job's end, saying which
// ranks had not answered; its late answers, and the ticks, then do nothing.
func TestCoordinatorLostRank(t *testing.T) {
	s := newCkptCoordinator(3, 3, []int{0, 1, 2}, "")
	runCoord(t, s, []coordStep{
		{inventoryIn(0, inventory{}), nil}, {inventoryIn(1, inventory{}), nil},
		{inventoryIn(2, inventory{}), []string{sentTo(0, restartPlanMsg{})}},
		{tickIn(), []string{sent(prepareMsg{})}},
		{answerIn(0, reportMsg{bound: 1, minIter: 50}), nil},
		{answerIn(1, reportMsg{bound: 1, minIter: 50}), nil},
		{answerIn(2, reportMsg{bound: 1, minIter: 50}), []string{sent(armMsg{3})}},
		{answerIn(0, armedMsg{3}), nil},
		{coordInput{kind: onEnd}, []string{"log DEBUG: given up at the job's end: rank 0 arms checkpoint 3, and waits for armed 3 from each process, and ranks [1 2] had not answered"}},
		{answerIn(1, armedMsg{3}), nil},
		{tickIn(), nil},
	})
}

// TestCoordinatorWarns: a full disk is logged once for the whole job, naming the rank, any
// other failure to write each time; a job that succeeded without any task in Iterate is
// told that it took no checkpoint, one where a task iterated is not.
func TestCoordinatorWarns(t *testing.T) {
	warn := func(from int, m warnMsg, why string) coordInput {
		return coordInput{kind: onWarn, from: from, msg: m, why: why}
	}
	s := newCkptCoordinator(2, 2, []int{0, 1}, "Config.Checkpoint.Dir \"/x\"")
	runCoord(t, s, []coordStep{
		{warn(1, warnMsg{k: 7, full: true}, "disk full"), []string{"log WARN: orwl: checkpoint 7 not written (rank 1); the job goes on and the previous checkpoint stays: disk full (a full disk is reported once per job)"}},
		{warn(0, warnMsg{k: 7, full: true}, "disk full"), nil},
		{warn(0, warnMsg{k: 9}, "permission denied"), []string{"log WARN: checkpoint 9 not written (rank 0)"}},
		{warn(0, warnMsg{k: 11}, "permission denied"), []string{"log WARN: checkpoint 11 not written (rank 0)"}},
		{coordInput{kind: onSucceeded}, []string{`log WARN: orwl: checkpoints are on (Config.Checkpoint.Dir "/x"), and no task of the job ran Task.Iterate: no checkpoint was taken`}},
	})
	s = newCkptCoordinator(2, 2, []int{0, 1}, "")
	runCoord(t, s, []coordStep{
		{coordInput{kind: onIterated, from: 1, msg: iteratedMsg{}}, nil},
		{coordInput{kind: onEnd}, nil},
		{coordInput{kind: onSucceeded}, nil},
	})
}

// TestCoordinatorSurvey: the restart's plan. With every inventory, rank 0 sends itself, to
// pass on down the tree, each process's part of the plan of the newest complete checkpoint
// (the pieces it reads or is sent, numbered as in the whole plan), and numbers the next
// checkpoint past it; the checkpoints
// of a run that finished are left out, and said so; a process that could not survey its
// directories makes the plan an error, and no checkpoint is taken.
func TestCoordinatorSurvey(t *testing.T) {
	piece, err := checkpoint.InlinePiece(checkpoint.StateKey(1, "s"), []byte("abc"))
	if err != nil {
		t.Fatal(err)
	}
	held := func(k int) inventory {
		return inventory{Inventory: checkpoint.Inventory{Manifests: []checkpoint.Manifest{{Checkpoint: k, Dir: "/d", Pieces: []checkpoint.PieceInfo{piece}}}}}
	}
	plans := func(msg planMsg) []string { // to rank 0, which passes them on
		for r := range msg.Parts {
			msg.Parts[r].Rank = r
		}
		return []string{sentTo(0, restartPlanMsg{}) + " " + string(mustJSON(t, msg))}
	}
	for _, c := range []struct {
		name       string
		invs       []inventory
		want       planMsg // its parts by rank
		logs       []string
		next       ckptMessage // at the first checkpoint, tasks held at iteration 1
		noCkptTick bool
	}{
		{"fresh", []inventory{{}, {}}, planMsg{Parts: []planPart{{}, {}}}, nil, armMsg{3}, false},
		{"resumed", []inventory{held(40), {}}, planMsg{Parts: []planPart{{Plan: checkpoint.Plan{Checkpoint: 40}},
			{Plan: checkpoint.Plan{Checkpoint: 40, Pieces: []checkpoint.PieceInfo{piece}, From: []int{1}, Dirs: []string{"/d"}}, Index: []int{0}}}},
			nil, armMsg{41}, false},
		{"finished", []inventory{held(40), {Finished: []int{40}}}, planMsg{Parts: []planPart{{}, {}}},
			[]string{"log WARN: orwl: checkpoints [40] in setting are those of a run of this job that finished: starting afresh"}, armMsg{3}, false},
		{"unreadable", []inventory{{Error: "permission denied"}, {}}, planMsg{Error: "orwl: checkpoints: rank 0: permission denied"}, nil, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newCkptCoordinator(2, 2, []int{0, 1}, "setting")
			var got []string
			for r, inv := range c.invs {
				for _, a := range s.step(inventoryIn(r, inv)) {
					got = append(got, show(a)+" "+string(a.payload))
				}
			}
			want := append(slices.Clone(c.logs), plans(c.want)...)
			ok := len(got) == len(want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], want[i])
			}
			if !ok || !s.surveyed() {
				t.Fatalf("actions\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
			if c.noCkptTick {
				runCoord(t, s, []coordStep{{tickIn(), nil}})
				return
			}
			runCoord(t, s, []coordStep{
				{tickIn(), []string{sent(prepareMsg{})}},
				{answerIn(0, reportMsg{bound: 1, minIter: 100}), nil},
				{answerIn(1, reportMsg{bound: 1, minIter: 100}), []string{sent(c.next)}},
			})
		})
	}
}

// TestAnswerToAnotherRankFails: only rank 0 coordinates; an answer (an inventory too) that
// reaches a process other than its sender's parent in the job's tree, a warning that
// reaches a process other than rank 0, and a message of rank 0's that comes from a process
// other than the receiver's parent, fail the job at once, naming both ranks.
func TestAnswerToAnotherRankFails(t *testing.T) {
	for _, tc := range []struct {
		m       ckptMessage
		payload string
		want    string
	}{
		{armedMsg{3}, "", "orwl: rank 1: armed 3 from rank 2, which is not its child in the job's tree (its children: [])"},
		{inventoryMsg{}, `[{"rank":2}]`, "orwl: rank 1: an inventory of its checkpoints from rank 2, which is not its child in the job's tree (its children: [])"},
		{warnMsg{k: 3}, "disk", "orwl: rank 1: a warning about checkpoint 3 from rank 2, and only rank 0"},
		{armMsg{3}, "", "orwl: rank 1: arm 3 from rank 2, and such messages come from rank 0 through rank 0, its parent in the job's tree"},
	} {
		j := &job{rank: 1, procs: 3, cancel: func(error) {}}
		c := &checkpointer{j: j, restart: &restart{}}
		j.ckpt = c
		c.handle(2, tc.m, []byte(tc.payload))
		if err := j.failure(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%#v to rank 1: job error %v, want %q", tc.m, err, tc.want)
		}
	}
}
