package orwl

import (
	"math"
	"testing"
)

// TestNextCheckpointFollowsTheResumedOne: a checkpoint prepared after a restart from
// checkpoint 40, before any task entered an iteration (a process reports the bound 0), must
// be numbered past 40: writing a piece of a lower number would make the Store remove
// checkpoints 40 and 38, the job's only complete ones, and the checkpoint's kept states,
// copied when a task enters its iteration, would never come.
func TestNextCheckpointFollowsTheResumedOne(t *testing.T) {
	for _, c := range []struct {
		reports []ckptReply
		start   int
		k       int64
		ok      bool
	}{
		{[]ckptReply{{bound: 0, minIt: 100}, {bound: 0, minIt: 100}}, 40, 41, true},
		{[]ckptReply{{bound: 45, minIt: 100}, {bound: 43, minIt: 100}}, 40, 47, true},
		{[]ckptReply{{bound: 5, minIt: 100}}, 0, 7, true},
		{[]ckptReply{{bound: 98, minIt: 100}}, 0, 100, false},                      // the job ends first
		{[]ckptReply{{bound: 0, minIt: math.MaxInt64}}, 0, 2, false},               // no Iterate
		{[]ckptReply{{bound: 0, minIt: 41}, {bound: 0, minIt: 50}}, 40, 41, false}, // past the end
	} {
		k, ok := nextCheckpoint(c.reports, c.start)
		if k != c.k || ok != c.ok {
			t.Errorf("reports %+v after resuming at %d: checkpoint %d %v, want %d %v", c.reports, c.start, k, ok, c.k, c.ok)
		}
	}
}
