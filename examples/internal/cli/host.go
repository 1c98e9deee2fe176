// What the example commands need of their host: the -kernel flag, the memory available,
// their processes started here, the progress line.

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// OneLine keeps an error message on one line.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ParseKernels turns -kernel into one kernel name per task of a job of tasks tasks (a
// kernel name, "cpu", "auto", or a mix such as "cublas:1,openblas": kernels.ParseMix),
// checking that each is known and available here, and returns the spec as a result line
// prints it, with "cpu" and "auto" resolved. A mistake is an error that names -kernel.
func ParseKernels(spec string, tasks int) ([]string, string, error) {
	mix, err := kernels.ParseMix(spec, tasks)
	if err != nil {
		return nil, "", fmt.Errorf("-kernel: %v", err)
	}
	for i := range mix {
		if mix[i].Name, err = resolveKernel(mix[i].Name); err != nil {
			return nil, "", err
		}
	}
	return kernels.TaskKernels(mix), kernels.FormatMix(mix), nil
}

// resolveKernel checks one kernel name ("cpu" and "auto" are resolved to a plugin name).
func resolveKernel(name string) (string, error) {
	switch name {
	case "cpu":
		if cpu := kernels.AvailableOn(kernels.CPU); len(cpu) > 0 {
			return cpu[0], nil
		}
		return "", fmt.Errorf("-kernel cpu: no CPU kernel is available")
	case kernels.Auto:
		avail := kernels.Available()
		if len(avail) == 0 {
			return "", fmt.Errorf("-kernel auto: no kernel is available")
		}
		return avail[0], nil
	}
	g, err := kernels.Get(name)
	switch {
	case errors.Is(err, kernels.ErrUnknown):
		var known []string
		for _, p := range kernels.Registered() {
			known = append(known, p.Name)
		}
		return "", fmt.Errorf("-kernel: unknown kernel %q (known: cpu, auto, %s)", name, strings.Join(known, ", "))
	case err != nil:
		return "", fmt.Errorf("-kernel: %s is not available here: %s", name, strings.TrimPrefix(err.Error(), kernels.ErrUnavailable.Error()+": "))
	}
	if c, ok := g.(io.Closer); ok {
		c.Close()
	}
	return name, nil
}

// AvailableMemory returns the memory this host can give without swapping (Linux's
// MemAvailable), in bytes, or 0 when it cannot tell.
func AvailableMemory() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// StartProcesses runs this program with args as procs local processes of one job, the
// process of task 0 printing on stdout, and returns the exit status to use. Interrupts are
// passed on to the processes. name prefixes an error.
func StartProcesses(name string, procs int, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return orwl.Launch{
		Procs:       procs,
		Argv:        append([]string{exe}, args...),
		Stdout:      stdout,
		PlainStdout: true, // only the process of task 0 prints there
		Stderr:      stderr,
		Signals:     sigs,
	}.Run()
}

// Progress prints task 0's progress once a second on long runs. Its zero value with W set
// is ready; Update may be called from any goroutine.
type Progress struct {
	W           io.Writer
	mu          sync.Mutex
	done, total int
}

// Update records that done of total steps are done.
func (p *Progress) Update(done, total int) {
	p.mu.Lock()
	p.done, p.total = done, total
	p.mu.Unlock()
}

// Start prints a line every second while steps remain; the returned function stops it.
func (p *Progress) Start() func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.mu.Lock()
				done, total := p.done, p.total
				p.mu.Unlock()
				if total > 0 && done < total {
					fmt.Fprintf(p.W, "progress: step %d/%d (%.0f%%) after %.1fs\n", done, total, 100*float64(done)/float64(total), time.Since(begin).Seconds())
				}
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}
