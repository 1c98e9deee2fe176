package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/orwl-go/orwl/orwl"
)

// openMPI is Open MPI's compiler wrapper and launcher, the peers' toolchain of the matmul
// and stencil commands. MPICH may be installed beside it, and the plain names (mpicc,
// mpirun) may then be MPICH's: the Debian names mpicc.openmpi and mpirun.openmpi come first.
type openMPI struct {
	cc, run string
	shm     string // the shared-memory BTL: vader (Open MPI 3 and 4) or sm (Open MPI 5)
}

// findOpenMPI finds Open MPI's mpicc and mpirun, or says how to install them.
func findOpenMPI() (*openMPI, error) {
	var m openMPI
	for _, t := range []struct {
		path *string
		name string
	}{{&m.cc, "mpicc"}, {&m.run, "mpirun"}} {
		for _, name := range []string{t.name + ".openmpi", t.name} {
			if p, err := exec.LookPath(name); err == nil {
				*t.path = p
				break
			}
		}
		if *t.path == "" {
			return nil, fmt.Errorf("%s not found (install Debian packages openmpi-bin and libopenmpi-dev)", t.name)
		}
	}
	version, err := exec.Command(m.run, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(version), "Open MPI") && !strings.Contains(string(version), "OpenRTE") {
		return nil, fmt.Errorf("%s is not Open MPI's (install Debian package openmpi-bin): %s", m.run, firstLine(version))
	}
	m.shm = "vader"
	if info, err := exec.Command(filepath.Join(filepath.Dir(m.run), "ompi_info")).Output(); err == nil &&
		!strings.Contains(string(info), "MCA btl: vader") && strings.Contains(string(info), "MCA btl: sm ") {
		m.shm = "sm"
	}
	return &m, nil
}

// build compiles the C source src (named name.c) into dir with flags and libraries.
func (m *openMPI) build(dir, name string, src []byte, flags ...string) (string, error) {
	file := filepath.Join(dir, name+".c")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-o", bin, file}, flags...)
	if out, err := exec.Command(m.cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", m.cc, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// buildPeer finds Open MPI and builds the C program name from src with flags into a new
// temporary folder, for the command cmd. When that fails it says on standard error that cmd
// skips what, and returns a nil *openMPI. cleanup removes the folder.
func buildPeer(cmd, what, name string, src []byte, flags ...string) (mpi *openMPI, bin string, cleanup func()) {
	cleanup = func() {}
	dir, err := os.MkdirTemp("", "orwl-bench-"+name)
	if err == nil {
		cleanup = func() { os.RemoveAll(dir) }
		if mpi, err = findOpenMPI(); err == nil {
			bin, err = mpi.build(dir, name, src, flags...)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: skipping %s: %v\n", cmd, what, err)
		return nil, "", cleanup
	}
	return mpi, bin, cleanup
}

// launch runs bin with args as procs MPI processes whose messages go through the BTL btl
// ("tcp" or m.shm; the ob1 PML, so that no other transport such as UCX stands in), with env
// ("NAME=value") exported to them, and returns what they printed.
func (m *openMPI) launch(procs int, btl string, env []string, bin string, args ...string) (string, error) {
	a := m.args(procs, btl, env, bin, args...)
	out, err := exec.Command(m.run, a...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", m.run, strings.Join(a, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// args returns mpirun's arguments for launch.
func (m *openMPI) args(procs int, btl string, env []string, bin string, args ...string) []string {
	a := []string{"--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", btl + ",self"}
	if procs > runtime.NumCPU() {
		a = append(a, "--oversubscribe")
	}
	if os.Geteuid() == 0 {
		a = append(a, "--allow-run-as-root")
	}
	for _, e := range env {
		a = append(a, "-x", e)
	}
	return append(append(a, "-np", strconv.Itoa(procs), bin), args...)
}

// field returns the value of "name=value" in the output of a reference program.
func field(out, name string) (string, error) {
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s= in the output: %s", name, strings.TrimSpace(out))
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// launchSelf runs this program as procs processes of one ORWL job with the arguments args,
// spec in JSON in the environment variable env, and decodes into res the JSON line that the
// process of task 0 prints.
func launchSelf(procs int, args []string, env string, spec, res any) error {
	js, _ := json.Marshal(spec)
	lines, err := launchSelfLines(procs, args, []string{env + "=" + string(js)})
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(lines[0]), res)
}

// launchSelfLines runs this program as procs processes of one ORWL job with the arguments
// args and the extra environment env, and returns the JSON lines the processes print (at
// least one), in the order they came.
func launchSelfLines(procs int, args []string, env []string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var out, errs bytes.Buffer
	status := orwl.Launch{Procs: procs, Argv: append([]string{exe}, args...), Env: env, Stdout: &out, Stderr: &errs}.Run()
	if status != 0 {
		return nil, fmt.Errorf("orwl job %q failed with status %d:\n%s%s", env, status, out.String(), errs.String())
	}
	var lines []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if _, line, ok := strings.Cut(sc.Text(), "] "); ok && strings.HasPrefix(line, "{") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("orwl job %q printed no result:\n%s%s", env, out.String(), errs.String())
	}
	return lines, nil
}
