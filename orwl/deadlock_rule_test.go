package orwl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// outOfOrder breaks the discipline (for two tasks) in the other way: each task takes the
// other's block (position 1) before its own (position 0), one after the other, so the grant
// that each waits for is only granted to the other, not acquired.
func outOfOrder(ctx context.Context, task *orwl.Task) error {
	mine := task.WriteInsert(task.Loc(task.ID(), "block"), 0)
	theirs := task.WriteInsert(task.Loc(1-task.ID(), "block"), 1)
	if err := task.Schedule(ctx); err != nil {
		return err
	}
	if err := theirs.Section(ctx, func([]byte) error { return nil }); err != nil {
		return err
	}
	return mine.Section(ctx, func([]byte) error { return nil })
}

// TestDeadlockNamesTheBrokenRule: the two ways of breaking the discipline get different
// messages, each naming the rule it broke and whether the other task holds the grant it
// waits for or was only granted it.
func TestDeadlockNamesTheBrokenRule(t *testing.T) {
	nested := run(t, 2, crossing)
	wantErr(t, nested, orwl.ErrDeadlock,
		`task 0 waits to write task 1 "block" (position 1), held by task 1 (position 0);`,
		`task 1 waits to write task 0 "block" (position 1), held by task 0 (position 0)`,
		`broken rule: sections nest only handles of the same position`,
		`task 0 holds position 0 while it acquires position 1`,
		`task 1 holds position 0 while it acquires position 1`)

	ordered := run(t, 2, outOfOrder)
	wantErr(t, ordered, orwl.ErrDeadlock,
		`task 0 waits to write task 1 "block" (position 1), granted to task 1 (position 0, not yet acquired);`,
		`task 1 waits to write task 0 "block" (position 1), granted to task 0 (position 0, not yet acquired)`,
		`broken rule: a task takes its handles in order of position`,
		`task 0 acquires position 1 before position 0`,
		`task 1 acquires position 1 before position 0`)
	for _, err := range []error{nested, ordered} {
		if err == nil {
			continue
		}
		if strings.Contains(err.Error(), "nest") == strings.Contains(err.Error(), "in order of position") {
			t.Errorf("%q names both rules or neither", err)
		}
	}
	if nested != nil && ordered != nil && nested.Error() == ordered.Error() {
		t.Errorf("both programs get the same message: %q", nested)
	}
}

// A one-shot holder: whether it acquired its grant is not known, so the message says only
// that it was granted; so does the one-shot handle of a task that waits on itself.
func TestDeadlockOneShotHolder(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		w := task.WriteInsertOnce(task.Loc(0, "block"), 0)
		r := task.ReadInsertOnce(task.Loc(0, "block"), 1)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		return w.Section(ctx, func([]byte) error { return r.Section(ctx, func([]byte) error { return nil }) })
	})
	wantErr(t, err, orwl.ErrDeadlock,
		`task 0 waits to read task 0 "block" (position 1), granted to task 0 (position 0)`,
		`task 0 waits for position 1 while granted position 0`)
}
