package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The remote hand-off as a user program makes it: examples/handoff under cmd/orwlrun -np 2,
// task 1 in the other process reading task 0's 8-byte location or writing it, beside Open
// MPI's shared-memory ping-pong of 8 bytes, all in the same run: every round runs the
// three one after the other, so that a change of the machine's state (another program, a
// VM's neighbours) reaches all three, and each keeps its best round.

// handoffModes are the example's modes, in the order of a round and of the rows.
var handoffModes = []string{"read", "write"}

// handoffFigures are nanoseconds per round trip, the best of the rounds: the example's, by
// mode, and the MPI ping-pong's (0 when Open MPI is missing).
type handoffFigures struct {
	orwl map[string]float64
	mpi  float64
}

// measureHandoff builds cmd/orwlrun and examples/handoff (from the checkout around the
// working directory) and the MPI ping-pong into a temporary folder, and runs rounds rounds
// of iters round trips of each mode and of the ping-pong.
func measureHandoff(iters, rounds int) (handoffFigures, error) {
	f := handoffFigures{orwl: map[string]float64{}}
	dir, err := os.MkdirTemp("", "orwl-bench-handoff")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	bins, err := goBuild(dir, "cmd/orwlrun", "examples/handoff")
	if err != nil {
		return f, err
	}
	pp, mpi, cleanup := buildPingPong("figures")
	defer cleanup()
	best := func(old, ns float64) float64 {
		if old == 0 || ns < old {
			return ns
		}
		return old
	}
	for range rounds {
		for _, mode := range handoffModes {
			ns, err := runHandoff(bins[0], bins[1], mode, iters)
			if err != nil {
				return f, err
			}
			f.orwl[mode] = best(f.orwl[mode], ns)
		}
		if mpi {
			ns, err := pp.roundTrip(iters, 1)
			if err != nil {
				return f, fmt.Errorf("the MPI ping-pong: %w", err)
			}
			f.mpi = best(f.mpi, ns)
		}
	}
	return f, nil
}

// runHandoff runs orwlrun -np 2 handoff -mode mode -iters iters (and as many rounds of
// warm-up, not timed) and returns its nanoseconds per round trip; a run that fails or does
// not verify is an error that says so, with its output.
func runHandoff(orwlrun, handoff, mode string, iters int) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-np", "2", "-label=false", handoff, "-mode", mode, "-iters", strconv.Itoa(iters), "-warmup", strconv.Itoa(iters), "-json"}
	cmd := exec.CommandContext(ctx, orwlrun, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	what := "orwlrun " + strings.Join(args, " ")
	if err != nil {
		return 0, fmt.Errorf("%s: %v: %s", what, err, strings.TrimSpace(stderr.String()+string(out)))
	}
	return parseHandoff(what, out)
}

// parseHandoff reads the JSON result of examples/handoff, the last line of out, and
// returns its round-trip-ns; a result that did not verify is an error naming what.
func parseHandoff(what string, out []byte) (float64, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r struct {
		RoundTripNs float64 `json:"round-trip-ns"`
		Verified    *bool   `json:"verified"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return 0, fmt.Errorf("%s: no JSON result (%v): %s", what, err, strings.TrimSpace(string(out)))
	}
	if r.Verified == nil || !*r.Verified || r.RoundTripNs <= 0 {
		return 0, fmt.Errorf("%s: the result did not verify: %s", what, lines[len(lines)-1])
	}
	return r.RoundTripNs, nil
}

// rows writes the table rows of f: one per mode, beside the MPI ping-pong when measured.
func (f handoffFigures) rows(b *strings.Builder) {
	for _, mode := range handoffModes {
		ns := f.orwl[mode]
		if ns == 0 {
			continue
		}
		what := "remote hand-off of 8 bytes, user program under orwlrun, remote " + mode
		if f.mpi == 0 {
			fmt.Fprintf(b, "| %s | %s | | |\n", what, nanos(ns))
			continue
		}
		fmt.Fprintf(b, "| %s | %s | Open MPI shared-memory ping-pong: %s | %.2fx |\n", what, nanos(ns), nanos(f.mpi), ns/f.mpi)
	}
}
