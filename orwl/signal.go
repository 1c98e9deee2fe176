package orwl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/orwl-go/orwl/internal/jobenv"
)

// sigtermWatch turns a SIGTERM into the failure of the job while Run runs (stopOnSIGTERM).
type sigtermWatch struct {
	j      *job
	sigs   chan os.Signal
	done   chan struct{} // closed by end
	exited chan struct{} // closed when the watching goroutine is gone
	err    error         // the signal's error, once it came; read after exited
}

// stopOnSIGTERM makes a SIGTERM fail the job of a process that a launcher started (orwlrun,
// mpirun, srun, Kubernetes), as the end of Run's context would: launchers stop processes
// this way, and Run then returns an error that names the signal and wraps
// context.Canceled (see end), so that the program's own error path runs instead of the
// process dying at once. A process started alone, placed by Config.Job, or that ignores
// SIGTERM keeps its handling: stopOnSIGTERM then returns nil.
func (j *job) stopOnSIGTERM() *sigtermWatch {
	switch j.info.Source {
	case jobenv.SourceSingle, jobenv.SourceExplicit, "":
		return nil
	}
	if signal.Ignored(syscall.SIGTERM) {
		return nil
	}
	w := &sigtermWatch{j: j, sigs: make(chan os.Signal, 1), done: make(chan struct{}), exited: make(chan struct{})}
	signal.Notify(w.sigs, syscall.SIGTERM)
	go func() {
		defer close(w.exited)
		select {
		case <-w.sigs:
			w.err = w.sigErr()
			j.fail(w.err)
		case <-w.done:
		}
	}()
	return w
}

func (w *sigtermWatch) sigErr() error {
	return fmt.Errorf("orwl: rank %d stopped by SIGTERM (from its launcher, %s): %w",
		w.j.rank, w.j.info.Source, context.Canceled)
}

// end restores the handling of SIGTERM that the process had (once; later calls only
// return err) and returns err, Run's result, unless a SIGTERM came and err does not say
// so (another process's failure came first): then the signal's error, wrapping err too.
// A nil w returns err.
func (w *sigtermWatch) end(err error) error {
	if w == nil {
		return err
	}
	select {
	case <-w.done:
	default:
		signal.Stop(w.sigs)
		close(w.done)
		<-w.exited
		if w.err == nil && len(w.sigs) > 0 { // it came as the watch ended
			<-w.sigs
			w.err = w.sigErr()
		}
	}
	switch {
	case w.err == nil || errors.Is(err, context.Canceled):
		return err
	case err == nil:
		return w.err
	}
	return fmt.Errorf("%w (the job had failed: %w)", w.err, err)
}
