package main

import (
	"encoding/json"
	"errors"
	"fmt"
)

// maxMicros bounds a timestamp or a duration, in microseconds: a trace longer than a year
// is a broken one.
const maxMicros = 365 * 24 * 3600 * 1e6

// checkFile checks that data is a Chrome trace whose every event has what it needs: an
// object with a "traceEvents" list of objects, each with a one-letter "ph", a "pid", and,
// but for metadata ('M'), a "tid" and a "ts"; a name but on an end ('E'); timestamps and
// durations from 0 to a year; every begin ('B') ended ('E') on its track, not before it.
// The error is one line naming the first event at fault (its index in the list).
func checkFile(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("not a trace: %w", err)
	}
	if top == nil {
		return errors.New(`not a trace: null, want an object with "traceEvents"`)
	}
	raw, ok := top["traceEvents"]
	if !ok {
		return errors.New(`no "traceEvents": not a trace`)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(raw, &events); err != nil || events == nil {
		return errors.New(`"traceEvents" is not a list of events`)
	}
	open := make(map[[2]int64][]begin) // the begins not ended yet, by track
	for i, r := range events {
		if err := checkEvent(i, r, open); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	first := -1
	var b begin
	for _, stack := range open {
		for _, s := range stack {
			if first < 0 || s.index < first {
				first, b = s.index, s
			}
		}
	}
	if first >= 0 {
		return fmt.Errorf("event %d: a begin (B) of %q without an end (E)", first, b.name)
	}
	return nil
}

// begin is a 'B' event waiting for its end.
type begin struct {
	index int
	name  string
	ts    float64
}

// checkEvent checks event number i and pairs its begins and ends in open.
func checkEvent(i int, raw json.RawMessage, open map[[2]int64][]begin) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return errors.New("not an object")
	}
	var ph, name string
	var pid, tid int64
	var ts, dur float64
	fields := []struct {
		key  string
		to   any
		need bool
	}{
		{"ph", &ph, true}, {"pid", &pid, true}, {"name", &name, false},
		{"tid", &tid, false}, {"ts", &ts, false}, {"dur", &dur, false},
	}
	for _, f := range fields {
		v, ok := m[f.key]
		if !ok {
			if f.need {
				return fmt.Errorf("no %q", f.key)
			}
			continue
		}
		if err := json.Unmarshal(v, f.to); err != nil {
			return fmt.Errorf("%q is %s: %w", f.key, v, err)
		}
	}
	if len(ph) != 1 {
		return fmt.Errorf("phase %q is not one letter", ph)
	}
	if ph == "M" {
		return nil
	}
	for _, key := range []string{"tid", "ts"} {
		if _, ok := m[key]; !ok {
			return fmt.Errorf("no %q", key)
		}
	}
	if _, ok := m["name"]; !ok && ph != "E" {
		return errors.New(`no "name"`)
	}
	if !(ts >= 0 && ts <= maxMicros) {
		return fmt.Errorf("timestamp %v µs: want 0 to %v", ts, float64(maxMicros))
	}
	if !(dur >= 0 && dur <= maxMicros) {
		return fmt.Errorf("duration %v µs: want 0 to %v", dur, float64(maxMicros))
	}
	track := [2]int64{pid, tid}
	switch ph {
	case "B":
		open[track] = append(open[track], begin{index: i, name: name, ts: ts})
	case "E":
		stack := open[track]
		if len(stack) == 0 {
			return fmt.Errorf("an end (E) without a begin (B) on pid %d tid %d", pid, tid)
		}
		b := stack[len(stack)-1]
		open[track] = stack[:len(stack)-1]
		if ts < b.ts {
			return fmt.Errorf("an end (E) at %v before its begin at %v", ts, b.ts)
		}
	}
	return nil
}
