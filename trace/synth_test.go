package trace

import (
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orwl-go/orwl/fifo"
)

// synthJob describes a synthetic ORWL-like job: tasks spread evenly over
// processes (one Recorder each), each task owning "block" and "bound".
type synthJob struct {
	procs, tasks, iters int
	work                int           // base amount of work per block section
	skew                time.Duration // pretend process p's wall clock is p*skew ahead
	correct             bool          // set clock offsets that undo the skew
}

// token is what a bound's release hands to the reader's grant.
type token struct {
	flow FlowID
}

var sink atomic.Int64

// spin does some floating-point work (not a sleep).
func spin(n int) {
	s := 0.0
	for i := 0; i < n; i++ {
		s += math.Sqrt(float64(i))
	}
	sink.Add(int64(s))
}

// run executes the job with real goroutines, one per task, and returns the
// recorders (rank order). Task t reads bound@t-1 (the ring wraps) at position
// 0, writes block@t at position 1, and writes bound@t at position 2. A channel
// per bound carries the flow id of its release to the reader's grant; the
// first iteration is seeded so the ring does not deadlock.
func (j synthJob) run(t testing.TB) []*Recorder {
	t.Helper()
	recs := make([]*Recorder, j.procs)
	for p := range recs {
		recs[p] = New(p)
		if j.skew != 0 {
			recs[p].startUnix += int64(p) * int64(j.skew)
			if j.correct {
				recs[p].SetClockOffset(-time.Duration(p) * j.skew)
			}
		}
	}
	per := (j.tasks + j.procs - 1) / j.procs
	rankOf := func(task int) int { return task / per }
	chans := make([]chan token, j.tasks)
	for i := range chans {
		chans[i] = make(chan token, j.iters+1)
	}
	for i := range chans {
		chans[i] <- token{} // slack of one iteration: a pipeline, not a serial ring
	}
	var arrived sync.WaitGroup
	arrived.Add(j.tasks)
	scheduled := make(chan struct{})
	barriers := make([]Span, j.procs)
	for p, r := range recs {
		barriers[p] = r.BeginBarrier("schedule")
	}
	var wg sync.WaitGroup
	for task := 0; task < j.tasks; task++ {
		wg.Add(1)
		go func(task int) {
			defer wg.Done()
			r := recs[rankOf(task)]
			tr := r.TaskTrack(task)
			left := (task + j.tasks - 1) % j.tasks
			boundL := Loc{Task: left, Name: "bound"}
			block := Loc{Task: task, Name: "block"}
			bound := Loc{Task: task, Name: "bound"}
			fifoBlock, fifoBound := r.FIFO(block), r.FIFO(bound)
			rng := rand.New(rand.NewSource(int64(task)))
			// write takes l (FIFO f) at position pos, works for n and releases.
			write := func(f *FIFO, l Loc, pos, n int) FlowID {
				f.Request(task, fifo.Write, pos)
				tr.Request(l, fifo.Write, pos)
				f.Grant(task, fifo.Write)
				tr.Grant(l, fifo.Write, 0)
				s := tr.BeginSection(l, fifo.Write)
				spin(n)
				s.End()
				f.Release(task, fifo.Write)
				return tr.Release(l, fifo.Write)
			}
			init := tr.BeginSpan("init")
			spin(j.work / 4)
			init.End()
			arrived.Done()
			if task == 0 {
				arrived.Wait()
				for _, b := range barriers {
					b.End()
				}
				close(scheduled)
			}
			<-scheduled
			for it := 0; it < j.iters; it++ {
				// Read the left neighbour's bound.
				tr.Request(boundL, fifo.Read, 0)
				w := tr.BeginWait(boundL, fifo.Read, 0)
				tok := <-chans[left]
				if rankOf(left) != rankOf(task) {
					x := tr.BeginTransfer(boundL, In, rankOf(left), 4096)
					spin(j.work / 8)
					x.End()
				}
				tr.Grant(boundL, fifo.Read, tok.flow)
				w.End()
				s := tr.BeginSection(boundL, fifo.Read)
				spin(j.work / 8)
				s.End()
				tr.Release(boundL, fifo.Read)

				// Write my block.
				write(fifoBlock, block, 1, j.work+rng.Intn(j.work+1))

				// Write my bound and hand it to the right neighbour.
				id := write(fifoBound, bound, 2, j.work/8)
				right := (task + 1) % j.tasks
				if rankOf(right) != rankOf(task) {
					x := tr.BeginTransfer(bound, Out, rankOf(right), 4096)
					spin(j.work / 8)
					x.End()
				}
				chans[task] <- token{flow: id}
			}
		}(task)
	}
	wg.Wait()
	return recs
}

// parts serialises every recorder's part.
func parts(recs []*Recorder) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = r.Part()
	}
	return out
}
