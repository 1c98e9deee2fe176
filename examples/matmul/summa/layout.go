package summa

import "github.com/orwl-go/orwl/examples/grid"

// DefaultNB is the block size a multiplication of N x N matrices over grid g uses unless
// told otherwise: 512, and 1024 from N = 4096, large enough for a CPU kernel to run near
// its peak on each block and small enough that a task computes on one panel while the
// next travels, but no larger than a task's share of N along the longer side of the grid,
// so that every task has a block. On 2 cores, 2 processes, 1024 took 2-3% less time than
// 512 at N = 4096 and 8192 (every multiplication, the first included: each step runs one
// product over a task's part of C, half as many steps pass over it), the same at 2048;
// `go run ./lab/bench sweep` puts the default beside every block size and grid.
func DefaultNB(n int, g grid.Grid) int {
	nb := 512
	if n >= 4096 {
		nb = 1024
	}
	return max(1, min(nb, n/max(g.P, g.Q)))
}

// MaxTasks bounds the tasks of a multiplication: far more than any machine runs, far fewer
// than what would exhaust memory just describing the job.
const MaxTasks = 1 << 16

// BytesPerTask estimates the memory one task of a multiplication holds, in bytes: its part
// of A, B and C (all of them in a balanced run), its panel buffers, and at most as many
// copies of every other owner's in its grid row and column.
func BytesPerTask(n, nb int, g grid.Grid, balanced bool) float64 {
	fn, fnb := float64(n), float64(min(nb, n))
	if balanced {
		return 8 * (3*fn*fn + 4*fn*fnb)
	}
	t := float64(g.Tasks())
	_, aUses, bUses := schedule(g, (n+nb-1)/nb, 2)
	aPanels := float64(buffersUsed(aUses)*g.Q) * fnb * fn / float64(g.P)
	bPanels := float64(buffersUsed(bUses)*g.P) * fnb * fn / float64(g.Q)
	return 8 * (3*fn*fn/t + aPanels + bPanels)
}

// buffersUsed returns the most buffers one owner uses.
func buffersUsed(uses []bufferUses) int {
	most := 0
	for _, u := range uses {
		n := 0
		for _, c := range u {
			n += min(c, 1)
		}
		most = max(most, n)
	}
	return most
}

// numroc returns how many of n indices, dealt in blocks of nb round-robin over procs
// processes starting at process 0, belong to process iproc (ScaLAPACK's NUMROC).
func numroc(n, nb, iproc, procs int) int {
	blocks := n / nb
	count := (blocks / procs) * nb
	switch extra := blocks % procs; {
	case iproc < extra:
		count += nb
	case iproc == extra:
		count += n % nb
	}
	return count
}

// globals returns the global indices owned by process iproc, in local order.
func globals(n, nb, iproc, procs int) []int {
	out := make([]int, 0, numroc(n, nb, iproc, procs))
	for start := iproc * nb; start < n; start += procs * nb {
		for i := start; i < min(start+nb, n); i++ {
			out = append(out, i)
		}
	}
	return out
}

// blockWidth returns the width of global block k of n indices in blocks of nb.
func blockWidth(n, nb, k int) int { return min(nb, n-k*nb) }

// panelBuffers is how many locations every task has for A panels, and for B panels: the
// panels of the next panelBuffers-1 steps (the lookahead) travel while a step is multiplied.
// One step of lookahead hides a transfer as long as a step's compute; two hide the
// broadcast of a panel owner that must send it to several others, on a slow link.
const panelBuffers = 3

// lookahead is how many steps ahead of its multiplication a task publishes its panels.
const lookahead = panelBuffers - 1

// step says who publishes the panels of one global step and in which buffer.
type step struct {
	k          int // global block column of A / block row of B multiplied
	aCol, aBuf int // grid column owning A's panel k, and the buffer (0 to panelBuffers-1) it uses
	bRow, bBuf int // grid row owning B's panel k, and its buffer
	// aLends (bLends) says that the panel may lend its pages to the buffer's location (put;
	// see lendable).
	aLends, bLends bool
}

// bufferUses counts a grid row's or column's publications, per buffer.
type bufferUses [panelBuffers]int

// schedule lists the steps of reps multiplications of nk panels each. For every step, the
// owner of a panel publishes it in the first of its buffers not used in the last lookahead
// steps, so that consecutive uses of one buffer are at least lookahead+1 steps apart, as
// the lookahead and the proof of deadlock freedom need; one is always free, as an owner
// publishes at most lookahead times in lookahead steps. An owner that publishes every step
// cycles through its three buffers; owners that take turns use fewer (two for two owners,
// one for three or more, but at the turn of a multiplication when nk is not a multiple of
// their number): every buffer less is memory a task need not hold, nor touch for the first
// time in its first multiplication. It also returns how often each grid column and row
// publishes, per buffer.
func schedule(g grid.Grid, nk, reps int) (steps []step, aUses, bUses []bufferUses) {
	aUses, bUses = make([]bufferUses, g.Q), make([]bufferUses, g.P)
	aLast, bLast := make([]lastUse, g.Q), make([]lastUse, g.P)
	for s := range nk * reps {
		k := s % nk
		st := step{k: k, aCol: k % g.Q, bRow: k % g.P}
		st.aBuf, st.bBuf = aLast[st.aCol].take(s), bLast[st.bRow].take(s)
		aUses[st.aCol][st.aBuf]++
		bUses[st.bRow][st.bBuf]++
		steps = append(steps, st)
	}
	for s := range steps {
		steps[s].aLends, steps[s].bLends = lendable(steps, s, true), lendable(steps, s, false)
	}
	return steps, aUses, bUses
}

// lendable reports whether the panel that steps[s] publishes, A's (a) or B's, may lend its
// pages to the location of its buffer (put): unless its owner publishes it next through
// another of its buffers before this one takes another panel, which gives the pages back.
// Lent then, the panel would read zero where it lives while its pages were still in the
// first location, and the second would get no data.
func lendable(steps []step, s int, a bool) bool {
	at := func(st step) (owner, buf int) {
		if a {
			return st.aCol, st.aBuf
		}
		return st.bRow, st.bBuf
	}
	o, b := at(steps[s])
	for _, st := range steps[s+1:] {
		switch so, sb := at(st); {
		case so != o:
		case st.k == steps[s].k:
			return sb == b
		case sb == b:
			return true
		}
	}
	return true
}

// lastUse is, for one owner, the step after the last use of each buffer (0: never used).
type lastUse [panelBuffers]int

// take returns the first buffer not used in the lookahead steps before step s, and marks
// it used at s.
func (u *lastUse) take(s int) int {
	for b, next := range u {
		if next == 0 || s+1-next >= lookahead+1 {
			u[b] = s + 1
			return b
		}
	}
	panic("summa: no free panel buffer") // impossible: see schedule
}
