package pmi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/pmi"
)

// childEnv makes a process of this test binary run the exchange as one process of a job
// started by a real launcher, in the PMI version the variable holds.
const childEnv = "PMI_TEST_CHILD_VERSION"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(childEnv); ok {
		version, _ := strconv.Atoi(v)
		if err := child(version); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child: rank 0 puts a value, every process reads it after the fence and prints it.
func child(version int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, ok, err := pmi.FromEnv(os.LookupEnv, version)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no PMI_FD or PMI_PORT")
	}
	c, err := pmi.Dial(ctx, e)
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		if err := c.Put(ctx, "orwl-test", fmt.Sprintf("from-rank-0-pid-%d", os.Getpid())); err != nil {
			return err
		}
	}
	if err := c.Fence(ctx); err != nil {
		return err
	}
	v, err := c.Get(ctx, "orwl-test")
	if err != nil {
		return err
	}
	fmt.Printf("rank %d of %d (PMI-%d over %s) got %s\n", c.Rank(), c.Size(), c.Version(), strings.Split(e.String(), "=")[0], v)
	return c.Finalize(ctx)
}

// TestHydra runs three processes under MPICH's Hydra, over PMI_FD in both wire versions
// and over PMI_PORT: every process reads the value rank 0 put.
func TestHydra(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("mpiexec.hydra not found: install Debian's mpich to run this test")
	}
	for _, tc := range []struct {
		version int
		args    []string
		via     string
	}{{1, nil, "PMI_FD"}, {2, nil, "PMI_FD"}, {1, []string{"-pmi-port"}, "PMI_PORT"}, {2, []string{"-pmi-port"}, "PMI_PORT"}} {
		t.Run(fmt.Sprintf("PMI-%d %s", tc.version, tc.via), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append(tc.args, "-launcher", "fork", "-n", "3", os.Args[0], "-test.run=^$")
			cmd := exec.CommandContext(ctx, hydra, args...)
			cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(tc.version))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", hydra, strings.Join(args, " "), err, out)
			}
			re := regexp.MustCompile(fmt.Sprintf(`(?m)^rank (\d) of 3 \(PMI-%d over %s\) got (from-rank-0-pid-\d+)$`, tc.version, tc.via))
			ranks, values := map[string]bool{}, map[string]bool{}
			for _, m := range re.FindAllStringSubmatch(string(out), -1) {
				ranks[m[1]], values[m[2]] = true, true
			}
			if len(ranks) != 3 || len(values) != 1 {
				t.Fatalf("want three ranks reading one value, got:\n%s", out)
			}
		})
	}
}
