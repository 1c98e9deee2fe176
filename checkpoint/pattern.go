package checkpoint

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The placeholders a directory pattern may hold.
const (
	RankPlaceholder = "{rank}" // the process's rank in the job
	HostPlaceholder = "{host}" // the host's name
)

// Expand returns the directory of the process of rank rank on host host under pattern:
// every {rank} and {host} replaced. A pattern without {rank} names the job's directory (one
// per host with {host}), which the processes of the job share, on one host or on a file
// system that several hosts mount: each process then keeps its checkpoints in the
// subdirectory of its rank, "rank-R" (a Store locks its directory, so two processes never
// share one).
func Expand(pattern string, rank int, host string) string {
	return strings.NewReplacer(RankPlaceholder, strconv.Itoa(rank), HostPlaceholder, host).Replace(perProcess(pattern))
}

// perProcess returns pattern when it holds {rank}, else the pattern of the subdirectories
// of its directories named by rank.
func perProcess(pattern string) string {
	if strings.Contains(pattern, RankPlaceholder) {
		return pattern
	}
	return filepath.Join(pattern, "rank-"+RankPlaceholder)
}

// placeholders splits a pattern around its placeholders.
var placeholders = regexp.MustCompile(`\{rank\}|\{host\}`)

// Glob returns, sorted, the existing directories that pattern may have produced for any
// rank and host (Expand): those a restart on any number of processes searches. {rank}
// matches a decimal number, {host} a non-empty name without '/'; the rest of the pattern is
// literal (glob characters in it match themselves). For a pattern without {rank}, the job's
// directories themselves are among them, where a job of one process kept its checkpoints
// before they went to its subdirectory.
func Glob(pattern string) ([]string, error) {
	dirs, err := match(perProcess(pattern))
	if err != nil || strings.Contains(pattern, RankPlaceholder) {
		return dirs, err
	}
	own, err := match(pattern)
	if err != nil {
		return nil, err
	}
	dirs = append(dirs, own...)
	slices.Sort(dirs)
	return dirs, nil
}

// match returns, sorted, the existing directories pattern matches, its placeholders
// matching as Glob says.
func match(pattern string) ([]string, error) {
	pattern = filepath.Clean(pattern)
	var glob, re strings.Builder
	re.WriteString("^")
	last := 0
	for _, m := range placeholders.FindAllStringIndex(pattern, -1) {
		lit := pattern[last:m[0]]
		glob.WriteString(escapeGlob(lit))
		glob.WriteString("*")
		re.WriteString(regexp.QuoteMeta(lit))
		if pattern[m[0]:m[1]] == RankPlaceholder {
			re.WriteString("[0-9]+")
		} else {
			re.WriteString("[^/]+")
		}
		last = m[1]
	}
	glob.WriteString(escapeGlob(pattern[last:]))
	re.WriteString(regexp.QuoteMeta(pattern[last:]) + "$")
	matches, err := filepath.Glob(glob.String())
	if err != nil {
		return nil, err
	}
	exact := regexp.MustCompile(re.String())
	dirs := matches[:0]
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() && exact.MatchString(m) {
			dirs = append(dirs, m)
		}
	}
	slices.Sort(dirs)
	return dirs, nil
}

// escapeGlob makes every character of s match itself in filepath.Glob.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
