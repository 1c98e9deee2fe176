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

// Expand returns the directory pattern names for the process of rank rank on host host:
// every {rank} and {host} replaced. Each process of a job must get a directory of its own
// (a Store locks its directory), so a pattern shared by several processes of one host holds
// {rank}.
func Expand(pattern string, rank int, host string) string {
	return strings.NewReplacer(RankPlaceholder, strconv.Itoa(rank), HostPlaceholder, host).Replace(pattern)
}

// placeholders splits a pattern around its placeholders.
var placeholders = regexp.MustCompile(`\{rank\}|\{host\}`)

// Glob returns, sorted, the existing directories that pattern may have produced for any
// rank and host: those a restart on any number of processes searches. {rank} matches a
// decimal number, {host} a non-empty name without '/'; the rest of the pattern is literal
// (glob characters in it match themselves). A pattern without placeholders yields itself,
// cleaned, when it is a directory.
func Glob(pattern string) ([]string, error) {
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
