package orwl

import (
	"runtime"
	"testing"

	"github.com/orwl-go/orwl/internal/jobenv"
)

// A job oversubscribes its host when the schedulers of its processes there (GOMAXPROCS
// each) outnumber the cores, or when the launcher does not say how many share it.
func TestJobOversubscribed(t *testing.T) {
	cores, procs := runtime.NumCPU(), runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		local int
		want  bool
	}{
		{0, true},
		{1, procs > cores},
		{cores/procs + 1, true},
	} {
		j := &job{info: jobenv.Job{LocalSize: c.local}}
		if got := j.oversubscribed(); got != c.want {
			t.Errorf("%d local processes of %d schedulers on %d cores: oversubscribed = %v, want %v", c.local, procs, cores, got, c.want)
		}
	}
}
