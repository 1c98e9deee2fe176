// Package netemu emulates hosts for tests: one network namespace per host,
// all joined by a bridge that lives in a namespace of its own, each host with its own
// address and a hosts file (/etc/netns/NS/hosts, which `ip netns exec` puts in place of
// /etc/hosts) naming every host, private to one test: the namespaces' names carry the
// process id, and Close removes everything.
//
// It needs root and iproute2; New reports ErrUnavailable when they are missing, so that
// tests skip. It must not touch the machine's own network namespace beyond creating and
// removing its namespaces.
package netemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// ErrUnavailable is wrapped by New's error when this machine cannot make namespaces (not
// root, no ip command, no permission).
var ErrUnavailable = errors.New("netemu: cannot emulate hosts here")

// Host is one emulated host.
type Host struct {
	NS    string   // its network namespace
	Addr  string   // its IPv4 address
	Names []string // the names every host's hosts file gives it
}

// Net is a set of emulated hosts on one bridge.
type Net struct {
	Hosts []Host
	sw    string // the bridge's namespace
}

var nets atomic.Int32

// New makes one host per entry of names, which lists the names the host is known by.
// Hosts get 10.214.0.1, 10.214.0.2, ... (each network is private to its namespaces, so
// addresses never meet another test's). On error, whatever was made is removed.
func New(names ...[]string) (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root to create network namespaces", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: needs iproute2's ip", ErrUnavailable)
	}
	if len(names) > 250 {
		return nil, fmt.Errorf("netemu: %d hosts: at most 250", len(names))
	}
	prefix := "oe" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(int(nets.Add(1)))
	n := &Net{sw: prefix + "-sw"}
	if err := ip("netns", "add", n.sw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hosts := "127.0.0.1 localhost\n"
	for i, nm := range names {
		h := Host{NS: prefix + "-" + strconv.Itoa(i+1), Addr: "10.214.0." + strconv.Itoa(i+1), Names: nm}
		n.Hosts = append(n.Hosts, h)
		hosts += h.Addr + " " + strings.Join(nm, " ") + "\n"
	}
	steps := [][]string{
		{"-n", n.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", n.sw, "link", "set", "br0", "up"},
	}
	for i, h := range n.Hosts {
		port := "p" + strconv.Itoa(i+1)
		steps = append(steps,
			[]string{"netns", "add", h.NS},
			[]string{"link", "add", "name", "eth0", "netns", h.NS, "type", "veth", "peer", "name", port, "netns", n.sw},
			[]string{"-n", n.sw, "link", "set", port, "master", "br0"},
			[]string{"-n", n.sw, "link", "set", port, "up"},
			[]string{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", "eth0"},
			[]string{"-n", h.NS, "link", "set", "eth0", "up"},
			[]string{"-n", h.NS, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			n.Close()
			return nil, err
		}
	}
	for _, h := range n.Hosts {
		dir := filepath.Join("/etc/netns", h.NS)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			n.Close()
			return nil, fmt.Errorf("netemu: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
			n.Close()
			return nil, fmt.Errorf("netemu: %w", err)
		}
	}
	return n, nil
}

// ForTest is New for a test: it skips the test when this machine cannot emulate hosts,
// fails it on any other error, and removes the hosts when the test ends.
func ForTest(t testing.TB, names ...[]string) *Net {
	t.Helper()
	n, err := New(names...)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// launcherVars are the prefixes of the variables launchers set.
var launcherVars = []string{"ORWL_", "PMI_", "PMIX_", "OMPI_", "SLURM_", "SLURMD_", "MPI_LOCAL", "HYDRA_", "JOB_COMPLETION_INDEX="}

// CleanEnv returns this process's environment without any launcher's variables, followed by
// more: for the processes a test starts as a job of their own, also when the test itself
// runs under a launcher.
func CleanEnv(more ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(launcherVars, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			env = append(env, kv)
		}
	}
	return append(env, more...)
}

// Command returns a command that runs argv on emulated host i (`ip netns exec`, which keeps
// the command's inherited descriptors).
func (n *Net) Command(ctx context.Context, i int, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Hosts[i].NS}, argv...)...)
}

// Shape limits every host's link to rate (tc's syntax: "100mbit", "1gbit"), both ways, with
// a token bucket (netem is not available here: no added delay or loss).
func (n *Net) Shape(rate string) error {
	for i, h := range n.Hosts {
		for _, dev := range [][2]string{{h.NS, "eth0"}, {n.sw, "p" + strconv.Itoa(i+1)}} {
			if err := tc("-n", dev[0], "qdisc", "replace", "dev", dev[1], "root", "tbf", "rate", rate, "burst", "256kb", "latency", "50ms"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Partition cuts hosts i and j apart: what one sends the other is dropped without a word
// (blackhole routes), as on a network that splits; the other hosts still reach both.
func (n *Net) Partition(i, j int) error {
	if err := ip("-n", n.Hosts[i].NS, "route", "add", "blackhole", n.Hosts[j].Addr+"/32"); err != nil {
		return err
	}
	return ip("-n", n.Hosts[j].NS, "route", "add", "blackhole", n.Hosts[i].Addr+"/32")
}

// Heal undoes Partition(i, j): hosts i and j reach each other again.
func (n *Net) Heal(i, j int) error {
	if err := ip("-n", n.Hosts[i].NS, "route", "del", "blackhole", n.Hosts[j].Addr+"/32"); err != nil {
		return err
	}
	return ip("-n", n.Hosts[j].NS, "route", "del", "blackhole", n.Hosts[i].Addr+"/32")
}

// Close removes the hosts, the bridge and the hosts files.
func (n *Net) Close() {
	for _, h := range n.Hosts {
		ip("netns", "del", h.NS)
		os.RemoveAll(filepath.Join("/etc/netns", h.NS))
	}
	ip("netns", "del", n.sw)
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netemu: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func tc(args ...string) error {
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netemu: tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
