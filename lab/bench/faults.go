package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orwl-go/orwl/internal/testemu/netemu"
	"github.com/orwl-go/orwl/orwl"
)

// faults: how long a job takes to notice a lost process. Jobs of each of -procs sizes (3
// and 64 processes by default) run a ring of iterative sections (a task a process; every
// task writes an 8-byte location and reads its left neighbour's, every iteration) until rank
// 2 is killed (SIGKILL), stopped (SIGSTOP), or cut off from rank 0 by a partition of
// emulated hosts (network namespaces, a host a process; needs root). The detection time is
// from the fault to the moment the last process that can still run returned its error from
// orwl.Run: every process but rank 2, and for a partition rank 2 as well. Every such error
// must name a rank on the other side of the fault (rank 2; for rank 2, rank 0; the others
// of a partition may name either). The table gives min, median and max over -trials trials,
// and goes to faults.txt and faults.json in -out.

func init() {
	register(command{
		name:     "faults",
		summary:  "time from a killed, stopped or partitioned process to every other process's error",
		files:    tableFiles("faults"),
		children: []child{{env: faultsChildEnv, run: func(string) error { return faultsChild() }}},
		setup:    benchFaults,
	})
}

// faultsChildEnv marks a process of a faults job; the job's ORWL_ variables hold its settings.
const faultsChildEnv = "ORWL_BENCH_FAULTS_CHILD"

// faultRow is one kind of fault's detection times.
type faultRow struct {
	Kind        string    `json:"kind"`
	Procs       int       `json:"procs"`
	Trials      int       `json:"trials"`
	PeerTimeout string    `json:"peer_timeout"`
	Min         float64   `json:"min_seconds"`
	Median      float64   `json:"median_seconds"`
	Max         float64   `json:"max_seconds"`
	Seconds     []float64 `json:"seconds"`
	Skipped     string    `json:"skipped,omitempty"`
}

func benchFaults(fs *flag.FlagSet) func(rep *report) error {
	trials := fs.Int("trials", 10, "trials of every kind of fault")
	kinds := fs.String("kinds", "kill,stop,partition", "the faults: kill (SIGKILL), stop (SIGSTOP), partition (emulated hosts, root)")
	peerTimeout := fs.Duration("peer-timeout", 0, "ORWL_PEER_TIMEOUT of the jobs (0: the library's default)")
	procList := fs.String("procs", "3,64", "comma-separated sizes of the jobs, at least 3")
	return func(rep *report) error {
		procs, err := intList(*procList)
		if err != nil || slices.Min(procs) < 3 || *trials < 1 || *peerTimeout < 0 {
			return badFlags("-trials must be at least 1, -peer-timeout not negative, -procs sizes of 3 or more")
		}
		timeout := "default"
		if *peerTimeout > 0 {
			timeout = peerTimeout.String()
		}
		var rows []faultRow
		for _, kind := range splitList(*kinds) {
			if !slices.Contains([]string{"kill", "stop", "partition"}, kind) {
				return badFlags("-kinds: unknown fault %q", kind)
			}
			for _, n := range procs {
				row, err := faultTrials(kind, n, *trials, *peerTimeout)
				if err != nil {
					return err
				}
				row.PeerTimeout = timeout
				rows = append(rows, row)
			}
		}
		rep.header("%d cores; time from the fault to the last error", runtime.NumCPU())
		rep.line("%-10s %5s %6s %12s %10s %10s %10s\n", "fault", "procs", "trials", "peer-timeout", "min", "median", "max")
		for _, r := range rows {
			if r.Skipped != "" {
				rep.line("%-10s %5d skipped: %s\n", r.Kind, r.Procs, r.Skipped)
			} else {
				rep.line("%-10s %5d %6d %12s %10s %10s %10s\n", r.Kind, r.Procs, r.Trials, r.PeerTimeout, seconds(r.Min), seconds(r.Median), seconds(r.Max))
			}
			rep.row(r)
		}
		return rep.write(rows)
	}
}

// faultTrials runs trials trials of kind on jobs of procs processes.
func faultTrials(kind string, procs, trials int, peerTimeout time.Duration) (faultRow, error) {
	row := faultRow{Kind: kind, Procs: procs}
	for trial := range trials {
		d, err := faultTrial(kind, procs, peerTimeout)
		if errors.Is(err, netemu.ErrUnavailable) {
			row.Skipped = err.Error()
			fmt.Fprintf(os.Stderr, "faults: %s skipped: %v\n", kind, err)
			break
		}
		if err != nil {
			return row, fmt.Errorf("%s, %d processes, trial %d: %w", kind, procs, trial+1, err)
		}
		fmt.Fprintf(os.Stderr, "faults: %s, %d processes, trial %d: every process failed %v after the fault\n", kind, procs, trial+1, d.Round(time.Microsecond))
		row.Seconds = append(row.Seconds, d.Seconds())
	}
	if len(row.Seconds) > 0 {
		s := slices.Sorted(slices.Values(row.Seconds))
		row.Trials, row.Min, row.Median, row.Max = len(s), s[0], median(s), s[len(s)-1]
	}
	return row, nil
}

// median of sorted values.
func median(s []float64) float64 {
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// faultTrial runs one job of procs processes, injects the fault into rank 2 once every
// process is running, and returns how long the processes that could go on took to fail.
func faultTrial(kind string, procs int, peerTimeout time.Duration) (time.Duration, error) {
	var hosts *netemu.Net
	if kind == "partition" {
		var err error
		names := make([][]string, procs) // a host a process
		for i := range names {
			names[i] = []string{"h" + strconv.Itoa(i+1)}
		}
		if hosts, err = netemu.New(names...); err != nil {
			return 0, err
		}
		defer hosts.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job, err := startFaultJob(ctx, procs, hosts, peerTimeout)
	if err != nil {
		return 0, err
	}
	defer job.stop()
	for rank := range job.procs {
		if _, err := job.expect(rank, "running"); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	var survivors []int
	for rank := range procs {
		if rank != 2 {
			survivors = append(survivors, rank)
		}
	}
	switch kind {
	case "kill":
		err = job.procs[2].Process.Kill()
	case "stop":
		err = job.procs[2].Process.Signal(syscall.SIGSTOP)
	case "partition":
		err = hosts.Partition(0, 2)
		survivors = []int{0, 1, 2}
	}
	if err != nil {
		return 0, err
	}
	var last time.Time
	ends := make([]string, 0, len(survivors)) // what each said, for a trial that took long
	for _, rank := range survivors {
		line, err := job.expect(rank, "returned")
		if err != nil {
			return 0, err
		}
		stamp, msg, _ := strings.Cut(strings.TrimPrefix(line, "returned "), " ")
		ns, _ := strconv.ParseInt(stamp, 10, 64)
		if msg == "<nil>" {
			return 0, fmt.Errorf("rank %d returned success after the fault", rank)
		}
		across := []string{"rank 2"}
		switch {
		case rank == 2:
			across = []string{"rank 0"}
		case kind == "partition" && rank != 0:
			across = []string{"rank 0", "rank 2"} // either side may be the one it hears of
		}
		if !slices.ContainsFunc(across, func(r string) bool { return regexp.MustCompile(`\b` + r + `\b`).MatchString(msg) }) {
			return 0, fmt.Errorf("rank %d's error names no rank across the fault: %s", rank, msg)
		}
		if t := time.Unix(0, ns); t.After(last) {
			last = t
		}
		ends = append(ends, fmt.Sprintf("rank %d after %v: %s", rank, time.Unix(0, ns).Sub(start).Round(time.Millisecond), msg))
	}
	if d := last.Sub(start); d > slowFault(peerTimeout) {
		fmt.Fprintf(os.Stderr, "faults: %s, %d processes: a slow trial (%v), what every process said:\n  %s\n", kind, procs, d.Round(time.Millisecond), strings.Join(ends, "\n  "))
	}
	return last.Sub(start), nil
}

// slowFault is how long after a fault a trial counts as slow: the peer timeout and a second
// of heartbeats and goodbyes; such a trial prints what every process said.
func slowFault(peerTimeout time.Duration) time.Duration {
	if peerTimeout == 0 {
		peerTimeout = 3 * time.Second // the library's default
	}
	return peerTimeout + time.Second
}

// faultJob is the running processes of one trial, with their standard output line by line.
type faultJob struct {
	procs []*exec.Cmd
	lines []chan string
}

// startFaultJob starts the ring over procs processes of this program: on hosts when it is
// not nil (rank k on host k), else on loopback.
func startFaultJob(ctx context.Context, procs int, hosts *netemu.Net, peerTimeout time.Duration) (*faultJob, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	coord := net.JoinHostPort("127.0.0.1", port)
	if hosts != nil {
		coord = net.JoinHostPort(hosts.Hosts[0].Addr, port)
	}
	job := &faultJob{}
	for rank := range procs {
		var cmd *exec.Cmd
		listen := "127.0.0.1"
		if hosts != nil {
			cmd, listen = hosts.Command(ctx, rank, exe, "faults"), hosts.Hosts[rank].Addr
		} else {
			cmd = exec.CommandContext(ctx, exe, "faults")
		}
		cmd.Env = netemu.CleanEnv(faultsChildEnv+"=1", "ORWL_RANK="+strconv.Itoa(rank), "ORWL_SIZE="+strconv.Itoa(procs),
			"ORWL_COORD="+coord, "ORWL_SECRET=faults", "ORWL_LISTEN="+listen)
		if peerTimeout > 0 {
			cmd.Env = append(cmd.Env, "ORWL_PEER_TIMEOUT="+peerTimeout.String())
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			job.stop()
			return nil, err
		}
		lines := make(chan string, 4)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		job.procs, job.lines = append(job.procs, cmd), append(job.lines, lines)
	}
	return job, nil
}

// expect returns the next line of rank's output, which must start with word.
func (j *faultJob) expect(rank int, word string) (string, error) {
	select {
	case line, ok := <-j.lines[rank]:
		if !ok {
			return "", fmt.Errorf("rank %d ended before it said %q", rank, word)
		}
		if !strings.HasPrefix(line, word) {
			return "", fmt.Errorf("rank %d said %q, not %q", rank, line, word)
		}
		return line, nil
	case <-time.After(60 * time.Second):
		return "", fmt.Errorf("rank %d did not say %q within a minute", rank, word)
	}
}

// stop kills what is left of the job and reaps it.
func (j *faultJob) stop() {
	for _, cmd := range j.procs {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// faultsChild is one process of a faults job: the ring of a task a process runs until the
// job fails (or a minute passes); the process says "running" after its task's first 100
// iterations and "returned <unix ns> <error>" when Run returns.
func faultsChild() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tasks, err := strconv.Atoi(os.Getenv("ORWL_SIZE")) // a task a process
	if err != nil {
		return fmt.Errorf("ORWL_SIZE: %v", err)
	}
	err = orwl.Run(ctx, orwl.Config{Tasks: tasks, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error {
			me, left := t.ID(), (t.ID()+tasks-1)%tasks
			t.Scale("x", 8)
			w := t.WriteInsert(t.Loc(me, "x"), 0)
			r := t.ReadInsert(t.Loc(left, "x"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			var seen uint64
			for it := 0; ; it++ {
				if it == 100 {
					fmt.Println("running")
				}
				if err := w.Section(ctx, func(b []byte) error { orwl.Uint64s(b)[0] = seen + 1; return nil }); err != nil {
					return err
				}
				if err := r.Section(ctx, func(b []byte) error { seen = orwl.Uint64s(b)[0]; return nil }); err != nil {
					return err
				}
			}
		})
	fmt.Printf("returned %d %v\n", time.Now().UnixNano(), strings.ReplaceAll(fmt.Sprint(err), "\n", " "))
	if err == nil {
		return errors.New("the ring ended without a fault")
	}
	return nil
}
