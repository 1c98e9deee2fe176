package orwl_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/testemu/netemu"
	"github.com/orwl-go/orwl/orwl"
)

// Tests of the runtime under failures, with real processes: a job that cannot run to its
// end fails in every process, never reports success on stale data, and never hangs; a job
// that can (its processes stopped and resumed together, big locations on slow links) runs
// to the right result.

func init() { scenarios["ring"] = ringScenario }

// ringJob is the ring scenario's job: one task per process; in every iteration task i
// writes its location (position 0) from what it last read, then reads its left
// neighbour's (position 1). Task 0 prints "progress" after iteration pause and waits for a
// line on its standard input before it goes on (a point at which a test stops processes
// or cuts the network).
type ringJob struct {
	iters, words, pause int
	tasks               int // 0: one per process
}

func (r ringJob) env() []string {
	return []string{"RING_ITERS=" + strconv.Itoa(r.iters), "RING_WORDS=" + strconv.Itoa(r.words),
		"RING_PAUSE=" + strconv.Itoa(r.pause), "RING_TASKS=" + strconv.Itoa(r.tasks)}
}

func ringFromEnv() ringJob {
	var r ringJob
	for _, v := range []struct {
		name string
		to   *int
	}{{"RING_ITERS", &r.iters}, {"RING_WORDS", &r.words}, {"RING_PAUSE", &r.pause}, {"RING_TASKS", &r.tasks}} {
		*v.to, _ = strconv.Atoi(os.Getenv(v.name))
	}
	if r.tasks == 0 {
		r.tasks, _ = strconv.Atoi(os.Getenv("ORWL_SIZE"))
	}
	return r
}

// fill writes task's data for iteration it from acc, what the task last read.
func fill(data []uint64, acc uint64, task, it int) {
	for k := range data {
		data[k] = acc*31 + uint64(it*7+task*13+k)
	}
}

// sum is what a task keeps of its neighbour's data.
func sum(data []uint64) uint64 {
	var s uint64
	for _, x := range data {
		s = s*3 + x
	}
	return s
}

// expected plays the ring sequentially: every task's final accumulator.
func (r ringJob) expected(tasks int) []uint64 {
	acc := make([]uint64, tasks)
	data := make([][]uint64, tasks)
	for i := range data {
		data[i] = make([]uint64, r.words)
	}
	for it := range r.iters {
		for i := range tasks {
			fill(data[i], acc[i], i, it)
		}
		for i := range tasks {
			acc[i] = sum(data[(i+tasks-1)%tasks])
		}
	}
	return acc
}

func ringScenario() int {
	r := ringFromEnv()
	tasks := r.tasks
	in := bufio.NewReader(os.Stdin)
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: []string{"data"}},
		func(ctx context.Context, t *orwl.Task) error {
			me, left := t.ID(), (t.ID()+tasks-1)%tasks
			t.Scale("data", 8*r.words)
			w := t.WriteInsert(t.Loc(me, "data"), 0)
			rd := t.ReadInsert(t.Loc(left, "data"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			var acc uint64
			for it := range r.iters {
				if me == 0 && it == r.pause {
					fmt.Println("progress")
					in.ReadString('\n')
				}
				if err := w.Section(ctx, func(b []byte) error { fill(orwl.Uint64s(b), acc, me, it); return nil }); err != nil {
					return err
				}
				if err := rd.Section(ctx, func(b []byte) error { acc = sum(orwl.Uint64s(b)); return nil }); err != nil {
					return err
				}
			}
			fmt.Printf("task %d acc %d\n", me, acc)
			return nil
		})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// ringProcs is a running ring job: one process per rank, on emulated hosts or on loopback.
type ringProcs struct {
	cmds  []*exec.Cmd
	outs  []*bytes.Buffer
	stdin io.WriteCloser // rank 0's
	lines chan string    // rank 0's standard output, line by line
}

// startRing starts r over procs processes of this test binary, with extra environment; on
// hosts when it is not nil (rank k on host k), else on loopback. Every process is killed
// after a minute at the latest.
func startRing(t *testing.T, r ringJob, procs int, hosts *netemu.Net, extra ...string) *ringProcs {
	return startScenario(t, "ring", procs, hosts, func(int) []string { return append(r.env(), extra...) })
}

// startScenario starts scenario over procs processes of this test binary, rank k with the
// environment env(k); on hosts when it is not nil (rank k on host k), else on loopback.
// Rank 0's standard output comes line by line, and it reads its standard input. Every
// process is killed after a minute at the latest.
func startScenario(t *testing.T, scenario string, procs int, hosts *netemu.Net, env func(rank int) []string) *ringProcs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	coordHost := "127.0.0.1"
	if hosts != nil {
		coordHost = hosts.Hosts[0].Addr
	}
	coord := net.JoinHostPort(coordHost, strconv.Itoa(freePort(t)))
	p := &ringProcs{lines: make(chan string, 16)}
	for rank := range procs {
		argv := []string{os.Args[0], "-test.run=^$"}
		var cmd *exec.Cmd
		listen := "127.0.0.1"
		if hosts != nil {
			cmd = hosts.Command(ctx, rank, argv...)
			listen = hosts.Hosts[rank].Addr
		} else {
			cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		}
		cmd.Env = append(netemu.CleanEnv(scenarioEnv+"="+scenario, "ORWL_RANK="+strconv.Itoa(rank), "ORWL_SIZE="+strconv.Itoa(procs),
			"ORWL_COORD="+coord, "ORWL_SECRET=ring", "ORWL_LISTEN="+listen), env(rank)...)
		out := &bytes.Buffer{}
		cmd.Stderr = out
		if rank == 0 {
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if p.stdin, err = cmd.StdinPipe(); err != nil {
				t.Fatal(err)
			}
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					p.lines <- sc.Text()
				}
				close(p.lines)
			}()
		} else {
			cmd.Stdout = out
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.cmds, p.outs = append(p.cmds, cmd), append(p.outs, out)
	}
	return p
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitProgress waits until task 0 says it has reached the pause.
func (p *ringProcs) waitProgress(t *testing.T) {
	t.Helper()
	for line := range p.lines {
		if line == "progress" {
			return
		}
	}
	t.Fatal("task 0 ended before the pause")
}

// resume lets task 0 go on past the pause.
func (p *ringProcs) resume() { io.WriteString(p.stdin, "go\n") }

// signal sends sig to the processes of ranks.
func (p *ringProcs) signal(sig syscall.Signal, ranks ...int) {
	for _, r := range ranks {
		p.cmds[r].Process.Signal(sig)
	}
}

// wait waits for every process and returns each one's output and exit status; rank 0's
// output holds what it printed after the pause.
func (p *ringProcs) wait() ([]string, []int) {
	var rest []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for line := range p.lines {
			rest = append(rest, line)
		}
	})
	outs := make([]string, len(p.cmds))
	codes := make([]int, len(p.cmds))
	for r, cmd := range p.cmds {
		if err := cmd.Wait(); err != nil {
			codes[r] = 1
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
				codes[r] = ee.ExitCode()
			}
		}
		if r == 0 {
			wg.Wait()
		}
		outs[r] = p.outs[r].String()
	}
	outs[0] = strings.Join(rest, "\n") + "\n" + outs[0]
	return outs, codes
}

// checkResults checks that every process that reports success computed the sequential
// ring's result for each of its tasks, and returns how many did.
func checkResults(t *testing.T, r ringJob, outs []string) int {
	t.Helper()
	tasks := r.tasks
	if tasks == 0 {
		tasks = len(outs)
	}
	want := r.expected(tasks)
	ok := 0
	re := regexp.MustCompile(`task (\d+) acc (\d+)`)
	for rank, out := range outs {
		if !strings.Contains(out, "\nok\n") && !strings.HasPrefix(out, "ok\n") {
			continue
		}
		ok++
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			task, _ := strconv.Atoi(m[1])
			if m[2] != strconv.FormatUint(want[task], 10) {
				t.Errorf("rank %d reports success with task %d acc %s, want %d", rank, task, m[2], want[task])
			}
		}
	}
	return ok
}

// expectAllSucceed checks that every process exited 0 and reported success with the right
// result.
func expectAllSucceed(t *testing.T, r ringJob, outs []string, codes []int) {
	t.Helper()
	expectExitZero(t, outs, codes)
	if n := checkResults(t, r, outs); n != len(outs) {
		t.Errorf("%d of %d processes report success", n, len(outs))
	}
}

// expectExitZero reports every process that exited with a status other than 0, with its
// output, and returns whether all exited with 0.
func expectExitZero(t *testing.T, outs []string, codes []int) bool {
	t.Helper()
	ok := true
	for rank, c := range codes {
		if c != 0 {
			t.Errorf("rank %d: status %d\n%s", rank, c, outs[rank])
			ok = false
		}
	}
	return ok
}

// stopFor stops the processes of ranks for d, then lets them go on.
func (p *ringProcs) stopFor(d time.Duration, ranks ...int) {
	p.signal(syscall.SIGSTOP, ranks...)
	time.Sleep(d) // the length of the stop itself, not a wait for an event
	p.signal(syscall.SIGCONT, ranks...)
}

// TestWholeJobStoppedAndResumed: a job whose processes are all stopped for longer than the
// peer timeout (SLURM's scontrol suspend, say) and then resumed together finishes with the
// right result: a process that was paused itself does not blame its peers.
func TestWholeJobStoppedAndResumed(t *testing.T) {
	r := ringJob{iters: 60, words: 4, pause: 20}
	p := startRing(t, r, 3, nil, "ORWL_PEER_TIMEOUT=1s")
	p.waitProgress(t)
	p.stopFor(2500*time.Millisecond, 0, 1, 2)
	p.resume()
	outs, codes := p.wait()
	expectAllSucceed(t, r, outs, codes)
}

// TestOneProcessStoppedFailsAll: one process stopped past the peer timeout makes every
// process fail, its rank named; none reports success on what the others left.
func TestOneProcessStoppedFailsAll(t *testing.T) {
	r := ringJob{iters: 60, words: 4, pause: 20}
	p := startRing(t, r, 3, nil, "ORWL_PEER_TIMEOUT=1s")
	p.waitProgress(t)
	p.stopFor(2500*time.Millisecond, 2)
	p.resume()
	outs, codes := p.wait()
	for rank, c := range codes {
		if c == 0 {
			t.Errorf("rank %d succeeded after rank 2 was stopped past the timeout\n%s", rank, outs[rank])
		}
		if !strings.Contains(outs[rank], "rank 2") {
			t.Errorf("rank %d's error does not name rank 2:\n%s", rank, outs[rank])
		}
	}
	if !strings.Contains(outs[2], "rank 2, was itself paused") {
		t.Errorf("rank 2 does not say it was paused itself:\n%s", outs[2])
	}
	if n := checkResults(t, r, outs); n != 0 {
		t.Errorf("%d processes report success", n)
	}
}

// TestPartitionFailsEveryProcess: ranks 0 and 2 of three emulated hosts lose each other (a
// network that splits); rank 1, which still reaches both, is told: every process fails,
// none reports success on stale data, and each side names the other, even when rank 1's
// end reaches it first.
func TestPartitionFailsEveryProcess(t *testing.T) {
	hosts := netemu.ForTest(t, []string{"h1"}, []string{"h2"}, []string{"h3"})
	r := ringJob{iters: 60, words: 4, pause: 20}
	p := startRing(t, r, 3, hosts, "ORWL_PEER_TIMEOUT=1s")
	p.waitProgress(t)
	if err := hosts.Partition(0, 2); err != nil {
		t.Fatal(err)
	}
	p.resume()
	outs, codes := p.wait()
	for rank, c := range codes {
		if c == 0 {
			t.Errorf("rank %d succeeded across a partition\n%s", rank, outs[rank])
		}
	}
	if !strings.Contains(outs[1], "rank 0") && !strings.Contains(outs[1], "rank 2") {
		t.Errorf("rank 1's error names neither side of the partition:\n%s", outs[1])
	}
	for rank, other := range map[int]string{0: "rank 2", 2: "rank 0"} { // whoever told it first
		if !strings.Contains(outs[rank], other) {
			t.Errorf("rank %d's error does not name %s, across the partition:\n%s", rank, other, outs[rank])
		}
	}
	if n := checkResults(t, r, outs); n != 0 {
		t.Errorf("%d processes report success", n)
	}
}

// TestBigLocationsOnASlowLink: locations above the old 64 MiB frame limit travel between
// two emulated hosts over a 100 Mbit/s link, each transfer longer than the peer timeout,
// and the result verifies.
func TestBigLocationsOnASlowLink(t *testing.T) {
	hosts := netemu.ForTest(t, []string{"h1"}, []string{"h2"})
	if err := hosts.Shape("100mbit"); err != nil {
		t.Skip("cannot shape the emulated link: ", err)
	}
	r := ringJob{iters: 1, words: (65 << 20) / 8, pause: -1}
	p := startRing(t, r, 2, hosts, "ORWL_PEER_TIMEOUT=2s")
	outs, codes := p.wait()
	expectAllSucceed(t, r, outs, codes)
}

// TestBigLocationsOnLoopback: the same without shaping, bigger and faster: a location of
// 70 MiB between processes, several times.
func TestBigLocationsOnLoopback(t *testing.T) {
	r := ringJob{iters: 3, words: (70 << 20) / 8, pause: -1}
	p := startRing(t, r, 2, nil)
	outs, codes := p.wait()
	expectAllSucceed(t, r, outs, codes)
}

// TestMoreProcessesThanTasks: a process without tasks is a member of the job like any other
// (it takes part in the schedule and the final agreement).
func TestMoreProcessesThanTasks(t *testing.T) {
	r := ringJob{iters: 20, words: 4, pause: -1, tasks: 2}
	p := startRing(t, r, 3, nil)
	outs, codes := p.wait()
	expectAllSucceed(t, r, outs, codes)
}

// TestProcessesDisagreeOnTheJob: processes that run different jobs fail when the mesh forms,
// every one with one error naming both descriptions.
func TestProcessesDisagreeOnTheJob(t *testing.T) {
	r := ringJob{iters: 20, words: 4, pause: -1, tasks: 3}
	p := startScenario(t, "ring", 3, nil, func(rank int) []string {
		if rank == 1 {
			r := r
			r.tasks = 4
			return r.env()
		}
		return r.env()
	})
	outs, codes := p.wait()
	want := `rank 1 has "tasks=4 locations=data placement=0,0,1,2", rank 0 has "tasks=3 locations=data placement=0,1,2"`
	for rank, c := range codes {
		if c == 0 || !strings.Contains(outs[rank], want) {
			t.Errorf("rank %d: status %d, want an error with %s:\n%s", rank, c, want, outs[rank])
		}
	}
}

func init() { scenarios["deadlock3"] = deadlock3Scenario }

// deadlock3Scenario: tasks 0 and 1 of three break the discipline across processes, and task
// 2, alone in its process, returns at once.
func deadlock3Scenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 3, Locations: []string{"block"}},
		func(ctx context.Context, task *orwl.Task) error {
			if task.ID() == 2 {
				return nil
			}
			return crossing(ctx, task)
		})
	fmt.Printf("deadlock=%v err=%v\n", errors.Is(err, orwl.ErrDeadlock), err)
	return 0
}

// TestDeadlockWithAFinishedProcess: a deadlock across processes is found even when one
// process's tasks have all returned.
func TestDeadlockWithAFinishedProcess(t *testing.T) {
	p := startScenario(t, "deadlock3", 3, nil, func(int) []string { return nil })
	outs, _ := p.wait()
	for rank, out := range outs {
		if !strings.Contains(out, "deadlock=true") || !strings.Contains(out, `task 0 waits to write task 1 "block" (position 1), held by task 1`) {
			t.Errorf("rank %d does not report the deadlock:\n%s", rank, out)
		}
	}
}

func init() { scenarios["resize"] = resizeScenario }

// resizeSizes are the sizes the resize scenario gives its locations, one per round.
var resizeSizes = []int{16, 0, 8, 0, 0, 24, 0}

// resizeScenario: task 1 owns x and y; it resizes and writes x, which task 0 reads, and task
// 0 resizes and writes y, which task 1 reads. Every reader checks that it sees the size and
// the bytes of the round, 0 included, and an empty, non-nil map of an empty location.
func resizeScenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x", "y"}},
		func(ctx context.Context, t *orwl.Task) error {
			mine, theirs := "x", "y" // task 1 writes x, reads y
			if t.ID() == 0 {
				mine, theirs = "y", "x"
			}
			w := t.WriteInsert(t.Loc(1, mine), 0)
			r := t.ReadInsert(t.Loc(1, theirs), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for round, size := range resizeSizes {
				if err := w.Section(ctx, func([]byte) error {
					b, err := w.Resize(size)
					for k := range b {
						b[k] = byte(round*16 + k)
					}
					return err
				}); err != nil {
					return err
				}
				if err := r.Section(ctx, func(b []byte) error {
					if b == nil || len(b) != size {
						return fmt.Errorf("task %d, round %d: %s has %d bytes (nil: %v), want %d", t.ID(), round, theirs, len(b), b == nil, size)
					}
					for k := range b {
						if b[k] != byte(round*16+k) {
							return fmt.Errorf("task %d, round %d: byte %d of %s is %d", t.ID(), round, k, theirs, b[k])
						}
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// TestResizeSeenEverywhere: every size change, 0 included, is seen in another process exactly
// as in one.
func TestResizeSeenEverywhere(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d processes", procs), func(t *testing.T) {
			p := startScenario(t, "resize", procs, nil, func(int) []string { return nil })
			outs, codes := p.wait()
			expectExitZero(t, outs, codes)
		})
	}
}

func init() { scenarios["writeback"] = writebackScenario }

// writebackScenario: task 1 writes task 0's location x, then reads it, every iteration;
// task 0 never touches it.
func writebackScenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error {
			if t.ID() == 0 {
				t.Scale("x", 1<<16)
				return t.Schedule(ctx)
			}
			w := t.WriteInsert(t.Loc(0, "x"), 0)
			r := t.ReadInsert(t.Loc(0, "x"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for i := range 10 {
				if err := w.Section(ctx, func(b []byte) error { b[0] = byte(i); return nil }); err != nil {
					return err
				}
				if err := r.Section(ctx, func(b []byte) error {
					if b[0] != byte(i) {
						return fmt.Errorf("iteration %d: read %d", i, b[0])
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// TestNoPayloadSentTwice: after a process's own remote write, the owner knows that its
// mirror holds the data: only the first grant carries it.
func TestNoPayloadSentTwice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.json")
	p := startScenario(t, "writeback", 2, nil, func(int) []string { return []string{"ORWL_TRACE=" + file} })
	outs, codes := p.wait()
	if !expectExitZero(t, outs, codes) {
		t.FailNow()
	}
	tr := readTrace(t, file)
	var in, out int
	for _, e := range tr.Events {
		if e.Cat == "transfer" && e.Pid == 0 {
			out++ // write-backs arriving at the owner
		}
		if e.Cat == "transfer" && e.Pid == 1 {
			in++ // grants with data arriving at the writer
		}
	}
	if in != 1 || out != 10 {
		t.Errorf("%d grants with data and %d write-backs, want 1 (the first grant) and 10", in, out)
	}
}

// TestKilledProcessWithoutTasksFailsTheOthers: a process that runs no task, killed while the
// others still run theirs, fails them with ErrPeerLost naming its rank: it has entered the
// final agreement already, but it is gone before the agreement ends. Task 0 stays at its
// pause until rank 1 has ended, which it can only do by failing: a kill that takes effect
// late cannot let the ring reach the agreement first.
func TestKilledProcessWithoutTasksFailsTheOthers(t *testing.T) {
	r := ringJob{iters: 40, words: 4, pause: 10, tasks: 2}
	p := startRing(t, r, 3, nil, "ORWL_PEER_TIMEOUT=1s")
	p.waitProgress(t)
	p.signal(syscall.SIGKILL, 2)
	p.awaitExit(t, 1)
	p.resume()
	outs, codes := p.wait()
	for rank := range 2 {
		if codes[rank] == 0 || !strings.Contains(outs[rank], "process rank 2 lost") {
			t.Errorf("rank %d: status %d, want a failure naming rank 2 lost:\n%s", rank, codes[rank], outs[rank])
		}
	}
	if n := checkResults(t, r, outs); n != 0 {
		t.Errorf("%d processes report success", n)
	}
}

// TestStartPartitionNamesTheCoordinator: a process cut off from the coordinator's host when
// the job starts names the coordinator within the peer timeout, instead of waiting out the
// start timeout; the others name the rank that did not register.
func TestStartPartitionNamesTheCoordinator(t *testing.T) {
	hosts := netemu.ForTest(t, []string{"h1"}, []string{"h2"}, []string{"h3"})
	if err := hosts.Partition(0, 2); err != nil {
		t.Fatal(err)
	}
	r := ringJob{iters: 5, words: 4, pause: -1}
	p := startRing(t, r, 3, hosts, "ORWL_PEER_TIMEOUT=1s", "ORWL_START_TIMEOUT=8s")
	outs, codes := p.wait()
	for rank, c := range codes {
		want := "ranks [2] did not register"
		if rank == 2 {
			want = "the coordinator, rank 0 at " + hosts.Hosts[0].Addr
		}
		if c == 0 || !strings.Contains(outs[rank], want) {
			t.Errorf("rank %d: status %d, want an error with %q:\n%s", rank, c, want, outs[rank])
		}
	}
	if !strings.Contains(outs[2], "does not answer") || strings.Contains(outs[2], "start timeout") {
		t.Errorf("rank 2 does not say that the coordinator does not answer, or waited for the start timeout:\n%s", outs[2])
	}
}
