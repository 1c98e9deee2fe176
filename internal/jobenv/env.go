package jobenv

import (
	"fmt"
	"strconv"
	"strings"
)

// envReader reads the variables of a launcher's environment through a LookupFunc.
type envReader struct{ lookup LookupFunc }

func (e envReader) has(v string) bool {
	_, ok := e.lookup(v)
	return ok
}

// firstSet returns the name of the first of vars that is set, or "".
func (e envReader) firstSet(vars ...string) string {
	for _, v := range vars {
		if e.has(v) {
			return v
		}
	}
	return ""
}

// first returns the value of the first of vars that is set and not empty,
// or "".
func (e envReader) first(vars ...string) string {
	for _, v := range vars {
		if s, ok := e.lookup(v); ok && s != "" {
			return s
		}
	}
	return ""
}

// int returns the integer value of v, whether it is set, and an error
// naming v when it is set but not an integer.
func (e envReader) int(v string) (int, bool, error) {
	s, ok := e.lookup(v)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, true, fmt.Errorf("jobenv: %s=%q: not an integer", v, s)
	}
	return n, true, nil
}

func (e envReader) rankSize(rankVar, sizeVar string) (int, int, error) {
	rank, ok, err := e.int(rankVar)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("jobenv: %s is set but %s is not", sizeVar, rankVar)
	}
	size, ok, err := e.int(sizeVar)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("jobenv: %s is set but %s is not", rankVar, sizeVar)
	}
	return rank, size, check(rank, size, rankVar, sizeVar)
}

// check reports a rank or size out of range, naming the variables they come from.
func check(rank, size int, rankVar, sizeVar string) error {
	if size < 1 {
		return fmt.Errorf("jobenv: %s=%d: the job size must be at least 1", sizeVar, size)
	}
	if rank < 0 || rank >= size {
		return fmt.Errorf("jobenv: %s=%d must be in [0, %s=%d)", rankVar, rank, sizeVar, size)
	}
	return nil
}
