package hugemem

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// adviceChildEnv makes the test binary a child of TestAdvice that writes a mapped buffer
// (from Alloc, or from AllocHuge when it is "huge") and prints its page faults.
const adviceChildEnv = "HUGEMEM_TEST_CHILD"

// TestAdvice writes a mapped buffer of 64 MiB in processes with ORWL_HUGEPAGES=on, off and
// unset (the variable is read once per process), from Alloc and from AllocHuge: with huge
// pages that takes about one page fault per 2 MiB, with small pages one per 4 KiB.
// AllocHuge asks for huge pages unless the variable is "off"; Alloc only when it is "on".
func TestAdvice(t *testing.T) {
	const size = 64 << 20
	if child := os.Getenv(adviceChildEnv); child != "" {
		alloc := Alloc
		if child == "huge" {
			alloc = AllocHuge
		}
		b := alloc(size)
		if !Mapped(b) {
			t.Fatal("not mapped")
		}
		t.Logf("faults=%d", faultsOf(t, func() {
			for i := 0; i < size; i += 4096 {
				b[i] = 1
			}
		}))
		Free(b)
		return
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("transparent huge pages are not available here")
	}
	small := int64(size / 4096)
	hugeFaults, smallFaults := [2]int64{1, small / 4}, [2]int64{small * 9 / 10, 2 * small}
	cases := []struct {
		child, advice string
		want          [2]int64 // page faults, at least and at most
	}{
		{"alloc", "on", hugeFaults}, {"alloc", "off", smallFaults},
		{"huge", "", hugeFaults}, {"huge", "on", hugeFaults}, {"huge", "off", smallFaults},
	}
	for _, c := range cases {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdvice$", "-test.v")
		cmd.Env = append(os.Environ(), adviceChildEnv+"="+c.child, "ORWL_HUGEPAGES="+c.advice)
		out, err := cmd.CombinedOutput()
		_, after, ok := strings.Cut(string(out), "faults=")
		if err != nil || !ok {
			t.Fatalf("%s, ORWL_HUGEPAGES=%q: %v\n%s", c.child, c.advice, err, out)
		}
		n, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		if err != nil || n < c.want[0] || n > c.want[1] {
			t.Fatalf("%s, ORWL_HUGEPAGES=%q: %d page faults writing %d MiB, want %d to %d", c.child, c.advice, n, size>>20, c.want[0], c.want[1])
		}
		t.Logf("%s, ORWL_HUGEPAGES=%q: %d page faults for %d MiB", c.child, c.advice, n, size>>20)
	}
}

// faultsOf returns the page faults that do takes on the calling goroutine's thread: the
// process's other threads (the garbage collector, the race detector's) fault too, at times
// of their own.
func faultsOf(t *testing.T, do func()) int64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	faults := func() int64 {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Minflt + ru.Majflt
	}
	before := faults()
	do()
	return faults() - before
}
