package kernels

import (
	"strings"
	"testing"
)

func TestParseMix(t *testing.T) {
	for _, c := range []struct {
		spec   string
		tasks  int
		names  string
		format string
	}{
		{"gonum", 3, "gonum gonum gonum", "gonum"},
		{"gonum:2", 2, "gonum gonum", "gonum"},
		{"cublas:1,openblas", 4, "cublas openblas openblas openblas", "cublas:1,openblas"},
		{"a, b:2", 3, "a b b", "a,b:2"},
		{"a:1,b:2", 3, "a b b", "a:1,b:2"},
	} {
		mix, err := ParseMix(c.spec, c.tasks)
		if err != nil {
			t.Fatalf("ParseMix(%q, %d): %v", c.spec, c.tasks, err)
		}
		if got := strings.Join(TaskKernels(mix), " "); got != c.names {
			t.Errorf("ParseMix(%q, %d): tasks %q, want %q", c.spec, c.tasks, got, c.names)
		}
		if got := FormatMix(mix); got != c.format {
			t.Errorf("FormatMix(ParseMix(%q)) = %q, want %q", c.spec, got, c.format)
		}
	}
	for _, c := range []struct {
		spec  string
		tasks int
		want  string
	}{
		{"a:1,b:1", 3, "assigns 2 tasks; the job has 3"},
		{"a,b", 3, "only one entry may leave out"},
		{"a:2,b", 2, "assigns 2 tasks before the rest"},
		{"a:0,b", 2, `"0" is not a task count`},
		{"a:x", 1, `"x" is not a task count`},
		{"a,,b:1", 3, "entry 2 has no kernel name"},
	} {
		_, err := ParseMix(c.spec, c.tasks)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.spec) {
			t.Errorf("ParseMix(%q, %d) = %v, want an error naming the spec and %q", c.spec, c.tasks, err, c.want)
		}
	}
}
