package transport

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fdJobEnv asks the test binary to run a job of that many processes in itself, under a
// limit of open files too low for its connections (see fdJobMain).
const fdJobEnv = "TRANSPORT_TEST_FD_JOB"

func init() {
	if n, err := strconv.Atoi(os.Getenv(fdJobEnv)); err == nil {
		os.Exit(fdJobMain(n))
	}
}

// fdJobMain lowers this process's limit of open files to 48 and starts a job of n ranks in
// it, all sharing the limit; it prints each rank's error.
func fdJobMain(n int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("getrlimit:", err)
		return 2
	}
	lim.Cur = 48
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	meshes := make([]*Mesh, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := Config{Rank: i, Size: n, Coord: ln.Addr().String(), Secret: testSecret, Logger: quietLogger(),
			StartTimeout: 30 * time.Second, PeerTimeout: time.Second, Heartbeat: 100 * time.Millisecond}
		if i == 0 {
			cfg.Listener = ln
		}
		wg.Go(func() { meshes[i], errs[i] = Start(context.Background(), cfg) })
	}
	wg.Wait()
	closeAll(meshes)
	for rank, err := range errs {
		fmt.Printf("rank %d: %q\n", rank, fmt.Sprint(err))
	}
	return 0
}

// A job whose processes may not open the files its connections need fails to start, every
// process naming the limit of open files as the cause, at once: no peer timeout, and no
// start timeout, for a limit that waiting does not lift.
func TestStartNamesTheLimitOfOpenFiles(t *testing.T) {
	const n = 8
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fdJobEnv+"="+strconv.Itoa(n))
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the job: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want one per rank:\n%s", len(lines), out)
	}
	for _, line := range lines {
		if !strings.Contains(line, "this process has reached its limit of open files (RLIMIT_NOFILE: ulimit -n)") ||
			!strings.Contains(line, "too many open files") {
			t.Errorf("an error without the limit of open files as its cause: %s", line)
		}
	}
	if took > 10*time.Second {
		t.Errorf("the job took %v to fail (peer timeout 1s, start timeout 30s)", took)
	}
	t.Logf("in %v: %s", took.Round(time.Millisecond), lines[0])
}
