package orwl

import (
	"fmt"
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

// done is rank r's answer when its pieces of checkpoint k are written, and its bytes.
func (j scaleJob) done(t *testing.T, r, k int) (coordInput, int) {
	return answerIn(r, doneMsg{k: k, wrote: checkpoint.Summarize(j.pieces(t, r))}), wireHeader
}

// inventory is what rank r's directory holds after checkpoint k was committed, and the
// bytes of its message: the manifest, which lists its own pieces and its partner's (rank
// r-1), and their files.
func (j scaleJob) inventory(t *testing.T, r, k int) (coordInput, int) {
	dir := fmt.Sprintf("/ckpt/rank-%d", r)
	prev := (r + j.n - 1) % j.n
	whole := checkpoint.Summarize(j.all(t))
	listed := sortedInfos(append(j.pieces(t, prev), j.pieces(t, r)...))
	inv := inventory{Inventory: checkpoint.Inventory{Manifests: []checkpoint.Manifest{{Checkpoint: k, Dir: dir, Pieces: listed, Whole: &whole}}}}
	for _, from := range []int{prev, r} {
		for _, p := range j.pieces(t, from) {
			if !p.Inline {
				inv.Copies = append(inv.Copies, checkpoint.Copy{Checkpoint: k, Dir: dir, PieceInfo: p})
			}
		}
	}
	return inventoryIn(r, inv), wireHeader + len(mustJSON(t, inv))
}

// received returns the bytes (headers and payloads) that rank r receives from acts.
func received(acts []coordAction, r int) int {
	n := 0
	for _, a := range acts {
		if a.kind == doSend && (a.to < 0 || a.to == r) {
			n += wireHeader + len(a.payload)
		}
	}
	return n
}

// costs are the bytes one rank receives from rank 0 and sends it, at a restart (the
// survey) and at a checkpoint, in a job of n processes.
type costs struct{ restartIn, restartOut, ckptIn, ckptOut int }

// measure takes a job of n processes through a restart from checkpoint 5 and a
// checkpoint 7, and returns the bytes of rank r.
func measure(t *testing.T, n, r int) costs {
	j := scaleJob{n}
	s := newCkptCoordinator(n, n, j.owner(), "")
	var c costs
	var acts []coordAction
	for q := range n {
		in, out := j.inventory(t, q, 5)
		if q == r {
			c.restartOut = out
		}
		acts = append(acts, s.step(in)...)
	}
	c.restartIn = received(acts, r)
	if !s.surveyed() {
		t.Fatalf("%d processes: no plan after every inventory: %+v", n, acts)
	}
	acts = s.step(tickIn())
	for _, m := range []ckptMessage{reportMsg{bound: 5, minIter: 100}, armedMsg{7}, copiedMsg{7}} {
		for q := range n {
			acts = append(acts, s.step(answerIn(q, m))...)
		}
		c.ckptOut += wireHeader
	}
	for q := range n {
		in, out := j.done(t, q, 7)
		if q == r {
			c.ckptOut += out
		}
		acts = append(acts, s.step(in)...)
	}
	if m, ok := acts[len(acts)-1].msg.(commitMsg); !ok || m.k != 7 || m.whole != checkpoint.Summarize(j.all(t)) {
		t.Fatalf("%d processes: the checkpoint ends with %+v, not its commit", n, acts[len(acts)-1])
	}
	c.ckptIn = received(acts, r)
	return c
}

// TestCoordinatorBytesPerRank: in jobs of 4 to 256 processes, the bytes a process receives
// from rank 0 at a restart (its plan) and at a checkpoint (the five exchanges and the
// commit), and those it sends rank 0 (its inventory, its answers), stay those of a job of
// 4 processes (but for the digits of a number: a Summary's count and digest). Before, the commit and the plan carried every piece of the job to every
// process, and each process's manifest, in its inventory, listed them all: O(N) bytes per
// process, O(N²) in all.
func TestCoordinatorBytesPerRank(t *testing.T) {
	const slack = 24 // the digits of a Summary in JSON
	base := measure(t, 4, 1)
	for _, n := range []int{16, 64, 256} {
		got := measure(t, n, 1)
		t.Logf("N=%d: rank 1 receives %d bytes at the restart and %d at a checkpoint, sends %d and %d (N=4: %d, %d, %d, %d)",
			n, got.restartIn, got.ckptIn, got.restartOut, got.ckptOut, base.restartIn, base.ckptIn, base.restartOut, base.ckptOut)
		if got.restartIn > base.restartIn+slack || got.restartOut > base.restartOut+slack || got.ckptIn > base.ckptIn+slack || got.ckptOut > base.ckptOut+slack {
			t.Errorf("N=%d: rank 1's bytes %+v, at N=4 %+v: they grow with the processes", n, got, base)
		}
	}
}
