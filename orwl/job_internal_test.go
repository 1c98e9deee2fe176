package orwl

import (
	"runtime"
	"testing"

	"github.com/orwl-go/orwl/internal/jobenv"
)

// A job oversubscribes its host when its processes there outnumber the cores, or when the
// launcher does not say how many share it; its processes have many schedulers when they do
// not, but their schedulers there (GOMAXPROCS each) outnumber the cores.
func TestJobOversubscribed(t *testing.T) {
	cores, procs := runtime.NumCPU(), runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		local      int
		over, many bool
	}{
		{0, true, false},
		{1, false, procs > cores},
		{cores/procs + 1, cores/procs+1 > cores, cores/procs+1 <= cores},
		{cores + 1, true, false},
	} {
		j := &job{info: jobenv.Job{LocalSize: c.local}}
		if over, many := j.oversubscribed(), j.manySchedulers(); over != c.over || many != c.many {
			t.Errorf("%d local processes of %d schedulers on %d cores: oversubscribed %v, many schedulers %v, want %v and %v", c.local, procs, cores, over, many, c.over, c.many)
		}
	}
}
