package kernels

import (
	"fmt"
	"strconv"
	"strings"
)

// MixEntry is one entry of a kernel mix: Tasks tasks on the kernel named Name.
type MixEntry struct {
	Name  string
	Tasks int
	Rest  bool // the entry gave no count and took the tasks the others left
}

// ParseMix parses a kernel mix for a job of tasks tasks, such as "cublas:1,openblas":
// comma-separated entries "name:count" (count >= 1) or "name", of which at most one may
// leave out its count and then takes the tasks the others leave. The counts must add up
// to tasks (a single entry without a count takes them all). Names are not checked
// against the registry. Errors name the spec and what is wrong with it.
func ParseMix(spec string, tasks int) ([]MixEntry, error) {
	var mix []MixEntry
	rest, fixed := -1, 0
	for i, part := range strings.Split(spec, ",") {
		name, count, hasCount := strings.Cut(strings.TrimSpace(part), ":")
		if name == "" {
			return nil, fmt.Errorf("kernel mix %q: entry %d has no kernel name", spec, i+1)
		}
		e := MixEntry{Name: name}
		if hasCount {
			c, err := strconv.Atoi(count)
			if err != nil || c < 1 {
				return nil, fmt.Errorf("kernel mix %q: %q is not a task count >= 1", spec, count)
			}
			e.Tasks = c
			fixed += c
		} else {
			if rest >= 0 {
				return nil, fmt.Errorf("kernel mix %q: only one entry may leave out its task count", spec)
			}
			rest = i
		}
		mix = append(mix, e)
	}
	switch {
	case rest < 0 && fixed != tasks:
		return nil, fmt.Errorf("kernel mix %q assigns %d tasks; the job has %d", spec, fixed, tasks)
	case rest >= 0 && fixed >= tasks && len(mix) > 1:
		return nil, fmt.Errorf("kernel mix %q assigns %d tasks before the rest; the job has %d", spec, fixed, tasks)
	case rest >= 0:
		mix[rest].Tasks, mix[rest].Rest = tasks-fixed, true
	}
	return mix, nil
}

// TaskKernels returns the kernel name of every task of a mix, tasks assigned in entry order.
func TaskKernels(mix []MixEntry) []string {
	var names []string
	for _, e := range mix {
		for range e.Tasks {
			names = append(names, e.Name)
		}
	}
	return names
}

// FormatMix writes mix as ParseMix reads it: the name alone for a single entry, else
// "name:count" entries and the name alone for the entry that took the rest.
func FormatMix(mix []MixEntry) string {
	if len(mix) == 1 {
		return mix[0].Name
	}
	parts := make([]string, len(mix))
	for i, e := range mix {
		parts[i] = e.Name
		if !e.Rest {
			parts[i] += ":" + strconv.Itoa(e.Tasks)
		}
	}
	return strings.Join(parts, ",")
}
