package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
	"github.com/orwl-go/orwl/orwl"
)

// checkpoint: what checkpoints cost the Jacobi stencil (examples/stencil), and what they
// save when a process dies.
//
//   - overhead: the stencil's line over -procs processes (a task each, -cells per task),
//     checkpointing every -every into a directory per process under -dir, against the same
//     job without checkpoints, in alternated runs (-rounds each); the best time per
//     iteration of each, and their ratio.
//   - hold: in the same runs, the time a task is held up per checkpoint (Task.CheckpointHold:
//     waiting for a checkpoint being prepared, copying its block) against a copy of the
//     block made as the tasks make theirs, in -procs processes at once, 20 ms after the
//     last; and against copies of it back to back in this process (the best of 20 each).
//   - kills: -trials trials of `orwlrun -np 3 -restarts 3` running the stencil with
//     checkpoints, one random process killed (SIGKILL) at a random moment after the first
//     complete checkpoint: how many end with status 0 and with the checksum of an
//     uninterrupted run, the work lost (from the cut of the checkpoint the job resumed from
//     to the kill) and the restart time (from the kill to the process of task 0 having
//     restored the checkpoint, the iterations going on at once).
//   - disk: dd if=/dev/zero conv=fsync of the bytes one process writes per checkpoint
//     (its tasks' blocks and the partner copies of the next process's), in -dir.
//   - dmtcp: a system-level checkpointer to compare with, when Debian packages it
//     (apt-cache policy dmtcp); a line saying it is skipped otherwise.
//
// It prints the tables (or with -json one JSON object per row) and writes checkpoint.txt
// and checkpoint.json into -out.

func init() {
	register(command{
		name:     "checkpoint",
		summary:  "stencil checkpoints: overhead, hold per checkpoint against a copy, kill trials under orwlrun -restarts, disk",
		files:    tableFiles("checkpoint"),
		children: []child{jsonChild(checkpointChildEnv, checkpointChild), {copyChildEnv, copyChild}},
		setup:    benchCheckpoint,
	})
}

// checkpointChildEnv marks a process of an overhead run; it holds a ckptSpec in JSON.
const checkpointChildEnv = "ORWL_BENCH_CHECKPOINT_CHILD"

// ckptSpec is one overhead run: the job and its checkpoints (none when Dir is empty).
type ckptSpec struct {
	P     jacobi.Params `json:"p"`
	Dir   string        `json:"dir"`
	Every time.Duration `json:"every"`
}

// ckptRunResult is what the process of task 0 of an overhead run prints.
type ckptRunResult struct {
	PerIteration float64 `json:"per_iteration"`
	Checksum     string  `json:"checksum"`
	Checkpoints  int     `json:"checkpoints"`  // entered, summed over tasks
	HeldSeconds  float64 `json:"held_seconds"` // summed over tasks
}

// ckptRow is one row of the output.
type ckptRow struct {
	Measure string  `json:"measure"`
	Value   float64 `json:"value"`
	Ref     float64 `json:"reference,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	Unit    string  `json:"unit"`
	Note    string  `json:"note"`
}

func benchCheckpoint(fs *flag.FlagSet) func(rep *report) error {
	cells := fs.Int("cells", 1<<20, "cells per task of the overhead runs")
	procs := fs.Int("procs", 2, "processes (a task each) of the overhead runs")
	every := fs.Duration("every", 2*time.Second, "time between checkpoints of the overhead runs")
	perRun := fs.Duration("time", 8*time.Second, "about how long one overhead run iterates")
	rounds := fs.Int("rounds", 3, "alternated overhead runs with and without checkpoints")
	trials := fs.Int("trials", 20, "kill trials (0: none)")
	dir := fs.String("dir", os.TempDir(), "where checkpoints are written (a disk, to measure it)")
	return func(rep *report) error {
		if *cells < 1 || *procs < 1 || *every <= 0 || *perRun <= 0 || *rounds < 1 || *trials < 0 {
			return badFlags("-cells, -procs and -rounds must be at least 1, -every and -time positive, -trials not negative")
		}
		work, err := os.MkdirTemp(*dir, "orwl-bench-checkpoint-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		rep.header("%s, %d cores; checkpoints in %s",
			cpuModel(), runtime.NumCPU(), *dir)
		rep.line("%-44s %14s %14s %7s  %s\n", "measure", "value", "reference", "ratio", "note")
		var rows []ckptRow
		add := func(r ckptRow) {
			rows = append(rows, r)
			rep.row(r)
			ratio := ""
			if r.Ratio != 0 {
				ratio = fmt.Sprintf("%.3fx", r.Ratio)
			}
			rep.line("%-44s %14s %14s %7s  %s\n", r.Measure, ckptValue(r.Value, r.Unit), ckptValue(r.Ref, r.Unit), ratio, r.Note)
		}
		p := jacobi.Params{Dim: 1, NX: *cells * *procs, NY: 1, PX: *procs, PY: 1}
		p.Iters = max(100, int(perRun.Seconds()/(float64(*cells)*1.2e-9+40e-6)))
		if err := checkpointOverhead(p, *every, *rounds, work, add); err != nil {
			return err
		}
		if *trials > 0 {
			if err := killTrials(*trials, work, add); err != nil {
				return err
			}
		}
		if err := diskLimit(work, 2*8*(*cells+2), add); err != nil {
			return err
		}
		dmtcp(add)
		return rep.write(rows)
	}
}

// ckptValue formats v in unit: seconds as a time, the rest as numbers.
func ckptValue(v float64, unit string) string {
	switch {
	case v == 0:
		return ""
	case unit == "s":
		return seconds(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " " + unit
}

// checkpointOverhead measures the overhead and hold rows: rounds alternated runs of p
// without and with checkpoints every every.
func checkpointOverhead(p jacobi.Params, every time.Duration, rounds int, work string, add func(ckptRow)) error {
	want := fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p)))
	var plain, ckpt []float64
	var held float64
	var entered int
	for r := range rounds {
		for _, on := range []bool{false, true} {
			spec := ckptSpec{P: p}
			if on {
				spec.Dir, spec.Every = filepath.Join(work, fmt.Sprintf("overhead-%d", r), "{rank}"), every
			}
			var res ckptRunResult
			if err := launchSelf(p.Tasks(), []string{"checkpoint"}, checkpointChildEnv, spec, &res); err != nil {
				return err
			}
			if res.Checksum != want {
				return fmt.Errorf("checksum %s, the sequential sweep's %s (checkpoints %v)", res.Checksum, want, on)
			}
			fmt.Fprintf(os.Stderr, "checkpoint: round %d, checkpoints %v: %s per iteration, %d checkpoints entered by the tasks, held %s\n",
				r+1, on, seconds(res.PerIteration), res.Checkpoints, seconds(res.HeldSeconds))
			if on {
				ckpt = append(ckpt, res.PerIteration)
				held += res.HeldSeconds
				entered += res.Checkpoints
			} else {
				plain = append(plain, res.PerIteration)
			}
		}
	}
	cells := p.NX / p.Tasks()
	add(ckptRow{Measure: fmt.Sprintf("per iteration, checkpoint every %s", every), Value: slices.Min(ckpt), Ref: slices.Min(plain),
		Ratio: slices.Min(ckpt) / slices.Min(plain), Unit: "s",
		Note: fmt.Sprintf("%d processes, %d cells per task, %d iterations; best of %d alternated runs; reference: no checkpoints", p.Tasks(), cells, p.Iters, rounds)})
	if entered == 0 {
		add(ckptRow{Measure: "hold per checkpoint", Unit: "s", Note: "no checkpoint was entered: make -time longer than -every"})
		return nil
	}
	bytes := 8 * (cells + 2)
	lines, err := launchSelfLines(p.Tasks(), []string{"checkpoint"}, []string{copyChildEnv + "=" + strconv.Itoa(bytes)})
	if err != nil {
		return err
	}
	var atOnce float64 // the processes' best paced copies, averaged
	for _, line := range lines {
		var res copyResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return fmt.Errorf("copy process printed %q: %w", line, err)
		}
		atOnce += res.Best / float64(len(lines))
	}
	inLoop, _ := copyBlock(bytes, false)
	perCheckpoint := held / float64(entered)
	note := fmt.Sprintf("mean of %d (task, checkpoint); reference: copy of its %d-byte block", entered, bytes)
	add(ckptRow{Measure: "task held up per checkpoint", Value: perCheckpoint, Ref: atOnce, Ratio: perCheckpoint / atOnce, Unit: "s",
		Note: fmt.Sprintf("%s in each of %d processes at once, every %s, as the tasks copy theirs at a checkpoint: best of 20, mean over the processes", note, len(lines), copyGap)})
	add(ckptRow{Measure: "task held up per checkpoint, against a copy loop", Value: perCheckpoint, Ref: inLoop.Seconds(), Ratio: perCheckpoint / inLoop.Seconds(), Unit: "s",
		Note: note + " in this process alone, back to back (block and buffer in the caches), best of 20"})
	return nil
}

// copyBlock returns the best time of 20 copies of a block of bytes into a buffer, both
// written once before, and how many copies started over 50µs late. Paced, each copy
// starts at the next multiple of copyGap of the wall clock, so that the processes of one
// host copy at once, as the tasks of a job do when they enter a checkpoint's iteration,
// and find their blocks partly gone from the caches (on a shared host, 20 ms without
// touching them is enough); else they run back to back.
func copyBlock(bytes int, paced bool) (best time.Duration, late int) {
	state := make([]byte, bytes)
	for i := range state { // a block of data: a zeroed one reads the kernel's one zero page, from cache
		state[i] = byte(i)
	}
	copied := make([]byte, len(state))
	copy(copied, state)
	best = time.Duration(1 << 62)
	for range 20 {
		if paced {
			next := time.Now().Truncate(copyGap).Add(copyGap)
			time.Sleep(time.Until(next) - 3*time.Millisecond)
			for time.Now().Before(next) {
			}
			if time.Since(next) > 50*time.Microsecond {
				late++
			}
		}
		start := time.Now()
		copy(copied, state)
		best = min(best, time.Since(start))
	}
	return best, late
}

// copyGap is the time between two paced copies (copyBlock).
const copyGap = 20 * time.Millisecond

// copyChildEnv marks a process that copies a block at the same moments as the others
// (copyBlock, paced); it holds the block's bytes.
const copyChildEnv = "ORWL_BENCH_CHECKPOINT_COPY"

// copyResult is what a process of copyChild prints.
type copyResult struct {
	Best float64 `json:"best"` // seconds
}

// copyChild is one process of the copies at once: it prints its best copy in seconds, or
// fails when a copy started late (the processes would not have copied together).
func copyChild(spec string) error {
	bytes, err := strconv.Atoi(spec)
	if err != nil || bytes < 1 {
		return fmt.Errorf("bad %s %q", copyChildEnv, spec)
	}
	best, late := copyBlock(bytes, true)
	if late > 5 {
		return fmt.Errorf("%d of 20 copies started over 50µs late: the processes did not copy together", late)
	}
	printJSON(copyResult{Best: best.Seconds()})
	return nil
}

// checkpointChild is one process of an overhead run; the process of task 0 prints its
// ckptRunResult as JSON.
func checkpointChild(s ckptSpec) error {
	res, err := jacobi.RunCheckpointed(context.Background(), s.P, orwl.Checkpoint{Dir: s.Dir, Every: s.Every})
	if res != nil {
		printJSON(ckptRunResult{PerIteration: res.PerIteration().Seconds(), Checksum: fmt.Sprintf("%016x", jacobi.Checksum(res.Cells)),
			Checkpoints: res.Checkpoints, HeldSeconds: res.HeldSeconds})
	}
	return err
}

// diskLimit measures the disk row: dd of bytes with an fsync, in work.
func diskLimit(work string, bytes int, add func(ckptRow)) error {
	mib := max(1, (bytes+1<<20-1)>>20)
	start := time.Now()
	out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(work, "dd"), "bs=1M", fmt.Sprintf("count=%d", mib), "conv=fsync").CombinedOutput()
	if err != nil {
		add(ckptRow{Measure: "disk: dd conv=fsync", Unit: "s", Note: fmt.Sprintf("skipped: dd: %v %s", err, strings.TrimSpace(string(out)))})
		return nil
	}
	d := time.Since(start).Seconds()
	add(ckptRow{Measure: fmt.Sprintf("disk: dd bs=1M count=%d conv=fsync", mib), Value: d, Unit: "s",
		Note: fmt.Sprintf("%.0f MB/s: the bytes one process of the overhead runs writes per checkpoint (own blocks and partner copies)", float64(mib<<20)/d/1e6)})
	return nil
}

// dmtcp adds the DMTCP row: skipped unless Debian packages it.
func dmtcp(add func(ckptRow)) {
	out, err := exec.Command("apt-cache", "policy", "dmtcp").Output()
	candidate := regexp.MustCompile(`Candidate: (\S+)`).FindSubmatch(out)
	switch {
	case err != nil:
		add(ckptRow{Measure: "dmtcp", Note: fmt.Sprintf("skipped: apt-cache policy dmtcp: %v", err)})
	case candidate == nil || string(candidate[1]) == "(none)":
		add(ckptRow{Measure: "dmtcp", Note: "skipped: not packaged here (apt-cache policy dmtcp: no candidate)"})
	default:
		add(ckptRow{Measure: "dmtcp", Note: fmt.Sprintf("packaged (candidate %s) but not measured by this command", candidate[1])})
	}
}

// killTrials measures the kill rows: trials of orwlrun -np 3 -restarts 3 on the stencil,
// one random process killed at a random moment after the first complete checkpoint.
func killTrials(trials int, work string, add func(ckptRow)) error {
	if _, err := goBuild(work, "cmd/orwlrun", "examples/stencil"); err != nil {
		add(ckptRow{Measure: "kill trials", Note: "skipped: " + err.Error()})
		return nil
	}
	p := jacobi.Params{Dim: 1, NX: 3 * 300000, NY: 1, PX: 3, PY: 1, Iters: 3000}
	want := fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p)))
	var ok, same int
	var lost, restart []float64
	for i := range trials {
		tr, err := killTrial(work, p, filepath.Join(work, fmt.Sprintf("trial-%d", i)))
		if err != nil {
			return fmt.Errorf("kill trial %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "checkpoint: kill trial %d: rank %d killed %s after the first checkpoint; status %d, checksum %s, resumed at %d, work lost %s, restart %s\n",
			i+1, tr.rank, seconds(tr.after), tr.status, tr.checksum, tr.resumed, seconds(tr.lost), seconds(tr.restart))
		if tr.status == 0 {
			ok++
		}
		if tr.checksum == want {
			same++
		}
		if tr.resumed > 0 {
			restart = append(restart, tr.restart)
		}
		if tr.resumed > 0 && tr.lost >= 0 {
			lost = append(lost, tr.lost)
		}
	}
	note := "orwlrun -np 3 -restarts 3, stencil of 3x300000 cells, 3000 iterations, checkpoint every 500ms"
	add(ckptRow{Measure: "kill trials: exit status 0", Value: float64(ok), Ref: float64(trials), Unit: "trials", Note: note})
	add(ckptRow{Measure: "kill trials: checksum of an uninterrupted run", Value: float64(same), Ref: float64(trials), Unit: "trials", Note: "the sequential sweep's"})
	if len(lost) > 0 {
		slices.Sort(lost)
		add(ckptRow{Measure: "work lost (median; max)", Value: median(lost), Ref: lost[len(lost)-1], Unit: "s",
			Note: fmt.Sprintf("%d trials: from the cut of the checkpoint resumed from to the kill", len(lost))})
	}
	if len(restart) > 0 {
		slices.Sort(restart)
		add(ckptRow{Measure: "restart time (median; max)", Value: median(restart), Ref: restart[len(restart)-1], Unit: "s",
			Note: fmt.Sprintf("%d resumed trials: from the kill to the checkpoint restored in the new attempt", len(restart))})
	}
	return nil
}

// killTrialResult is how one kill trial went.
type killTrialResult struct {
	rank, status, resumed int
	checksum              string
	after, lost, restart  float64 // seconds
}

// checkpointLine matches rank 0's log of a complete checkpoint.
var checkpointLine = regexp.MustCompile(`checkpoint complete iteration=(\d+) seconds=([0-9.e+-]+)`)

// killTrial runs one trial with its checkpoints in dir.
func killTrial(bin string, p jacobi.Params, dir string) (killTrialResult, error) {
	tr := killTrialResult{rank: rand.N(3)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "orwlrun"), "-np", "3", "-restarts", "3", filepath.Join(bin, "stencil"),
		"-n", strconv.Itoa(p.NX), "-tasks", "3", "-iters", strconv.Itoa(p.Iters), "-verify=false",
		"-checkpoint", filepath.Join(dir, "{rank}"), "-checkpoint-every", "500ms")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return tr, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return tr, err
	}
	cut := map[int]time.Time{} // checkpoint -> when its cut was taken, from rank 0's log
	var first, killed time.Time
	killedAt := make(chan time.Time, 1)
	var out strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line, now := sc.Text(), time.Now()
		out.WriteString(line + "\n")
		if m := checkpointLine.FindStringSubmatch(line); m != nil && killed.IsZero() {
			k, _ := strconv.Atoi(m[1])
			s, _ := strconv.ParseFloat(m[2], 64)
			cut[k] = now.Add(-time.Duration(s * 1e9))
			if first.IsZero() {
				first = now
				tr.after = rand.Float64() // the run lasts several seconds
				time.AfterFunc(time.Duration(tr.after*1e9), func() { killedAt <- killRank(cmd.Process.Pid, tr.rank) })
			}
		}
		select {
		case killed = <-killedAt:
		default:
		}
		if k, ok := strings.CutPrefix(line, "[0] resumed from checkpoint: iteration="); ok && tr.resumed == 0 {
			tr.resumed, _ = strconv.Atoi(k)
			tr.restart = now.Sub(killed).Seconds()
			tr.lost = -1 // unknown: rank 0 was stopped before it logged the checkpoint
			if c, ok := cut[tr.resumed]; ok {
				tr.lost = killed.Sub(c).Seconds()
			}
		}
		if _, sum, ok := strings.Cut(line, "checksum="); ok {
			tr.checksum, _, _ = strings.Cut(sum, " ")
		}
	}
	cmd.Wait()
	tr.status = cmd.ProcessState.ExitCode()
	if first.IsZero() || killed.IsZero() {
		return tr, fmt.Errorf("no checkpoint complete, or no process killed:\n%s", out.String())
	}
	return tr, nil
}

// killRank kills (SIGKILL) the child of process parent whose ORWL_RANK is rank, and
// returns when.
func killRank(parent, rank int) time.Time {
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent)) // children of every thread
	var children []string
	for _, l := range lists {
		b, _ := os.ReadFile(l)
		children = append(children, strings.Fields(string(b))...)
	}
	for _, c := range children {
		env, _ := os.ReadFile("/proc/" + c + "/environ")
		if slices.Contains(strings.Split(string(env), "\x00"), "ORWL_RANK="+strconv.Itoa(rank)) {
			pid, _ := strconv.Atoi(c)
			now := time.Now()
			syscall.Kill(pid, syscall.SIGKILL)
			return now
		}
	}
	return time.Time{}
}
