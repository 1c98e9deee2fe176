package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// finishedName is the file that marks the checkpoints of a directory as those of a job that
// finished (MarkFinished).
const finishedName = "FINISHED"

// maxFinishedMark bounds the mark read back: the numbers of a directory's checkpoints, which
// are never more than a few.
const maxFinishedMark = 1 << 20

// finishedMark is the content of a FINISHED file.
type finishedMark struct {
	At          time.Time `json:"at"`          // when the job finished
	Checkpoints []int     `json:"checkpoints"` // the checkpoints the directory held then
}

// MarkFinished records durably (fsync'd) that the job whose checkpoints s holds finished:
// the checkpoints its directory holds now are those of a finished run, which a run of the
// job again does not resume from (Finished), lest it reuse the run's result without
// computing anything. The first checkpoint the directory is written afterwards (by a new
// run, which removes the finished run's checkpoints numbered as high or higher) removes the
// mark.
func (s *Store) MarkFinished() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	es, err := list(s.dir)
	if err != nil {
		return fmt.Errorf("checkpoint: marking %s finished: %w", s.dir, err)
	}
	mark := finishedMark{At: time.Now().UTC(), Checkpoints: []int{}}
	for _, e := range es {
		mark.Checkpoints = append(mark.Checkpoints, e.k)
	}
	slices.Sort(mark.Checkpoints)
	b, _ := json.Marshal(mark)
	if err := writeAtomic(s.dir, finishedName, append(b, '\n')); err != nil {
		return fmt.Errorf("checkpoint: marking %s finished: %w", s.dir, err)
	}
	s.finished = true
	return nil
}

// unmark removes the mark of a finished job from s's directory, durably, before s writes a
// checkpoint of a new run there; s.mu held.
func (s *Store) unmark() error {
	if !s.finished {
		return nil
	}
	err := os.Remove(filepath.Join(s.dir, finishedName))
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the mark of a finished job in %s: %w", s.dir, fsError(err))
	}
	s.finished = false
	return nil
}

// Finished returns, sorted, the checkpoints that dirs hold of a job that finished
// (MarkFinished): a restart does not resume from them. A mark that cannot be read counts
// for every checkpoint of its directory, and a note says so.
func Finished(dirs []string) (ks []int, notes []string) {
	for _, dir := range dirs {
		b, err := readRegular(filepath.Join(dir, finishedName), maxFinishedMark, "a finished job's mark")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		var mark finishedMark
		if err == nil {
			err = json.Unmarshal(b, &mark)
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("the mark of a finished job in %s is unreadable (%v): its checkpoints are taken for a finished job's", dir, err))
			es, _ := list(dir)
			mark.Checkpoints = nil
			for _, e := range es {
				mark.Checkpoints = append(mark.Checkpoints, e.k)
			}
		}
		ks = append(ks, mark.Checkpoints...)
	}
	slices.Sort(ks)
	return slices.Compact(ks), notes
}
