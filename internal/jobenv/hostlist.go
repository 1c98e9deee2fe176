package jobenv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errHostlist is wrapped by every hostlist syntax error.
var errHostlist = errors.New("malformed host list")

// maxHosts bounds the expansion of a host list.
const maxHosts = 1 << 20

// ExpandHostlist expands a SLURM compressed host list such as
// "node[01-04,07],gpu[1-2]" into host names, in order: ranges keep the
// zero padding of their lower bound, several bracket groups in one name
// multiply ("r[1-2]n[1-2]" gives r1n1 r1n2 r2n1 r2n2), and surrounding
// spaces are ignored. An empty list gives no hosts.
func ExpandHostlist(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, item := range splitTop(s) {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%w: empty host name", errHostlist)
		}
		var err error
		if out, err = expandOne(out, "", item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitTop splits s at commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandOne appends prefix+expansions of item to out.
func expandOne(out []string, prefix, item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.IndexByte(item, ']') >= 0 {
			return nil, fmt.Errorf("%w: unbalanced ']' in %q", errHostlist, item)
		}
		if len(out) >= maxHosts {
			return nil, fmt.Errorf("%w: more than %d hosts", errHostlist, maxHosts)
		}
		return append(out, prefix+item), nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%w: unbalanced '[' in %q", errHostlist, item)
	}
	end += open
	head, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.IndexByte(head, ']') >= 0 || strings.IndexByte(body, '[') >= 0 {
		return nil, fmt.Errorf("%w: misplaced bracket in %q", errHostlist, item)
	}
	if body == "" {
		return nil, fmt.Errorf("%w: empty brackets in %q", errHostlist, item)
	}
	for _, r := range strings.Split(body, ",") {
		r = strings.TrimSpace(r)
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b, err2 := strconv.ParseUint(hi, 10, 32)
		if lo == "" || hi == "" || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: bad range %q in %q", errHostlist, r, item)
		}
		if a > b {
			return nil, fmt.Errorf("%w: range %q in %q goes down", errHostlist, r, item)
		}
		if b-a >= maxHosts {
			return nil, fmt.Errorf("%w: more than %d hosts", errHostlist, maxHosts)
		}
		for n := a; n <= b; n++ {
			num := strconv.FormatUint(n, 10)
			if pad := len(lo) - len(num); pad > 0 {
				num = strings.Repeat("0", pad) + num
			}
			var err error
			if out, err = expandOne(out, prefix+head+num, rest); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
