package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Fingerprint identifies a job: a checkpoint restarts only the job that wrote it.
type Fingerprint struct {
	Program   string   `json:"program"`   // the program's name
	Tasks     int      `json:"tasks"`     // tasks in the whole job
	Locations []string `json:"locations"` // names of the locations every task owns, in order
	// Sizes[t][i] is the size in bytes of task t's location Locations[i] as the job
	// declares it (before Schedule); nil when the job does not say.
	Sizes [][]int64 `json:"sizes,omitempty"`
	// Params are the parameters the program declares (problem size, iterations...).
	Params map[string]string `json:"params,omitempty"`
}

// Diff names the first difference between f, a checkpoint's fingerprint, and job, the
// fingerprint of the job that would use it ("tasks 4, this job 3"), or returns "" when they
// are the same job. Fields are compared in the order program, tasks, locations, sizes,
// parameters (by name).
func (f Fingerprint) Diff(job Fingerprint) string {
	switch {
	case f.Program != job.Program:
		return fmt.Sprintf("program %q, this job %q", f.Program, job.Program)
	case f.Tasks != job.Tasks:
		return fmt.Sprintf("tasks %d, this job %d", f.Tasks, job.Tasks)
	case !slices.Equal(f.Locations, job.Locations):
		return fmt.Sprintf("locations %s, this job %s", quoteList(f.Locations), quoteList(job.Locations))
	}
	if d := diffSizes(f, job); d != "" {
		return d
	}
	return diffParams(f.Params, job.Params)
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// diffSizes compares the sizes of two fingerprints with the same tasks and locations.
func diffSizes(f, job Fingerprint) string {
	if len(f.Sizes) != len(job.Sizes) {
		return fmt.Sprintf("sizes of %d tasks, this job %d", len(f.Sizes), len(job.Sizes))
	}
	for t := range f.Sizes {
		a, b := f.Sizes[t], job.Sizes[t]
		for i := range max(len(a), len(b)) {
			name := fmt.Sprintf("location %d", i)
			if i < len(f.Locations) {
				name = fmt.Sprintf("%q", f.Locations[i])
			}
			switch {
			case i >= len(a):
				return fmt.Sprintf("task %d %s: no size, this job %d", t, name, b[i])
			case i >= len(b):
				return fmt.Sprintf("task %d %s: size %d, this job none", t, name, a[i])
			case a[i] != b[i]:
				return fmt.Sprintf("task %d %s: size %d, this job %d", t, name, a[i], b[i])
			}
		}
	}
	return ""
}

// diffParams names the first parameter, by name, that differs.
func diffParams(a, b map[string]string) string {
	names := make([]string, 0, len(a)+len(b))
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		va, ina := a[n]
		vb, inb := b[n]
		switch {
		case !ina:
			return fmt.Sprintf("no parameter %s, this job %s=%s", n, n, vb)
		case !inb:
			return fmt.Sprintf("parameter %s=%s, this job none", n, va)
		case va != vb:
			return fmt.Sprintf("parameter %s=%s, this job %s=%s", n, va, n, vb)
		}
	}
	return ""
}

// ErrOtherJob is matched (errors.Is) by a MismatchError.
var ErrOtherJob = errors.New("checkpoint of another job")

// MismatchError says that a directory holds a checkpoint of another job. Such a directory
// is neither used nor erased.
type MismatchError struct {
	Dir        string // the directory
	Checkpoint int    // the checkpoint's number
	Diff       string // the first difference, as Fingerprint.Diff names it
}

// Error returns, e.g., "checkpoint 3 in /ckpt/0 is of another job: tasks 4, this job 3".
func (e *MismatchError) Error() string {
	return fmt.Sprintf("checkpoint %d in %s is of another job: %s", e.Checkpoint, e.Dir, e.Diff)
}

// Is reports whether target is ErrOtherJob.
func (e *MismatchError) Is(target error) bool { return target == ErrOtherJob }
