package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/examples/blockring"
	"github.com/orwl-go/orwl/internal/testemu/netemu"
	"github.com/orwl-go/orwl/internal/testemu/pmitest"
)

// The job every launcher test runs, and the start of the line its process of rank 0 must
// print: the bounds of the same job run as one process.
const jobArgs = "-tasks 5 -size 64 -iters 30"

func oneProcessLine(t *testing.T) string {
	t.Helper()
	bounds, err := ring(context.Background(), blockring.Job{Tasks: 5, Size: 64, Iters: 30})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("result: size=64 iters=30 bounds=%v tasks=5 procs=", bounds)
}

// checkOneResult checks that out holds the one-process result exactly once, verified, and
// no warning about a derived secret.
func checkOneResult(t *testing.T, out []byte, want string) {
	t.Helper()
	if n := strings.Count(string(out), "tasks="); n != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), " verified=true\n") {
		t.Fatalf("want the one-process result once:\n%s\ngot:\n%s", want, out)
	}
	if strings.Contains(string(out), "derived from") {
		t.Fatalf("a derived secret was used:\n%s", out)
	}
}

// TestUnderHydra: `mpiexec.hydra -n 3` with no ORWL_* variable gives the one-process
// result, through PMI-1 (Hydra's default) and PMI-2 (ORWL_PMI=2).
func TestUnderHydra(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("mpiexec.hydra not found: install Debian's mpich to run this test")
	}
	want := oneProcessLine(t)
	for _, pmi := range []string{"1", "2"} {
		t.Run("PMI-"+pmi, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, hydra, "-launcher", "fork", "-n", "3", os.Args[0], "-test.run=^$")
			cmd.Env = netemu.CleanEnv(childEnv + "=" + jobArgs)
			if pmi == "2" {
				cmd.Env = append(cmd.Env, "ORWL_PMI=2")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("mpiexec.hydra -n 3: %v\n%s", err, out)
			}
			checkOneResult(t, out, want)
		})
	}
}

// TestHydraAcrossHosts: Hydra starts one process on each of three emulated hosts (network
// namespaces; Hydra's manual launcher prints the proxy commands, which the test runs on the
// hosts), rank 0 on the second: with no ORWL_* variable the job gives the one-process result,
// so rank 0 published an address of its host that the others reach.
func TestHydraAcrossHosts(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("mpiexec.hydra not found: install Debian's mpich to run this test")
	}
	net := netemu.ForTest(t, []string{"h1"}, []string{"h2"}, []string{"h3"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// mpiexec runs on h1; proxy 0 (rank 0) on h2, proxy 1 on h1, proxy 2 on h3.
	mpiexec := net.Command(ctx, 0, hydra, "-launcher", "manual", "-hosts", "h2,h1,h3", "-n", "3", os.Args[0], "-test.run=^$")
	mpiexec.Env = netemu.CleanEnv(childEnv + "=" + jobArgs)
	pipe, err := mpiexec.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mpiexecErr bytes.Buffer
	mpiexec.Stderr = &mpiexecErr
	if err := mpiexec.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(pipe)
	var proxies [][]string
	for lines.Scan() && lines.Text() != "HYDRA_LAUNCH_END" {
		args, ok := strings.CutPrefix(lines.Text(), "HYDRA_LAUNCH: ")
		if !ok {
			continue
		}
		argv := strings.Fields(args)
		for i := range argv {
			if argv[i] == "--control-port" && i+1 < len(argv) { // mpiexec names itself by a host name only h1 knows
				_, port, _ := strings.Cut(argv[i+1], ":")
				argv[i+1] = net.Hosts[0].Addr + ":" + port
			}
		}
		proxies = append(proxies, argv)
	}
	if len(proxies) != 3 {
		mpiexec.Process.Kill()
		mpiexec.Wait()
		t.Fatalf("mpiexec.hydra -launcher manual printed %d proxy commands, want 3\n%s", len(proxies), mpiexecErr.String())
	}
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		for lines.Scan() {
			out.WriteString(lines.Text() + "\n")
		}
		close(copied)
	}()
	proxyOut := make([]bytes.Buffer, 3)
	cmds := make([]*exec.Cmd, 3)
	for id, host := range []int{1, 0, 2} {
		cmd := net.Command(ctx, host, proxies[id]...)
		cmd.Env = netemu.CleanEnv()
		cmd.Stdout, cmd.Stderr = &proxyOut[id], &proxyOut[id]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[id] = cmd
	}
	for id, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("proxy %d: %v\n%s", id, err, proxyOut[id].String())
		}
	}
	<-copied
	if err := mpiexec.Wait(); err != nil {
		t.Fatalf("mpiexec.hydra: %v\n%s%s", err, out.String(), mpiexecErr.String())
	}
	checkOneResult(t, append(out.Bytes(), mpiexecErr.Bytes()...), oneProcessLine(t))
}

// TestUnderSrun: `srun --mpi=pmi2 -n 3` with no ORWL_* variable gives the one-process result.
// It needs a running SLURM cluster (/work/shared/cluster/slurm.sh up makes a one-node one)
// and skips without.
func TestUnderSrun(t *testing.T) {
	srun, err := exec.LookPath("srun")
	if err != nil {
		t.Skip("srun not found: SLURM is not installed here")
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%T").Output(); err != nil || !strings.ContainsAny(string(out), "idlemx") {
		t.Skipf("no SLURM cluster answers here (sinfo: %v %q): /work/shared/cluster/slurm.sh up starts a one-node one", err, out)
	}
	want := oneProcessLine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, srun, "--mpi=pmi2", "-n", "3", "-O", os.Args[0], "-test.run=^$")
	cmd.Env = netemu.CleanEnv(childEnv + "=" + jobArgs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("srun --mpi=pmi2 -n 3: %v\n%s", err, out)
	}
	checkOneResult(t, out, want)
}

// slurmEnv is what srun gives the task of the given rank on emulated host orh<node+1> in a
// job of three tasks over orh1..orh3, one per node; pmi2 adds the PMI-2 connection's
// variables (the connection itself is descriptor 3).
func slurmEnv(rank, node int, pmi2 bool) []string {
	env := []string{"SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURM_PROCID=" + strconv.Itoa(rank), "SLURM_STEP_NUM_TASKS=3",
		"SLURM_STEP_NODELIST=orh[1-3]", "SLURM_NODEID=" + strconv.Itoa(node), "SLURMD_NODENAME=orh" + strconv.Itoa(node+1),
		"SLURM_STEP_TASKS_PER_NODE=1(x3)", "SLURM_DISTRIBUTION=arbitrary"}
	if pmi2 {
		env = append(env, "SLURM_MPI_TYPE=pmi2", "PMI_FD=3", "PMI_JOBID=77.0", "PMI_RANK="+strconv.Itoa(rank), "PMI_SIZE=3")
	}
	return env
}

// TestSlurmArbitraryPlacement emulates `srun -m arbitrary` on three hosts (network
// namespaces with hosts files) with rank 0 on orh2, not on orh1, the node list's first
// node. With the PMI-2 connection srun --mpi=pmi2 gives (served by a test server), the job
// gives the one-process result; without it, rank 0 fails at once saying to use
// --mpi=pmi2 or set ORWL_COORD.
func TestSlurmArbitraryPlacement(t *testing.T) {
	net := netemu.ForTest(t, []string{"orh1"}, []string{"orh2"}, []string{"orh3"})
	nodeOf := []int{1, 0, 2} // rank -> emulated host: rank 0 on orh2

	t.Run("srun --mpi=pmi2", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		srv := pmitest.NewServer(3)
		defer srv.Close()
		outs := make([]bytes.Buffer, 3)
		cmds := make([]*exec.Cmd, 3)
		for rank, node := range nodeOf {
			f, err := srv.Socket(rank)
			if err != nil {
				t.Fatal(err)
			}
			cmd := net.Command(ctx, node, os.Args[0], "-test.run=^$")
			cmd.Env = netemu.CleanEnv(append(slurmEnv(rank, node, true), childEnv+"="+jobArgs)...)
			cmd.ExtraFiles = []*os.File{f}
			cmd.Stdout, cmd.Stderr = &outs[rank], &outs[rank]
			err = cmd.Start()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			cmds[rank] = cmd
		}
		for rank, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("rank %d on orh%d: %v\n%s", rank, nodeOf[rank]+1, err, outs[rank].String())
			}
		}
		checkOneResult(t, outs[0].Bytes(), oneProcessLine(t))
		srv.Close()
		if err := srv.Wait(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("srun without PMI", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		outs := make([]bytes.Buffer, 3)
		cmds := make([]*exec.Cmd, 3)
		for rank, node := range nodeOf {
			cmd := net.Command(ctx, node, os.Args[0], "-test.run=^$")
			cmd.Env = netemu.CleanEnv(append(slurmEnv(rank, node, false), childEnv+"="+jobArgs)...)
			cmd.Stdout, cmd.Stderr = &outs[rank], &outs[rank]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[rank] = cmd
		}
		err := cmds[0].Wait()
		// The others wait for a coordinator that will never come: stop them, as srun
		// --kill-on-bad-exit would.
		for _, cmd := range cmds[1:] {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if err == nil {
			t.Fatalf("rank 0 succeeded:\n%s", outs[0].String())
		}
		for _, want := range []string{"rank 0 runs on orh2", "first node is orh1", "srun --mpi=pmi2", "export ORWL_COORD=host:port"} {
			if !strings.Contains(outs[0].String(), want) {
				t.Errorf("rank 0's error lacks %q:\n%s", want, outs[0].String())
			}
		}
	})
}
