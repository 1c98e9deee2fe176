package orwl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/launch"
	"github.com/orwl-go/orwl/orwl"
)

// Multi-process tests start real processes of this test binary on loopback; scenarioEnv
// tells such a process which scenario to run instead of the tests.
const scenarioEnv = "ORWL_TEST_SCENARIO"

// scenarios run in every process of a multi-process test. They print what the parent
// checks and return the exit status.
var scenarios = map[string]func() int{
	"plan":     planScenario,
	"deadlock": deadlockScenario,
	"sigkill":  sigkillScenario,
	"problems": problemsScenario,
	"cores":    coresScenario,
}

func runScenario(name string) int {
	fn, ok := scenarios[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown scenario", name)
		return 2
	}
	return fn()
}

// job runs scenario over procs processes and returns their output and the launcher's status.
func job(t *testing.T, procs int, scenario string, env ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer // launch writes one line at a time
	status := launch.Run(launch.Options{
		Procs:  procs,
		Argv:   []string{os.Args[0], "-test.run=^$"},
		Env:    append(env, scenarioEnv+"="+scenario),
		Stdout: &out,
		Stderr: &out,
		Grace:  20 * time.Second,
	})
	return out.String(), status
}

// planSeed and planIters fix the random plan all processes of the plan scenario run.
const planSeed, planIters = 5, 25

// planScenario runs a random access plan; every process prints what its readers saw as
// "seen task seq iter value" lines.
func planScenario() int {
	rng := rand.New(rand.NewPCG(planSeed, 7))
	tasks := 5
	plan := randomPlan(rng, tasks, 2)
	names := []string{"a", "b"}
	var lines []string
	results := make(chan []string, tasks)
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: names},
		func(ctx context.Context, task *orwl.Task) error {
			seen, err := runPlan(ctx, task, plan, names, planIters, nil)
			var mine []string
			for k, v := range seen {
				mine = append(mine, fmt.Sprintf("seen %d %d %d %d", k[0], k[1], k[2], v))
			}
			results <- mine
			return err
		})
	close(results)
	for r := range results {
		lines = append(lines, r...)
	}
	slices.Sort(lines)
	out := strings.Join(lines, "\n") + "\n"
	if dir := os.Getenv("PLAN_OUT"); dir != "" { // a launcher that may cut lines apart
		os.WriteFile(filepath.Join(dir, os.Getenv("OMPI_COMM_WORLD_RANK")), []byte(out), 0o644)
	} else {
		fmt.Print(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// checkPlanOutput compares the "seen" lines of a plan job with the sequential play.
func checkPlanOutput(t *testing.T, out string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(planSeed, 7))
	want := simulate(randomPlan(rng, 5, 2), planIters)
	re := regexp.MustCompile(`seen (\d+) (\d+) (\d+) (\d+)`)
	got := 0
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		var k [3]int
		for i := range k {
			k[i], _ = strconv.Atoi(m[i+1])
		}
		v, _ := strconv.ParseUint(m[4], 10, 64)
		if want[k] != v {
			t.Fatalf("task %d read %d of iteration %d saw %d, the schedule's order gives %d", k[0], k[1], k[2], v, want[k])
		}
		got++
	}
	if got != len(want) {
		t.Fatalf("%d reads reported, the plan has %d\n%s", got, len(want), out)
	}
}

func TestPlanAcrossProcesses(t *testing.T) {
	for _, procs := range []int{1, 2, 3} {
		out, status := job(t, procs, "plan")
		if status != 0 {
			t.Fatalf("%d processes: status %d\n%s", procs, status, out)
		}
		checkPlanOutput(t, out)
	}
}

func TestPlanUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun.openmpi") // not "mpirun": MPICH registers one too
	if err != nil {
		t.Skip("mpirun.openmpi not found: install Debian's openmpi-bin to run this test")
	}
	// Every process writes its lines to a file of its own: mpirun forwards the processes'
	// output in chunks that can cut a line of one with another's.
	dir := t.TempDir()
	cmd := exec.Command(mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3",
		"-x", scenarioEnv+"=plan", "-x", "PLAN_OUT="+dir, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OMPI_MCA_plm_rsh_agent=", "PRTE_MCA_plm_rsh_agent=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	var all []byte
	for rank := range 3 {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(rank)))
		if err != nil {
			t.Fatalf("rank %d wrote no results: %v\n%s", rank, err, out)
		}
		all = append(all, b...)
	}
	checkPlanOutput(t, string(all))
}

// deadlockScenario breaks the discipline across processes.
func deadlockScenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"block"}}, crossing)
	fmt.Printf("deadlock=%v err=%v\n", errors.Is(err, orwl.ErrDeadlock), err)
	return 0
}

func TestDeadlockAcrossProcesses(t *testing.T) {
	out, status := job(t, 2, "deadlock")
	if status != 0 {
		t.Fatalf("status %d\n%s", status, out)
	}
	outputHas(t, out,
		`[0] deadlock=true`, `[1] deadlock=true`,
		`task 0 waits to write task 1 "block" (position 1), held by task 1`,
		`task 1 waits to write task 0 "block" (position 1), held by task 0`)
}

// outputHas reports each of wants that a job's output out lacks.
func outputHas(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// sigkillScenario: three processes pass a token around a ring without end; rank 1 kills
// itself after a while. The others must fail, naming rank 1, within seconds.
func sigkillScenario() int {
	signal.Ignore(syscall.SIGTERM) // the launcher's stop must not hide our own detection
	rank := os.Getenv("ORWL_RANK")
	start := time.Now()
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 3, Locations: []string{"token"}},
		func(ctx context.Context, task *orwl.Task) error {
			h := task.WriteInsert(task.Loc(0, "token"), task.ID())
			if err := task.Schedule(ctx); err != nil {
				return err
			}
			for i := 0; ; i++ {
				if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
					return err
				}
				if task.ID() == 1 && i == 200 {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		})
	fmt.Printf("rank %s failed after the kill: peerlost=%v in=%.1fs err=%v\n",
		rank, errors.Is(err, orwl.ErrPeerLost), time.Since(start).Seconds(), err)
	return 1
}

func TestSigkilledProcessFailsTheOthers(t *testing.T) {
	start := time.Now()
	out, status := job(t, 3, "sigkill")
	if status == 0 {
		t.Fatalf("the job succeeded\n%s", out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the job took %v to fail", d)
	}
	for _, rank := range []string{"0", "2"} {
		re := regexp.MustCompile(`rank ` + rank + ` failed after the kill: peerlost=true in=[0-9.]+s err=.*rank 1 lost`)
		if !re.MatchString(out) {
			t.Errorf("rank %s did not report losing rank 1:\n%s", rank, out)
		}
	}
}

// problemsScenario: insert mistakes in tasks of different processes must reach every task,
// the same text everywhere.
func problemsScenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 4, Locations: []string{"x"}},
		func(ctx context.Context, task *orwl.Task) error {
			switch task.ID() {
			case 0:
				task.ReadInsert(task.Loc(9, "x"), 0)
			case 3:
				task.WriteInsert(task.Loc(1, "y"), 0)
			}
			return task.Schedule(ctx)
		})
	fmt.Printf("err=%q\n", err)
	return 0
}

func TestScheduleProblemsAcrossProcesses(t *testing.T) {
	out, status := job(t, 2, "problems")
	if status != 0 {
		t.Fatalf("status %d\n%s", status, out)
	}
	re := regexp.MustCompile(`\[(\d)\] err="(.*)"`)
	texts := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		texts[m[1]] = m[2]
	}
	if len(texts) != 2 || texts["0"] != texts["1"] {
		t.Fatalf("the processes report different errors:\n%s", out)
	}
	for _, want := range []string{`task 0: read insert on task 9 \"x\"`, `task 3: write insert on task 1 \"y\"`} {
		if !strings.Contains(texts["0"], want) {
			t.Errorf("error lacks %q: %s", want, texts["0"])
		}
	}
}

// TestPlanAcrossHosts runs the plan scenario on two emulated hosts: network namespaces
// joined by a veth pair, each process listening on its host's own address. It needs root
// and iproute2, and skips without them.
func TestPlanAcrossHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to create network namespaces")
	}
	suffix := strconv.Itoa(os.Getpid() % 100000)
	hosts := []string{"orwla" + suffix, "orwlb" + suffix}
	addrs := []string{"10.213.7.1", "10.213.7.2"}
	sh := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, h := range hosts {
		if err := sh("netns", "add", h); err != nil {
			t.Skipf("cannot create network namespaces here: %v", err)
		}
		t.Cleanup(func() { sh("netns", "del", h) })
	}
	veth := []string{"oa" + suffix, "ob" + suffix}
	steps := [][]string{{"link", "add", veth[0], "type", "veth", "peer", "name", veth[1]}}
	for i, h := range hosts {
		steps = append(steps,
			[]string{"link", "set", veth[i], "netns", h},
			[]string{"-n", h, "addr", "add", addrs[i] + "/24", "dev", veth[i]},
			[]string{"-n", h, "link", "set", veth[i], "up"},
			[]string{"-n", h, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			t.Fatal(err)
		}
	}
	coord := net.JoinHostPort(addrs[0], "7411")
	var outs [2]bytes.Buffer // one writer per process: exec copies both streams with one goroutine
	var cmds [2]*exec.Cmd
	for rank, h := range hosts {
		cmd := exec.Command("ip", "netns", "exec", h, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), scenarioEnv+"=plan", "ORWL_RANK="+strconv.Itoa(rank), "ORWL_SIZE=2",
			"ORWL_COORD="+coord, "ORWL_SECRET=across-hosts", "ORWL_LISTEN="+addrs[rank])
		cmd.Stdout, cmd.Stderr = &outs[rank], &outs[rank]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[rank] = cmd
	}
	for rank, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, err, outs[rank].String())
		}
	}
	checkPlanOutput(t, outs[0].String()+outs[1].String())
}
