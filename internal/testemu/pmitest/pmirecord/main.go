// Command pmirecord runs a program with its PMI connection relayed through it and recorded,
// to make the recordings that internal/pmi's tests replay:
//
//	srun --mpi=pmi2 -n 3 pmirecord DIR PROGRAM [ARGS...]
//	mpiexec.hydra -n 3 pmirecord DIR PROGRAM [ARGS...]
//
// The program inherits one end of a new socket pair as its PMI_FD; pmirecord relays it to
// the launcher's PMI_FD and writes what crossed, in pmitest.Script's text form, to
// DIR/rank<R>.txt (R from PMI_RANK, else SLURM_PROCID). Its exit status is the program's.
// It is a tool for refreshing test data, not part of a job.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/orwl-go/orwl/internal/testemu/pmitest"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: pmirecord DIR PROGRAM [ARGS...]")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(dir string, argv []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "pmirecord:", err)
		return 1
	}
	fd, err := strconv.Atoi(os.Getenv("PMI_FD"))
	if err != nil {
		return fail(fmt.Errorf("PMI_FD=%q: not started by a launcher that hands down a PMI socket", os.Getenv("PMI_FD")))
	}
	rank := os.Getenv("PMI_RANK")
	if rank == "" {
		rank = os.Getenv("SLURM_PROCID")
	}
	launcherFile := os.NewFile(uintptr(fd), "PMI_FD")
	launcher, err := net.FileConn(launcherFile)
	launcherFile.Close()
	if err != nil {
		return fail(fmt.Errorf("PMI_FD=%d: %w", fd, err))
	}
	mine, child, err := pmitest.Pair()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{child}
	cmd.Env = append(os.Environ(), "PMI_FD=3")
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	child.Close()
	var rec pmitest.Recorder
	relayed := make(chan struct{})
	go func() {
		rec.Relay(mine, launcher)
		close(relayed)
	}()
	err = cmd.Wait()
	mine.Close() // ends the relay if the program left its end open in a child
	launcher.Close()
	<-relayed
	f, ferr := os.Create(filepath.Join(dir, "rank"+rank+".txt"))
	if ferr == nil {
		_, ferr = rec.Script().WriteTo(f)
		if cerr := f.Close(); ferr == nil {
			ferr = cerr
		}
	}
	if ferr != nil {
		fmt.Fprintln(os.Stderr, "pmirecord:", ferr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil || ferr != nil {
		return fail(err)
	}
	return 0
}
