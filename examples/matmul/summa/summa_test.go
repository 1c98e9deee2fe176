package summa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
)

// cpuKernels are the CPU kernels available here, without this file's paced ones.
func cpuKernels(t *testing.T) []string {
	names := slices.DeleteFunc(kernels.AvailableOn(kernels.CPU), func(name string) bool { return strings.HasPrefix(name, "paced-") || name == pinningName })
	if len(names) == 0 {
		t.Fatal("no CPU kernel available")
	}
	return names
}

func TestNumrocAndGlobals(t *testing.T) {
	for _, c := range []struct{ n, nb, procs int }{{10, 3, 1}, {10, 3, 2}, {10, 3, 4}, {7, 8, 3}, {64, 8, 3}, {1, 1, 5}} {
		seen := make([]bool, c.n)
		total := 0
		for p := range c.procs {
			g := globals(c.n, c.nb, p, c.procs)
			if len(g) != numroc(c.n, c.nb, p, c.procs) {
				t.Fatalf("%+v proc %d: %d globals, numroc %d", c, p, len(g), numroc(c.n, c.nb, p, c.procs))
			}
			for _, i := range g {
				if seen[i] || (i/c.nb)%c.procs != p {
					t.Fatalf("%+v proc %d: index %d wrongly owned", c, p, i)
				}
				seen[i] = true
			}
			total += len(g)
		}
		if total != c.n {
			t.Fatalf("%+v: %d indices owned", c, total)
		}
	}
}

// TestScheduleReusesBuffersLate checks what the deadlock-freedom argument needs: a buffer
// is used again at least lookahead+1 steps after its previous use; and that an owner uses
// no more buffers than that needs (three alone, two when two owners take turns, one for
// three or more).
func TestScheduleReusesBuffersLate(t *testing.T) {
	for _, g := range []grid.Grid{{P: 1, Q: 1}, {P: 2, Q: 1}, {P: 1, Q: 3}, {P: 2, Q: 2}, {P: 3, Q: 2}, {P: 4, Q: 1}} {
		for _, nk := range []int{1, 2, 3, 4, 5, 6, 8, 12} {
			steps, aUses, bUses := schedule(g, nk, 3)
			lastA, lastB := map[[2]int]int{}, map[[2]int]int{}
			countA, countB := make([]bufferUses, g.Q), make([]bufferUses, g.P)
			heldA, heldB := make([][panelBuffers]int, g.Q), make([][panelBuffers]int, g.P)
			for s, st := range steps {
				lendOnce(t, fmt.Sprintf("grid %s nk %d step %d: A", g, nk, s), &heldA[st.aCol], st.k, st.aBuf, st.aLends)
				lendOnce(t, fmt.Sprintf("grid %s nk %d step %d: B", g, nk, s), &heldB[st.bRow], st.k, st.bBuf, st.bLends)
				if st.k != s%nk || st.aCol != st.k%g.Q || st.bRow != st.k%g.P {
					t.Fatalf("grid %s nk %d step %d: %+v", g, nk, s, st)
				}
				ka, kb := [2]int{st.aCol, st.aBuf}, [2]int{st.bRow, st.bBuf}
				if prev, ok := lastA[ka]; ok && s-prev < lookahead+1 {
					t.Fatalf("grid %s nk %d: A buffer %v used at steps %d and %d", g, nk, ka, prev, s)
				}
				if prev, ok := lastB[kb]; ok && s-prev < lookahead+1 {
					t.Fatalf("grid %s nk %d: B buffer %v used at steps %d and %d", g, nk, kb, prev, s)
				}
				lastA[ka], lastB[kb] = s, s
				countA[st.aCol][st.aBuf]++
				countB[st.bRow][st.bBuf]++
			}
			// Owners that take turns evenly use fewer buffers.
			if want := []int{3, 3, 2, 1}[min(g.Q, 3)]; nk%g.Q == 0 && buffersUsed(aUses) > want {
				t.Fatalf("grid %s nk %d: a grid column uses %d A buffers, want at most %d", g, nk, buffersUsed(aUses), want)
			}
			if want := []int{3, 3, 2, 1}[min(g.P, 3)]; nk%g.P == 0 && buffersUsed(bUses) > want {
				t.Fatalf("grid %s nk %d: a grid row uses %d B buffers, want at most %d", g, nk, buffersUsed(bUses), want)
			}
			for q := range g.Q {
				if countA[q] != aUses[q] {
					t.Fatalf("grid %s nk %d: A uses %v, counted %v", g, nk, aUses, countA)
				}
			}
			for p := range g.P {
				if countB[p] != bUses[p] {
					t.Fatalf("grid %s nk %d: B uses %v, counted %v", g, nk, bUses, countB)
				}
			}
		}
	}
}

// lendOnce follows what put leaves in an owner's panel locations (held[b]: the panel whose
// pages buffer b's location holds, plus one) when it publishes panel k through buffer b,
// lending its pages or not, and fails when a panel would be lent to two locations at once.
func lendOnce(t *testing.T, what string, held *[panelBuffers]int, k, b int, lends bool) {
	t.Helper()
	if held[b] == k+1 {
		return // there already
	}
	held[b] = 0 // given back
	if !lends {
		return
	}
	if slices.Contains(held[:], k+1) {
		t.Fatalf("%s: panel %d lent to buffer %d while another location holds it: %v", what, k, b, *held)
	}
	held[b] = k + 1
}

// TestDefaultNB: 512, 1024 from N = 4096, while every task keeps a block along the grid's
// longer side, then a task's share of N, never 0.
func TestDefaultNB(t *testing.T) {
	for _, c := range []struct {
		n    int
		g    grid.Grid
		want int
	}{
		{8192, grid.Grid{P: 2, Q: 1}, 1024}, {4096, grid.Grid{P: 2, Q: 1}, 1024}, {4095, grid.Grid{P: 2, Q: 1}, 512},
		{1024, grid.Grid{P: 2, Q: 1}, 512}, {4096, grid.Grid{P: 8, Q: 2}, 512},
		{1024, grid.Grid{P: 4, Q: 4}, 256}, {1000, grid.Grid{P: 3, Q: 1}, 333}, {100, grid.Grid{P: 2, Q: 2}, 50}, {3, grid.Grid{P: 8, Q: 2}, 1},
	} {
		if got := DefaultNB(c.n, c.g); got != c.want {
			t.Errorf("DefaultNB(%d, %s) = %d, want %d", c.n, c.g, got, c.want)
		}
	}
}

// TestMultiplies runs the whole job in one process for several grids, sizes that NB does
// not divide, and every CPU kernel, with both checks.
func TestMultiplies(t *testing.T) {
	for _, kernel := range cpuKernels(t) {
		for _, g := range []grid.Grid{{P: 1, Q: 1}, {P: 2, Q: 1}, {P: 1, Q: 3}, {P: 2, Q: 2}} {
			for _, c := range []struct{ n, nb, reps int }{{37, 5, 1}, {50, 8, 2}, {10, 8, 1}, {6, 16, 1}} {
				names := make([]string, g.Tasks())
				for i := range names {
					names[i] = kernel
				}
				res, err := Run(context.Background(), Params{N: c.n, NB: c.nb, Grid: g, Kernels: names,
					Reps: c.reps, Seed: 7, Verify: Freivalds | Exact})
				if err != nil {
					t.Fatalf("%s grid %s %+v: %v", kernel, g, c, err)
				}
				if !res.Verified || res.Checks != "freivalds+exact" {
					t.Fatalf("%s grid %s %+v: not verified: %+v", kernel, g, c, res)
				}
				var flops float64
				for _, s := range res.Tasks {
					flops += s.Flops
				}
				if want := Flops(c.n) * float64(c.reps); flops != want {
					t.Fatalf("%s grid %s %+v: tasks did %g flops, want %g", kernel, g, c, flops, want)
				}
			}
		}
	}
}

// TestFirstMultiplication: the first multiplication is reported apart, no faster than the
// best, with the page faults of touching C for the first time (C is allocated after A and
// B, in the timed interval, fresh: at least one fault).
func TestFirstMultiplication(t *testing.T) {
	const n = 600 // C is 2.9 MB: over hugemem's threshold, so mapped fresh on Linux
	res, err := Run(context.Background(), Params{N: n, NB: 128, Grid: grid.Grid{P: 1, Q: 1}, Kernels: cpuKernels(t)[:1],
		Reps: 2, Seed: 7, Verify: Freivalds})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || !(res.Seconds > 0) || res.FirstSeconds < res.Seconds || res.FirstFaults < 1 {
		t.Fatalf("first %.4fs with %d page faults, best %.4fs, verified %v", res.FirstSeconds, res.FirstFaults, res.Seconds, res.Verified)
	}
}

// TestPanelsLendTheirPages: an owner lends its panels' pages to its panel locations
// instead of copying the panels (put), and takes them back for the next panel: the first
// multiplication touches C fresh but not the panel locations, every multiplication
// verifies, and the product is bit-identical to copied panels' (A panels are copied when
// Freivalds' check reads them, lent otherwise).
func TestPanelsLendTheirPages(t *testing.T) {
	// C is 12.5 MiB; 5 steps, so that a panel location takes another panel and gives the
	// pages of the one it held back; each task's two B panel locations are 2.5 MiB, mapped
	// by hugemem and untouched before the first multiplication.
	const n, nb = 1280, 256
	kernel := cpuKernels(t)[0]
	job := func(g grid.Grid, reps int, v Verify) *Result {
		res, err := Run(context.Background(), Params{N: n, NB: nb, Grid: g, Kernels: slices.Repeat([]string{kernel}, g.Tasks()),
			Reps: reps, Seed: 7, Verify: v})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified {
			t.Fatalf("grid %s, %d multiplication(s), checks %s: not verified: %+v", g, reps, res.Checks, res)
		}
		return res
	}
	const cPages, panelPages = n * n * 8 / 4096, 2 * 2 * nb * n * 8 / 4096
	// One kernel thread per task, as the example runs one task per core: two tasks that
	// call a kernel of two threads each at once take buffers of the kernel's that it
	// faults in, or not, as the calls meet.
	if err := kernels.SetCPUThreads([]string{kernel}, 1); err != nil {
		t.Fatal(err)
	}
	defer kernels.SetCPUThreads([]string{kernel}, 0)
	job(grid.Grid{P: 2, Q: 1}, 1, Freivalds) // the kernel's buffers and the heap warm up
	var sums []uint64
	for _, reps := range []int{1, 2} {
		res := job(grid.Grid{P: 2, Q: 1}, reps, Freivalds)
		if res.FirstFaults >= cPages+panelPages/2 {
			t.Errorf("%d multiplication(s): the first took %d page faults; C has %d pages, the panel locations %d, which should not be touched fresh", reps, res.FirstFaults, cPages, panelPages)
		}
		t.Logf("%d multiplication(s): the first took %d page faults (C: %d pages, panel locations %d)", reps, res.FirstFaults, cPages, panelPages)
		sums = append(sums, res.Checksum)
	}
	if sums[0] != sums[1] {
		t.Errorf("checksum %016x after one multiplication, %016x after two", sums[0], sums[1])
	}
	copied, lent := job(grid.Grid{P: 1, Q: 2}, 2, Freivalds), job(grid.Grid{P: 1, Q: 2}, 2, Exact)
	if copied.Checksum != lent.Checksum {
		t.Errorf("grid 1x2: checksum %016x with A panels lent, %016x copied", lent.Checksum, copied.Checksum)
	}
}

// TestPanelLentToOneLocationAtATime: a panel that its owner publishes through one panel
// location in a multiplication and through the other in the next (here the only panel of
// each owner, NB = N/2, whose publications alternate between the two buffers) is not lent
// to the second while the first holds its pages: every number of multiplications gives
// the product, of A panels (grid 1x2, no Freivalds check, which keeps them) and of B
// panels alike. Lent twice, the second location took the pages the panel no longer had:
// after 2 multiplications, "exact-max-error=58.2".
func TestPanelLentToOneLocationAtATime(t *testing.T) {
	const n, nb = 1024, 512 // 4 MiB panels: mapped, so lent
	kernel := cpuKernels(t)[0]
	for _, c := range []struct {
		g grid.Grid
		v Verify
	}{{grid.Grid{P: 2, Q: 1}, Freivalds | Exact}, {grid.Grid{P: 1, Q: 2}, Exact}} {
		for _, reps := range []int{1, 2, 3, 4} {
			res, err := Run(context.Background(), Params{N: n, NB: nb, Grid: c.g, Kernels: slices.Repeat([]string{kernel}, c.g.Tasks()),
				Reps: reps, Seed: 7, Verify: c.v})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Verified {
				t.Fatalf("grid %s, %d multiplication(s): not verified, max error %g", c.g, reps, res.ExactErr)
			}
		}
	}
}

// TestDetectsWrongResult makes sure the checks can fail: tasks that skip a panel, in the
// 2-D algorithm and in a balanced run.
func TestDetectsWrongResult(t *testing.T) {
	gonum4 := []string{"gonum", "gonum", "gonum", "gonum"}
	for _, p := range []Params{
		{N: 40, NB: 8, Grid: grid.Grid{P: 2, Q: 2}, Kernels: gonum4, Reps: 1, Seed: 3},
		{N: 40, NB: 8, Grid: grid.Grid{P: 1, Q: 4}, Kernels: gonum4, Reps: 2, Seed: 3, Balance: true},
	} {
		for _, v := range []Verify{Freivalds, Exact} {
			p.Verify = v
			skipStep = 2
			res, err := Run(context.Background(), p)
			skipStep = -1
			if err != nil {
				t.Fatal(err)
			}
			if res.Verified {
				t.Fatalf("grid %s: checks %s passed a wrong product", p.Grid, res.Checks)
			}
		}
	}
}

func TestCutPoints(t *testing.T) {
	for _, c := range []struct {
		n       int
		weights []float64
		want    []int
	}{
		{100, []float64{1, 1}, []int{0, 48, 100}},
		{100, []float64{3, 1}, []int{0, 72, 100}},
		{100, []float64{1, 0, 1}, []int{0, 48, 48, 100}},
		{10, []float64{0, 0}, []int{0, 5, 10}},
		{5, []float64{1, 1, 1}, []int{0, 0, 0, 5}},
	} {
		if got := cutPoints(c.n, c.weights); !slices.Equal(got, c.want) {
			t.Errorf("cutPoints(%d, %v) = %v, want %v", c.n, c.weights, got, c.want)
		}
	}
}

// TestBalancedRuns: static splits and dynamic balancing multiply correctly, in one and
// in several processes' worth of tasks, and the shares cover all columns.
func TestBalancedRuns(t *testing.T) {
	names := cpuKernels(t)
	mixed := []string{names[0], names[len(names)-1], names[0]}
	for _, c := range []struct {
		split   []float64
		balance bool
	}{
		{[]float64{3, 1, 0}, false},
		{nil, true},
		{[]float64{1, 5, 1}, true},
	} {
		res, err := Run(context.Background(), Params{N: 61, NB: 9, Grid: grid.Grid{P: 1, Q: 3}, Kernels: mixed, Reps: 3, Seed: 5,
			Verify: Freivalds | Exact, Split: c.split, Balance: c.balance})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !res.Verified || len(res.Split) != 3 {
			t.Fatalf("%+v: %+v", c, res)
		}
		sum := 0.0
		for _, f := range res.Split {
			sum += f
		}
		if sum < 0.999 || sum > 1.001 {
			t.Fatalf("%+v: shares %v", c, res.Split)
		}
		if !c.balance && (res.Split[2] != 0 || res.Split[0] < 0.7) {
			t.Fatalf("%+v: static split not kept: %v", c, res.Split)
		}
	}
	if _, err := Run(context.Background(), Params{N: 10, NB: 2, Grid: grid.Grid{P: 2, Q: 1}, Kernels: []string{"gonum", "gonum"}, Reps: 1, Balance: true}); err == nil {
		t.Fatal("balanced run on a 2x1 grid accepted")
	}
}

func TestBalancedWeights(t *testing.T) {
	for _, c := range []struct {
		rates []float64
		n     int
		bias  float64
		want  []float64
	}{
		{[]float64{3, 1}, 800, 0, []float64{3, 1}},
		{[]float64{4, 1}, 800, 0.5, []float64{4, 0.5}},
		{[]float64{4, 1, 2}, 800, 1, []float64{4, 0.25, 1}},
		// One granule of 800 columns is 1% of the total weight: the floor.
		{[]float64{99, 0.5, 0, math.NaN(), math.Inf(1)}, 800, 0, []float64{99, 0.995, 0.995, 0.995, 0.995}},
		{[]float64{0, 0}, 800, 0, []float64{0.01, 0.01}},
		// Fewer columns than granules per task: the floor is an equal share.
		{[]float64{10, 0}, 8, 0, []float64{10, 5}},
	} {
		got := balancedWeights(c.rates, c.n, c.bias)
		if !slices.EqualFunc(got, c.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Errorf("balancedWeights(%v, %d, %g) = %v, want %v", c.rates, c.n, c.bias, got, c.want)
		}
	}
}

// TestBalancerSearch plays the balancer against a model of two tasks: a fast one that
// computes 4 columns per second while a slow one computes 1, and alone computes `alone`
// per second once the slow one is done. Shares in proportion to the rates (bias 0) make
// both finish together: the fastest split when the tasks do not slow each other down
// (alone = 4); when they do (alone = 6), the fast task alone is faster. The slow task is
// less than half as fast, so the split without it is measured right after bias 0 (-1
// below); then the weighed splits go on from bias 0.5 until one is clearly slower than
// the fastest weighed one (alone = 4) or the slow task is down to its granule (alone =
// 6, bias 1.5), and the fastest split of all is kept.
func TestBalancerSearch(t *testing.T) {
	const n = 800.0
	for _, c := range []struct {
		alone float64
		seq   []float64
	}{
		{4, []float64{0, -1, 0.5, 0, 0, 0, 0, 0}},
		{6, []float64{0, -1, 0.5, 1, 1.5, -1, -1, -1}},
	} {
		model := func(w []float64) (flops, secs []float64) {
			fast, slow := w[0]/(w[0]+w[1])*n, w[1]/(w[0]+w[1])*n
			tFast, tSlow := fast/4, slow
			if tFast > tSlow {
				tFast = tSlow + (fast-4*tSlow)/c.alone
			}
			return []float64{fast, slow}, []float64{tFast, tSlow}
		}
		b := newBalancer(n)
		w := []float64{1, 1}
		var seq, times []float64
		for range 8 {
			flops, secs := model(w)
			times = append(times, max(secs[0], secs[1]))
			w = b.next(flops, secs)
			if b.split.fast != nil {
				seq = append(seq, -1)
			} else {
				seq = append(seq, b.split.bias)
			}
		}
		if !slices.Equal(seq, c.seq) {
			t.Fatalf("alone %g: splits %v (times %v), want %v", c.alone, seq, times, c.seq)
		}
		// Once the search is over, every multiplication is as fast as the fastest measured.
		if best := slices.Min(times); times[6] != best || times[7] != best {
			t.Fatalf("alone %g: times %v: the last two are not the fastest", c.alone, times)
		}
	}
}

// fixedCostModel is the cost of a multiplication of n columns split by weights w: task 0
// computes fast columns per second; every other task slow ones, after a fixed cost in
// seconds for any columns at all (a CPU task beside a GPU reads the whole of A).
func fixedCostModel(n int, fast, slow, fixed float64) func(w []float64) (flops, secs []float64) {
	return func(w []float64) (flops, secs []float64) {
		flops, secs = make([]float64, len(w)), make([]float64, len(w))
		cols := cutPoints(n, w)
		for k := range w {
			c := float64(cols[k+1] - cols[k])
			flops[k] = c
			switch {
			case c == 0:
			case k == 0:
				secs[k] = c / fast
			default:
				secs[k] = fixed + c/slow
			}
		}
		return flops, secs
	}
}

// TestBalancerDropsTasksThatOnlyCost plays the balancer against a fast task (4 columns per
// second) and three slow ones (1 column per second) that each pay a fixed 250 seconds for
// any columns at all, as CPU tasks of a GPU job pay for reading the whole of A: even one
// granule makes a slow task slower than the fast one alone (200 seconds). The balancer
// must find that split, the slow tasks without columns, and keep it.
func TestBalancerDropsTasksThatOnlyCost(t *testing.T) {
	const n = 800
	model := fixedCostModel(n, 4, 1, 250)
	b := newBalancer(n)
	w := []float64{1, 1, 1, 1}
	var times []float64
	for range 8 {
		flops, secs := model(w)
		times = append(times, slices.Max(secs))
		w = b.next(flops, secs)
	}
	if last := times[len(times)-3:]; !slices.Equal(last, []float64{200, 200, 200}) {
		t.Fatalf("times %v: the last three are not the fast task alone's 200 s", times)
	}
}

// TestBalancerTriesTheFastTaskAloneWhenTheOthersHaveOneGranule: beside a task a thousand
// times faster, as a GPU beside CPU tasks, every weighed split leaves the slow tasks their
// one granule, whatever the bias; that the bias moves no columns must not end the search
// before the split without them is measured, since reading A for their granule makes them
// the slowest.
func TestBalancerTriesTheFastTaskAloneWhenTheOthersHaveOneGranule(t *testing.T) {
	const n, slow = 8192, 15
	model := fixedCostModel(n, 300000, 300, 0.2)
	b := newBalancer(n)
	w := make([]float64, 1+slow)
	for k := range w {
		w[k] = 1
	}
	var times []float64
	for range 6 {
		flops, secs := model(w)
		times = append(times, slices.Max(secs))
		w = b.next(flops, secs)
	}
	if alone := n / 300000.0; times[len(times)-1] != alone {
		t.Fatalf("times %v: the last is not the fast task alone's %g s", times, alone)
	}
}

// TestBalancerSettles: tasks of equal rates get the same columns whatever the bias, so the
// search ends at bias 0 instead of measuring splits that are all the same.
func TestBalancerSettles(t *testing.T) {
	b := newBalancer(800)
	for range 4 {
		b.next([]float64{100, 100}, []float64{1, 1})
	}
	if b.searching || b.split.bias != 0 || b.split.fast != nil {
		t.Fatalf("searching %v, split %+v; want the search over at bias 0", b.searching, b.split)
	}
}

// TestBalancerSlack: a multiplication less than searchSlack slower than the fastest does
// not end the search; one clearly slower does, and brings back the fastest one's bias.
func TestBalancerSlack(t *testing.T) {
	b := newBalancer(800)
	var biases []float64
	for _, took := range []float64{400, 100, 101, 99, 101.5, 103, 90} {
		b.next([]float64{1.5 * took, took}, []float64{took, took})
		biases = append(biases, b.split.bias)
	}
	// Judged: 100 (best), 101 (1% slower: go on), 99 (best), 101.5 (2.5% slower: back to
	// the bias of 99, 1.0, for good).
	if want := []float64{0, 0.5, 1, 1.5, 1, 1, 1}; !slices.Equal(biases, want) {
		t.Fatalf("biases %v, want %v", biases, want)
	}
}

// paced is a gonum kernel that takes at least flops / rate seconds per call: a device
// of known speed, for testing the balancing.
type paced struct {
	kernels.Gemm
	rate float64 // flop/s
}

func (k paced) Dgemm(tA, tB blas.Transpose, m, n, kk int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	end := time.Now().Add(time.Duration(2 * float64(m) * float64(n) * float64(kk) / k.rate * 1e9))
	k.Gemm.Dgemm(tA, tB, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc)
	time.Sleep(time.Until(end))
}

func init() {
	for name, rate := range map[string]float64{"paced-fast": 40e6, "paced-slow": 5e6} {
		kernels.Register(kernels.Plugin{Name: name, Device: kernels.CPU, Priority: -1,
			Check: func() error { return nil },
			New: func() (kernels.Gemm, error) {
				g, err := kernels.Get("gonum")
				return paced{g, rate}, err
			}})
	}
}

// TestBalancingFollowsRates: with one task 8 times faster than the other (paced kernels),
// balancing moves from equal shares to shares in proportion to the speeds (8:1, that is
// 112:16 of 128 columns in granules of 8) or, after its search, close to them.
func TestBalancingFollowsRates(t *testing.T) {
	res, err := Run(context.Background(), Params{N: 128, NB: 32, Grid: grid.Grid{P: 1, Q: 2}, Kernels: []string{"paced-fast", "paced-slow"},
		Reps: 5, Seed: 2, Verify: Freivalds, Balance: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified {
		t.Fatalf("not verified: %+v", res)
	}
	if res.Split[0] < 0.8 || res.Split[0] > 0.95 {
		t.Fatalf("shares %v after balancing; want about 0.875 for the fast task", res.Split)
	}
}

// pinningName is a gonum kernel that offers kernels.HostPinner and records what it pins,
// in pins: the capability as any plugin may offer it, without a GPU.
const pinningName = "pinning-gonum"

var pins = struct {
	sync.Mutex
	now           map[*float64]int // pinned now: length
	total, double int              // pins, and pins of pinned memory
}{now: map[*float64]int{}}

type pinning struct{ kernels.Gemm }

func (pinning) PinHost(s []float64) error {
	pins.Lock()
	defer pins.Unlock()
	if _, ok := pins.now[&s[0]]; ok {
		pins.double++
		return errors.New("pinned already")
	}
	pins.now[&s[0]] = len(s)
	pins.total++
	return nil
}

func (pinning) UnpinHost(s []float64) error {
	pins.Lock()
	defer pins.Unlock()
	if n, ok := pins.now[&s[0]]; !ok || n != len(s) {
		return errors.New("not pinned")
	}
	delete(pins.now, &s[0])
	return nil
}

func init() {
	kernels.Register(kernels.Plugin{Name: pinningName, Device: kernels.CPU, Priority: -1,
		Check: func() error { return nil },
		New: func() (kernels.Gemm, error) {
			g, err := kernels.Get("gonum")
			return pinning{g}, err
		}})
}

// TestPinsPanelsOfPinningKernels: a kernel that offers kernels.HostPinner gets the panel
// buffers it reads pinned, each once, and every one is unpinned when the job ends.
func TestPinsPanelsOfPinningKernels(t *testing.T) {
	names := []string{pinningName, pinningName, pinningName, "gonum"}
	res, err := Run(context.Background(), Params{N: 40, NB: 8, Grid: grid.Grid{P: 2, Q: 2}, Kernels: names, Reps: 2, Seed: 3, Verify: Exact})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified {
		t.Fatalf("not verified: %+v", res)
	}
	pins.Lock()
	defer pins.Unlock()
	if pins.total == 0 || pins.double != 0 || len(pins.now) != 0 {
		t.Fatalf("%d buffers pinned, %d pinned twice, %d still pinned at the end; want some, 0, 0", pins.total, pins.double, len(pins.now))
	}
}

// A report reads back as written, in the room reportSize gives; a buffer whose lengths do
// not fit is an error, not a panic.
func TestReportRoundTrip(t *testing.T) {
	p := &Params{N: 10, Reps: 2, Verify: Freivalds | Exact}
	r := report{reportHeader: reportHeader{Start: 5, End: 9, Compute: 3, Wait: 1, BytesIn: 80, Flops: 2e3,
		Checksum: 1<<63 + 7, Span: [2]int64{2, 5}, Faults: [2]int64{10, 20}},
		Times: []time.Duration{4, 6}, Y: []float64{1, 2}, Z: []float64{3, 4}, Bound: []float64{5, 6}, C: []float64{7, 8, 9, 10, 11, 12}}
	b := make([]byte, reportSize(p, 2, 3))
	if err := r.encode(b); err != nil {
		t.Fatal(err)
	}
	var got report
	if err := got.decode(b); err != nil {
		t.Fatal(err)
	}
	if got.reportHeader != r.reportHeader || !slices.Equal(got.Times, r.Times) || !slices.Equal(got.Y, r.Y) ||
		!slices.Equal(got.Z, r.Z) || !slices.Equal(got.Bound, r.Bound) || !slices.Equal(got.C, r.C) {
		t.Fatalf("decoded %+v, want %+v", got, r)
	}
	for _, n := range []int{0, 8, len(b) - 8} {
		if err := got.decode(b[:n]); err == nil {
			t.Errorf("decode of %d of %d bytes: no error", n, len(b))
		}
	}
}

// accumulatingName is a gonum kernel that offers kernels.Accumulator, with C in memory of
// its own, and counts the calls: the capability as the GPU kernel offers it, without a GPU.
const accumulatingName = "accumulating-gonum"

var accCalls struct {
	sync.Mutex
	open, adds, stores int
}

type accumulating struct{ kernels.Gemm }

type hostAccumulation struct {
	g    kernels.Gemm
	m, n int
	c    []float64
}

func (k accumulating) NewAccumulation(m, n int) (kernels.Accumulation, error) {
	accCalls.Lock()
	defer accCalls.Unlock()
	accCalls.open++
	return &hostAccumulation{g: k.Gemm, m: m, n: n, c: make([]float64, m*n)}, nil
}

func (h *hostAccumulation) Add(k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64) error {
	h.g.Dgemm(blas.NoTrans, blas.NoTrans, h.m, h.n, k, alpha, a, lda, b, ldb, beta, h.c, h.n)
	accCalls.Lock()
	defer accCalls.Unlock()
	accCalls.adds++
	return nil
}

func (h *hostAccumulation) Store(c []float64, ldc int) error {
	for i := range h.m {
		copy(c[i*ldc:i*ldc+h.n], h.c[i*h.n:(i+1)*h.n])
	}
	accCalls.Lock()
	defer accCalls.Unlock()
	accCalls.stores++
	return nil
}

func (h *hostAccumulation) Close() error {
	accCalls.Lock()
	defer accCalls.Unlock()
	accCalls.open--
	return nil
}

func init() {
	kernels.Register(kernels.Plugin{Name: accumulatingName, Device: kernels.CPU, Priority: -1,
		Check: func() error { return nil },
		New: func() (kernels.Gemm, error) {
			g, err := kernels.Get("gonum")
			return accumulating{g}, err
		}})
}

// TestAccumulatingKernels: a task whose kernel keeps C (kernels.Accumulator) adds every
// step's product to its accumulation and stores C once per multiplication, and the result
// is bit-identical to the same job on plain kernels; every accumulation is closed.
func TestAccumulatingKernels(t *testing.T) {
	p := Params{N: 40, NB: 8, Grid: grid.Grid{P: 2, Q: 2}, Reps: 3, Seed: 5, Verify: Exact}
	p.Kernels = []string{"gonum", "gonum", "gonum", "gonum"}
	plain, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	p.Kernels = []string{accumulatingName, "gonum", accumulatingName, "gonum"}
	accCalls.Lock()
	accCalls.adds, accCalls.stores = 0, 0 // other tests run every registered kernel
	accCalls.Unlock()
	res, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Checksum != plain.Checksum {
		t.Fatalf("verified %v, checksum %x; want true and the plain run's %x", res.Verified, res.Checksum, plain.Checksum)
	}
	accCalls.Lock()
	defer accCalls.Unlock()
	// Tasks 0 and 2 each add one product per block column (5) per multiplication.
	if accCalls.adds != 2*5*p.Reps || accCalls.stores != 2*p.Reps || accCalls.open != 0 {
		t.Fatalf("%d adds, %d stores, %d accumulations open at the end; want %d, %d, 0", accCalls.adds, accCalls.stores, accCalls.open, 2*5*p.Reps, 2*p.Reps)
	}
}
