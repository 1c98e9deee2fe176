package orwl

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/orwl-go/orwl/checkpoint"
)

// The bytes of a checkpoint and of a restart per process, as the job grows (issue 43): what
// a process receives from rank 0, and sends it, must not grow with the number of
// processes, only with the pieces of its own tasks.

// wireHeader is the transport's header, which every message carries besides its payload.
const wireHeader = 44

// scaleJob is a job of n processes, one task each, whose task t keeps a state (inline
// in the manifests) and a location of 1 MiB (a file).
type scaleJob struct{ n int }

func (j scaleJob) owner() []int {
	o := make([]int, j.n)
	for t := range o {
		o[t] = t
	}
	return o
}

// pieces returns the pieces rank r writes: those of its task.
func (j scaleJob) pieces(t *testing.T, r int) []checkpoint.PieceInfo {
	s, err := checkpoint.InlinePiece(checkpoint.StateKey(r, "iter"), []byte{byte(r), 0, 0, 0, 0, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	return []checkpoint.PieceInfo{{Key: checkpoint.LocationKey(r, "block"), Size: 1 << 20, CRC: uint32(r)}, s}
}

// all returns every piece of the job, sorted by key.
func (j scaleJob) all(t *testing.T) []checkpoint.PieceInfo {
	var all []checkpoint.PieceInfo
	for r := range j.n {
		all = append(all, j.pieces(t, r)...)
	}
	return sortedInfos(all)
}

func sortedInfos(ps []checkpoint.PieceInfo) []checkpoint.PieceInfo {
	out := append([]checkpoint.PieceInfo(nil), ps...)
	for i := range out {
		for k := i; k > 0 && out[k].Key.Compare(out[k-1].Key) < 0; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

// inventory is what rank r's directory holds after checkpoint k was committed: the
// manifest, which lists its own pieces and its partner's (rank r-1), and their files.
func (j scaleJob) inventory(t *testing.T, r, k int) inventory {
	dir := fmt.Sprintf("/ckpt/rank-%d", r)
	prev := (r + j.n - 1) % j.n
	whole := checkpoint.Summarize(j.all(t))
	listed := sortedInfos(append(j.pieces(t, prev), j.pieces(t, r)...))
	inv := inventory{Rank: r, Inventory: checkpoint.Inventory{Manifests: []checkpoint.Manifest{{Checkpoint: k, Dir: dir, Pieces: listed, Whole: &whole}}}}
	for _, from := range []int{prev, r} {
		for _, p := range j.pieces(t, from) {
			if !p.Inline {
				inv.Copies = append(inv.Copies, checkpoint.Copy{Checkpoint: k, Dir: dir, PieceInfo: p})
			}
		}
	}
	return inv
}

// costs are the most bytes a process other than rank 0 receives and sends at a restart per
// rank of its subtree (the inventories of its subtree, its children's parts of the plan
// with its own; restore.go) and at a checkpoint (the exchanges of checkpoint_tree.go, the
// answers of its children and its own, the messages from rank 0 it passes on), in a job of
// n processes; restartMsgs, the most messages a process (rank 0 included) receives and
// sends at the restart; answers, the most inputs rank 0's coordinator takes in one
// exchange; and rank0, the bytes rank 0 receives and sends at the restart (every
// inventory, every plan, through its children), which are not counted in the others.
type costs struct {
	restartIn, restartOut, ckptIn, ckptOut int
	restartMsgs, answers, rank0            int
}

// traffic counts the bytes and the messages each process of a job receives and sends.
type traffic struct{ in, out, msgs []int }

func newTraffic(n int) traffic { return traffic{make([]int, n), make([]int, n), make([]int, n)} }

// add counts a message of size bytes from one process to another.
func (b traffic) add(from, to, size int) {
	b.out[from] += size
	b.in[to] += size
	b.msgs[from]++
	b.msgs[to]++
}

// sends counts the messages of acts, rank 0's: one to a process, or one to every process
// along the tree.
func (b traffic) sends(acts []coordAction, n int) {
	for _, a := range acts {
		switch {
		case a.kind != doSend:
		case a.to >= 0:
			b.add(0, a.to, wireHeader+len(a.payload))
		default:
			for r := 1; r < n; r++ {
				b.add(treeParent(r), r, wireHeader+len(a.payload))
			}
		}
	}
}

// gather takes one exchange's answers, answer(r) each process's own, up the tree as the
// processes' relays do, then to rank 0's coordinator, and returns its actions and the
// number of inputs it took.
func gather(t *testing.T, s *ckptCoordinator, n int, b traffic, answer func(r int) ckptMessage) ([]coordAction, int) {
	relays := make([]relay, n)
	sums := make([]ckptMessage, n)
	for r := n - 1; r >= 1; r-- {
		children := treeChildren(r, n)
		sum, _, err := relays[r].add(r, r, children, answer(r), nil)
		for _, child := range children {
			b.add(child, r, wireHeader)
			sum, _, err = relays[r].add(r, child, children, sums[child], nil)
		}
		if err != nil || sum == nil {
			t.Fatalf("%d processes: rank %d gathered %+v, %v", n, r, sum, err)
		}
		sums[r] = sum
	}
	acts := s.step(answerIn(0, answer(0)))
	inputs := 1
	for _, child := range treeChildren(0, n) {
		b.add(child, 0, wireHeader)
		acts = append(acts, s.step(answerIn(child, sums[child]))...)
		inputs++
	}
	return acts, inputs
}

// measure takes a job of n processes through a restart from checkpoint 5 and a
// checkpoint 7, and returns its costs.
func measure(t *testing.T, n int) costs {
	j := scaleJob{n}
	s := newCkptCoordinator(n, n, j.owner(), "")
	var c costs
	restart := newTraffic(n)
	invs := make([][]inventory, n) // by rank: those of its subtree, as it sends them its parent
	for r := n - 1; r >= 0; r-- {
		invs[r] = []inventory{j.inventory(t, r, 5)}
		for _, child := range treeChildren(r, n) {
			restart.add(child, r, wireHeader+len(mustJSON(t, invs[child])))
			invs[r] = append(invs[r], invs[child]...)
		}
	}
	acts := s.step(coordInput{kind: onAnswer, from: 0, msg: inventoryMsg{}, invs: invs[0][:1]})
	for _, child := range treeChildren(0, n) {
		acts = append(acts, s.step(coordInput{kind: onAnswer, from: child, msg: inventoryMsg{}, invs: invs[child]})...)
	}
	if !s.surveyed() || len(acts) != 1 || acts[0].to != 0 {
		t.Fatalf("%d processes: after every inventory, rank 0 does %+v, not send itself the plan", n, acts)
	}
	var plan planMsg
	if err := json.Unmarshal(acts[0].payload, &plan); err != nil {
		t.Fatal(err)
	}
	var down func(r int, parts []planPart) // the parts of r's subtree, as it passes them on
	down = func(r int, parts []planPart) {
		_, below := split(r, n, parts)
		for i, child := range treeChildren(r, n) {
			restart.add(r, child, wireHeader+len(mustJSON(t, planMsg{Parts: below[i]})))
			down(child, below[i])
		}
	}
	down(0, plan.Parts)
	ckpt := newTraffic(n)
	ckpt.sends(s.step(tickIn()), n)
	for _, m := range []ckptMessage{reportMsg{bound: 5, minIter: 100}, armedMsg{7}, copiedMsg{7}, nil} {
		var inputs int
		acts, inputs = gather(t, s, n, ckpt, func(r int) ckptMessage {
			if m == nil {
				return doneMsg{k: 7, wrote: checkpoint.Summarize(j.pieces(t, r))}
			}
			return m
		})
		ckpt.sends(acts, n)
		c.answers = max(c.answers, inputs)
	}
	if m, ok := acts[len(acts)-1].msg.(commitMsg); !ok || m.k != 7 || m.whole != checkpoint.Summarize(j.all(t)) {
		t.Fatalf("%d processes: the checkpoint ends with %+v, not its commit", n, acts[len(acts)-1])
	}
	acts, _ = gather(t, s, n, ckpt, func(int) ckptMessage { return committedMsg{k: 7} })
	if len(acts) != 1 || acts[0].kind != doComplete {
		t.Fatalf("%d processes: every manifest written, and rank 0 does %+v", n, acts)
	}
	c.rank0 = restart.in[0] + restart.out[0]
	c.restartMsgs = slices.Max(restart.msgs)
	for r := 1; r < n; r++ {
		size := subtreeSize(r, n)
		c.restartIn, c.restartOut = max(c.restartIn, restart.in[r]/size), max(c.restartOut, restart.out[r]/size)
	}
	c.ckptIn, c.ckptOut = slices.Max(ckpt.in), slices.Max(ckpt.out)
	return c
}

// TestCoordinatorBytesPerRank: in jobs of 8 to 256 processes, the most bytes a process
// receives and sends at a restart per rank of its subtree (the inventories it gathers, the
// parts of the plan it passes on) and at a checkpoint (the five exchanges, prepare to
// commit, along the job's tree), the messages of a process at the restart, and the inputs
// rank 0's coordinator takes per exchange, stay those of a job of 8 processes (but for the
// digits of the numbers in JSON: ranks, tasks, a Summary). Before, the commit and the plan
// carried every piece of the job to every process, each process's manifest, in its
// inventory, listed them all, and every process answered rank 0 itself: O(N) bytes per
// process, O(N²) in all, and N answers per exchange at rank 0; then every process sent
// rank 0 its inventory and received its plan from it, N messages each way at rank 0. Rank
// 0 still receives every inventory and sends every part of the plan, through its children
// (logged).
func TestCoordinatorBytesPerRank(t *testing.T) {
	const slack = 48 // the digits of numbers in JSON: ranks, tasks, a Summary
	base := measure(t, 8)
	for _, n := range []int{16, 64, 256} {
		got := measure(t, n)
		// The digits of the numbers of every inventory and part a process gathers or passes
		// on (ranks, tasks, directories), a quarter at N = 256 (1,010 bytes per rank, 838 at N = 8).
		restartSlack := max(base.restartIn, base.restartOut) / 4
		t.Logf("N=%d: a process receives at most %d bytes per rank of its subtree at the restart and %d at a checkpoint, sends %d and %d; a process receives and sends %d messages at the restart; rank 0's coordinator takes %d answers per exchange; rank 0 receives and sends %d bytes at the restart (N=8: %+v)",
			n, got.restartIn, got.ckptIn, got.restartOut, got.ckptOut, got.restartMsgs, got.answers, got.rank0, base)
		if got.restartIn > base.restartIn+restartSlack || got.restartOut > base.restartOut+restartSlack || got.ckptIn > base.ckptIn+slack || got.ckptOut > base.ckptOut+slack ||
			got.restartMsgs > base.restartMsgs || got.answers > base.answers {
			t.Errorf("N=%d: %+v, at N=8 %+v: they grow with the processes", n, got, base)
		}
	}
}
