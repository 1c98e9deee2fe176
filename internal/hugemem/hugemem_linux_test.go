package hugemem

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// adviceChildEnv makes the test binary a child of TestAdvice that writes a mapped buffer
// and prints its page faults.
const adviceChildEnv = "HUGEMEM_TEST_CHILD"

// TestAdvice writes a mapped buffer of 64 MiB in a process with ORWL_HUGEPAGES=on and in
// one with off (the variable is read once per process): with huge pages that takes about
// one page fault per 2 MiB, with small pages one per 4 KiB.
func TestAdvice(t *testing.T) {
	const size = 64 << 20
	if os.Getenv(adviceChildEnv) != "" {
		b := Alloc(size)
		if !Mapped(b) {
			t.Fatal("not mapped")
		}
		before := faults(t)
		for i := 0; i < size; i += 4096 {
			b[i] = 1
		}
		t.Logf("faults=%d", faults(t)-before)
		Free(b)
		return
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("transparent huge pages are not available here")
	}
	small := int64(size / 4096)
	for _, c := range []struct {
		advice   string
		min, max int64
	}{{"on", 1, small / 4}, {"off", small * 9 / 10, 2 * small}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdvice$", "-test.v")
		cmd.Env = append(os.Environ(), adviceChildEnv+"=1", "ORWL_HUGEPAGES="+c.advice)
		out, err := cmd.CombinedOutput()
		_, after, ok := strings.Cut(string(out), "faults=")
		if err != nil || !ok {
			t.Fatalf("ORWL_HUGEPAGES=%s: %v\n%s", c.advice, err, out)
		}
		n, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		if err != nil || n < c.min || n > c.max {
			t.Fatalf("ORWL_HUGEPAGES=%s: %d page faults writing %d MiB, want %d to %d", c.advice, n, size>>20, c.min, c.max)
		}
		t.Logf("ORWL_HUGEPAGES=%s: %d page faults for %d MiB", c.advice, n, size>>20)
	}
}

func faults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt + ru.Majflt
}
