// Package killjob runs a test binary's program as a job under a launcher, kills some of
// its processes once a checkpoint is complete, and reports how the job ended: the harness
// of the examples' restart tests. The processes of the job are the test binary itself,
// started again as a child that runs the example's main (the test's TestMain decides); each
// child calls WritePid, so that a test can kill the process of a given rank and attempt.
package killjob

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PidsEnv names the directory where a child process writes its process id, in a file named
// RANK.ATTEMPT.
const PidsEnv = "KILLJOB_PIDS"

// WritePid writes this process's id where PidsEnv says, if it says; the rank is the one
// orwlrun, Open MPI's mpirun or srun gives, the attempt orwlrun's.
func WritePid() {
	if dir := os.Getenv(PidsEnv); dir != "" {
		rank := os.Getenv("ORWL_RANK") + os.Getenv("OMPI_COMM_WORLD_RANK") + os.Getenv("SLURM_PROCID")
		name := filepath.Join(dir, rank+"."+os.Getenv("ORWL_ATTEMPT"))
		os.WriteFile(name, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
}

// Kill kills (SIGKILL) the processes of attempt 0 of ranks, whose ids are in dir.
func Kill(dir string, ranks []int) error {
	for _, r := range ranks {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(r)+".0"))
		if err != nil {
			return err
		}
		pid, _ := strconv.Atoi(string(b))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("killing rank %d (pid %d): %w", r, pid, err)
		}
	}
	return nil
}

// Job says what to kill in a run: after the After-th line of the job's output saying
// "checkpoint complete", at a random moment within 50ms, the processes of attempt 0 of the
// ranks in Kill, whose ids are in Pids.
type Job struct {
	Pids  string
	After int
	Kill  []int
}

// Run runs argv (a launcher and its arguments, then the program) with the environment and
// env, for at most two minutes, its standard output and error together, kills as j says,
// and returns the exit status and the output; err says why the job could not be run as
// asked: it did not end in time, the checkpoints to wait for were not complete, or a kill
// failed.
func (j Job) Run(argv []string, env ...string) (status int, out string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), env...), PidsEnv+"="+j.Pids)
	pipe, err := StartPiped(cmd)
	if err != nil {
		return 0, "", err
	}
	var text strings.Builder
	killed := make(chan error, 1)
	kill, complete := j.Kill, 0
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		text.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "checkpoint complete") {
			complete++
		}
		if len(kill) > 0 && complete >= j.After {
			ranks := kill
			kill = nil
			time.AfterFunc(rand.N(50*time.Millisecond), func() { killed <- Kill(j.Pids, ranks) })
		}
	}
	waitErr := cmd.Wait()
	status, out = cmd.ProcessState.ExitCode(), text.String()
	switch {
	case ctx.Err() != nil:
		return status, out, fmt.Errorf("%s did not end within 2 minutes", argv[0])
	case kill != nil:
		return status, out, fmt.Errorf("fewer than %d checkpoints were complete (status %d, %v)", j.After, status, waitErr)
	}
	select {
	case err := <-killed:
		return status, out, err
	default:
	}
	return status, out, nil
}

// StartPiped starts cmd, its standard output and error going to the pipe it returns.
func StartPiped(cmd *exec.Cmd) (io.Reader, error) {
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	return pipe, cmd.Start()
}

// Orwlrun builds cmd/orwlrun once (Build) and returns its path.
var Orwlrun = sync.OnceValues(func() (string, error) { return Build("github.com/orwl-go/orwl/cmd/orwlrun", "orwlrun") })

// Build builds the package pkg as name into the test binary's build folder, which Cleanup
// removes, and returns its path; the error says why it could not (no go command, a failed
// build).
func Build(pkg, name string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build %s: %w", name, err)
	}
	buildOnce.Do(func() { buildDir, buildErr = os.MkdirTemp("", "killjob-") })
	if buildErr != nil {
		return "", buildErr
	}
	bin := filepath.Join(buildDir, name)
	if out, err := exec.Command(gobin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// The build folder of Build.
var (
	buildDir  string
	buildErr  error
	buildOnce sync.Once
)

// Cleanup removes what Build built; TestMain calls it after the tests.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
