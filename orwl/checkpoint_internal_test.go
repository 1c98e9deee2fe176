package orwl

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/transport"
)

// TestNextCheckpointFollowsTheResumedOne: a checkpoint prepared after a restart from
// checkpoint 40, before any task entered an iteration (a process reports the bound 0), must
// be numbered past 40: writing a piece of a lower number would make the Store remove
// checkpoints 40 and 38, the job's only complete ones, and the checkpoint's kept states,
// copied when a task enters its iteration, would never come.
func TestNextCheckpointFollowsTheResumedOne(t *testing.T) {
	for _, c := range []struct {
		bound, minIter int64 // the highest bound and the smallest n reported
		start          int
		k              int64
		ok             bool
	}{
		{0, 100, 40, 41, true},
		{45, 100, 40, 47, true},
		{5, 100, 0, 7, true},
		{98, 100, 0, 100, false},        // the job ends first
		{0, math.MaxInt64, 0, 2, false}, // no Iterate
		{0, 41, 40, 41, false},          // past the end
	} {
		k, ok := nextCheckpoint(c.bound, c.minIter, c.start)
		if k != c.k || ok != c.ok {
			t.Errorf("bound %d, smallest n %d after resuming at %d: checkpoint %d %v, want %d %v", c.bound, c.minIter, c.start, k, ok, c.k, c.ok)
		}
	}
}

// testCheckpointer returns the checkpointer of j, rank 0 of a job of one process, with no
// directory: its answers to rank 0 stay in c.inbox (answers).
func testCheckpointer(j *job) *checkpointer {
	c := &checkpointer{j: j, lifted: make(chan struct{}), wake: make(chan struct{}, 1), inbox: newCoordInbox(),
		coord: newCkptCoordinator(1, 0, nil, "")}
	c.hold.Store(math.MaxInt64)
	c.slack.Store(1)
	j.ckpt = c
	return c
}

// answers returns the answers c sent rank 0 since the last call, as rank 0's coordinator
// would take them.
func answers(c *checkpointer) []coordInput { return c.inbox.take() }

// TestPartnerAnswers: a partner's answer counts only for the checkpoint being written (a
// late one, about a checkpoint given up after a failed piece, would make the next one look
// durable on two disks before it is), and a partner that could not store its copy (a full
// disk) fails the checkpoint instead of leaving it, and every later one, waiting forever.
func TestPartnerAnswers(t *testing.T) {
	c := testCheckpointer(&job{rank: 0, procs: 1})
	c.k, c.expect, c.written = 5, 1, []checkpoint.PieceInfo{{Key: checkpoint.StateKey(0, "s")}}
	c.handle(1, storedMsg{k: 4}, nil)
	if got := answers(c); c.stored != 0 || len(got) != 0 {
		t.Fatalf("an answer about checkpoint 4 counted for 5: %d stored, %d reports", c.stored, len(got))
	}
	c.handle(1, storedMsg{k: 5, failed: true}, nil)
	got := answers(c)
	if len(got) != 1 {
		t.Fatal("a partner's failure did not end the checkpoint")
	}
	if r := got[0]; r.msg != (doneMsg{k: 5, failed: true}) || r.from != 0 {
		t.Fatalf("report %+v, want checkpoint 5 done and failed", r)
	}
	if m := decodeCkpt(new(storedMsg{k: 5, failed: true}.header())); m != (storedMsg{k: 5, failed: true}) {
		t.Fatalf("a failed store does not survive the wire: %+v", m)
	}
}

// report returns the one answer c sent rank 0, a report.
func report(t *testing.T, c *checkpointer) reportMsg {
	t.Helper()
	got := answers(c)
	if len(got) != 1 {
		t.Fatalf("answers %+v, want one report", got)
	}
	m, ok := got[0].msg.(reportMsg)
	if !ok {
		t.Fatalf("answer %+v, want a report", got[0])
	}
	return m
}

// TestHoldSlackDoubles: a process holds its tasks one iteration past the highest entered,
// and twice as far at each checkpoint after one at which a task had to wait (up to
// maxSlack), so that the exchanges come to take less time than the iterations it allows.
func TestHoldSlackDoubles(t *testing.T) {
	c := testCheckpointer(&job{rank: 0, procs: 1})
	c.entered.Store(10)
	prepare := func() int64 {
		c.handle(0, prepareMsg{}, nil)
		return report(t, c).bound
	}
	if b := prepare(); b != 11 || c.hold.Load() != 11 {
		t.Fatalf("bound %d, hold %d, want 11 and 11", b, c.hold.Load())
	}
	c.waited.Store(true) // a task waited at 12
	c.handle(0, goMsg{}, nil)
	if c.hold.Load() != math.MaxInt64 {
		t.Fatal("go did not lift the hold")
	}
	if b := prepare(); b != 12 {
		t.Fatalf("after a wait, bound %d, want 10+2", b)
	}
	c.handle(0, goMsg{}, nil) // nobody waited: the slack stays
	if b := prepare(); b != 12 {
		t.Fatalf("after no wait, bound %d, want 10+2 still", b)
	}
	for range 20 {
		c.waited.Store(true)
		c.handle(0, goMsg{}, nil)
	}
	if s := c.slack.Load(); s != maxSlack {
		t.Fatalf("slack %d after many waits, want the bound %d", s, maxSlack)
	}
}

// TestHoldSlackFollowsThePace: the slack lets tasks that enter an iteration every perIter
// run through twice the hold's window without waiting (no task should wait at a hold), is
// never below the count that doubles after a wait, and stays within maxSlack.
func TestHoldSlackFollowsThePace(t *testing.T) {
	for _, c := range []struct {
		window, perIter time.Duration
		least, want     int64
	}{
		{30 * time.Millisecond, 5 * time.Millisecond, 1, 13},
		{30 * time.Millisecond, 5 * time.Millisecond, 16, 16}, // a task waited: the doubled count wins
		{30 * time.Millisecond, 0, 1, 1},                      // no pace measured yet
		{10 * time.Millisecond, time.Second, 1, 1},            // iterations far longer than the hold
		{time.Second, time.Nanosecond, 1, maxSlack},
	} {
		if got := paceSlack(c.window, c.perIter, c.least); got != c.want {
			t.Errorf("paceSlack(%v, %v, %d) = %d, want %d", c.window, c.perIter, c.least, got, c.want)
		}
	}
	// A process measures its pace between two prepares and the window from prepare to go.
	c := testCheckpointer(&job{rank: 0, procs: 1})
	c.entered.Store(10)
	c.handle(0, prepareMsg{}, nil)
	report(t, c)
	c.handle(0, goMsg{}, nil)
	if c.window <= 0 {
		t.Fatalf("window %v after a prepare and a go, want the time between them", c.window)
	}
	c.prepared = c.prepared.Add(-time.Second) // 100 iterations in a second
	c.window = 55 * time.Millisecond
	c.entered.Store(110)
	c.handle(0, prepareMsg{}, nil)
	if r := report(t, c); r.bound != 110+11 {
		t.Fatalf("bound %d at 10 ms an iteration and a 55 ms hold, want 110+11", r.bound)
	}
}

// TestWritingWaitsForEveryCopy: after the arm of checkpoint 5, the writer takes no work
// until rank 0 says that every task of the job has copied its kept states (ckptWrite); a
// process reports its own tasks' copies (ckptCopied) only after the go, once its last
// task has copied, so that rank 0 hears it after the armed answers.
func TestWritingWaitsForEveryCopy(t *testing.T) {
	j := &job{rank: 0, procs: 1}
	c := testCheckpointer(j)
	task := &Task{job: j, ckpt: taskCkpt{kept: []keptState{{name: "s"}}}}
	task.ckpt.iterating.Store(true)
	j.local = []*Task{task}
	c.handle(0, armMsg{5}, nil)
	if got := answers(c); len(got) != 1 || got[0].msg != (armedMsg{5}) {
		t.Fatalf("answers %+v to the arm, want armed 5", got)
	}
	c.handle(0, goMsg{5}, nil)
	if got := answers(c); len(got) != 0 {
		t.Fatalf("a copy reported at the go while the task has not copied: %+v", got)
	}
	if c.released.Load() >= c.armed.Load() {
		t.Fatal("the writer may write checkpoint 5 before the task copied its state")
	}
	task.paid()
	if got := answers(c); len(got) != 1 || got[0].msg != (copiedMsg{5}) || got[0].from != 0 {
		t.Fatalf("answers %+v once the task copied, want copied 5", got)
	}
	if c.released.Load() >= c.armed.Load() {
		t.Fatal("the writer may write checkpoint 5 before rank 0 said every task copied")
	}
	c.handle(0, writeMsg{5}, nil)
	if c.released.Load() < c.armed.Load() {
		t.Fatal("the writer may not write checkpoint 5 after ckptWrite")
	}
}

// TestProcessWithoutPiecesAnswersInTurn: a process that runs no task has no piece to write.
// It must answer the arm with armed alone (a done first would fail the job: rank 0 gathers
// the armed answers), the go with copied, and the write with done.
func TestProcessWithoutPiecesAnswersInTurn(t *testing.T) {
	c := testCheckpointer(&job{rank: 0, procs: 1})
	for _, step := range []struct {
		m, want ckptMessage
	}{
		{armMsg{3}, armedMsg{3}},
		{goMsg{3}, copiedMsg{3}},
		{writeMsg{3}, doneMsg{k: 3}},
	} {
		c.handle(0, step.m, nil)
		if got := answers(c); len(got) != 1 || got[0].msg != step.want {
			t.Fatalf("answers %+v to %#v, want %#v alone", got, step.m, step.want)
		}
	}
}

// TestCheckpointMessagesSurviveTheWire: every form of checkpoint message reads back as it
// was sent, each phase has a form of its own, and a phase of none is unknownMsg.
func TestCheckpointMessagesSurviveTheWire(t *testing.T) {
	for _, m := range []ckptMessage{
		prepareMsg{}, reportMsg{bound: 7, minIter: 9, busy: 3, firstBusy: 1 << 20}, reportMsg{bound: -1, minIter: 1 << 62},
		armMsg{3}, armedMsg{3}, goMsg{3}, goMsg{}, copiedMsg{3}, writeMsg{3},
		ckptPieceMsg{k: 3, task: 2, loc: 5, state: -1}, ckptPieceMsg{k: 3, task: 2, state: 4},
		storedMsg{k: 3, failed: true}, doneMsg{k: 3}, doneMsg{k: 3, failed: true, wrote: checkpoint.Summary{Pieces: 1 << 40, Digest: 1<<64 - 1}},
		commitMsg{k: 3}, commitMsg{k: 3, whole: checkpoint.Summary{Pieces: 1 << 50, Digest: 1 << 63}}, discardMsg{3},
		committedMsg{k: 3}, committedMsg{k: 3, failed: true},
		warnMsg{k: 3, full: true}, iteratedMsg{}, inventoryMsg{}, restartPlanMsg{},
		partMsg{k: 3, piece: 4, off: 1 << 40}, unknownMsg{200},
	} {
		h := m.header()
		if got := decodeCkpt(&h); h.Type != msgCheckpoint || got != m {
			t.Errorf("%#v came back as %#v (type %d)", m, got, h.Type)
		}
	}
	forms := map[string]uint8{}
	for phase := ckptPrepare; phase <= ckptCommitted; phase++ {
		m := decodeCkpt(&transport.Header{Type: msgCheckpoint, Flags: phase})
		name := fmt.Sprintf("%T", m)
		_, unknown := m.(unknownMsg)
		if other, ok := forms[name]; ok || unknown || m.header().Flags != phase {
			t.Errorf("phase %d reads as %s, written as phase %d (the form of phase %d)", phase, name, m.header().Flags, other)
		}
		forms[name] = phase
	}
}
