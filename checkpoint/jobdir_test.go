package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPatternWithoutRankNamesTheJobsDirectory: a pattern without {rank} names the job's
// directory (one per host with {host}); each process keeps its Store in the subdirectory of
// its rank, so that the processes of a job, on one host or on a shared file system, never
// share a Store. Glob finds those subdirectories, and the job's directory itself, where a
// single process kept its checkpoints before.
func TestPatternWithoutRankNamesTheJobsDirectory(t *testing.T) {
	for _, c := range []struct {
		pattern, host, want string
		rank                int
	}{
		{"/c/ck", "n1", "/c/ck/rank-3", 3},
		{"/c/ck/", "n1", "/c/ck/rank-0", 0},
		{"/c/{host}", "n1", "/c/n1/rank-1", 1},
		{"/c/{host}/r{rank}", "n1", "/c/n1/r2", 2},
	} {
		if got := Expand(c.pattern, c.rank, c.host); got != c.want {
			t.Errorf("Expand(%q, %d, %q) = %q, want %q", c.pattern, c.rank, c.host, got, c.want)
		}
	}
	base := t.TempDir()
	for _, d := range []string{"ck/rank-0", "ck/rank-12", "ck/rank-x", "ck/other", "h1/rank-1", "h2/rank-0"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"ck", []string{"ck", "ck/rank-0", "ck/rank-12"}},
		{"{host}", []string{"ck", "ck/rank-0", "ck/rank-12", "h1", "h1/rank-1", "h2", "h2/rank-0"}},
		{"none", nil},
	} {
		got, err := Glob(filepath.Join(base, c.pattern))
		var want []string
		for _, w := range c.want {
			want = append(want, filepath.Join(base, w))
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Glob(%q) = %q, %v, want %q", c.pattern, got, err, want)
		}
	}
}

// TestLockNamesItsHolder: a directory another Store has open is refused with a message
// that names the holder (its process id, host and program), so that the user can find the
// other job.
func TestLockNamesItsHolder(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, testJob)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host, _ := os.Hostname()
	_, err = Create(dir, testJob)
	for _, want := range []string{dir, fmt.Sprintf("pid %d", os.Getpid()), host, testJob.Program, "another job"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("second Create: %v, want an error naming %q", err, want)
		}
	}
	s.Close()
	s2, err := Create(dir, testJob)
	if err != nil {
		t.Fatalf("Create after Close: %v", err)
	}
	s2.Close()
}

// TestFinishedMark: MarkFinished names the checkpoints its directory holds, durably, for
// Finished to find; a Store opened there later (a new run) removes the mark with the first
// checkpoint it writes, after the finished run's later ones; a mark that cannot be read
// counts for every checkpoint of its directory.
func TestFinishedMark(t *testing.T) {
	dir, s := twoCheckpoints(t)
	other := t.TempDir()
	if ks, notes := Finished([]string{dir, other}); len(ks) != 0 || len(notes) != 0 {
		t.Fatalf("Finished before the mark: %v %q", ks, notes)
	}
	if err := s.MarkFinished(); err != nil {
		t.Fatal(err)
	}
	if ks, notes := Finished([]string{dir, other}); !slices.Equal(ks, []int{1, 2}) || len(notes) != 0 {
		t.Fatalf("Finished: %v %q, want checkpoints 1 and 2", ks, notes)
	}
	s.Close()

	if err := os.WriteFile(filepath.Join(dir, finishedName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ks, notes := Finished([]string{dir}); !slices.Equal(ks, []int{1, 2}) || len(notes) != 1 || !strings.Contains(notes[0], dir) {
		t.Fatalf("Finished of an unreadable mark: %v %q, want every checkpoint and a note naming %s", ks, notes, dir)
	}

	again := create(t, dir)
	writeCheckpoint(t, 1, again)
	if ks, _ := Finished([]string{dir}); len(ks) != 0 {
		t.Fatalf("Finished after a new run's checkpoint: %v, want none", ks)
	}
	if _, err := os.Stat(ckptDir(dir, 2)); !os.IsNotExist(err) {
		t.Fatalf("the finished run's checkpoint 2 is still there after the new run's 1: %v", err)
	}
}
