package orwl_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// TestTraceSummaryIsATable: without Config.TraceSummary, a traced job prints its summary to
// standard error as the table it is, one line per task, not as one log record with its
// newlines escaped.
func TestTraceSummaryIsATable(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = stderr }()
	printed := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); printed <- b }()

	var logged bytes.Buffer
	file := filepath.Join(t.TempDir(), "job.json")
	err = orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}, Trace: file,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))},
		func(ctx context.Context, task *orwl.Task) error {
			h := task.WriteInsert(task.Loc(0, "x"), task.ID())
			if err := task.Schedule(ctx); err != nil {
				return err
			}
			return h.Section(ctx, func([]byte) error { return nil })
		})
	os.Stderr = stderr
	w.Close()
	out := string(<-printed)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logged.String(), `\n`) {
		t.Errorf("the logger got an escaped multi-line record:\n%s", logged.String())
	}
	lines := strings.Split(out, "\n")
	want := []string{"orwl: trace written to " + file, "trace: 2 tasks in 1 processes"}
	if len(lines) < 5 || lines[0] != want[0] || !strings.HasPrefix(lines[1], want[1]) ||
		!strings.HasPrefix(strings.TrimSpace(lines[2]), "task") ||
		!strings.HasPrefix(strings.TrimSpace(lines[3]), "0 ") || !strings.HasPrefix(strings.TrimSpace(lines[4]), "1 ") {
		t.Errorf("standard error:\n%s\nwant lines starting %q, then a table of tasks 0 and 1", out, want)
	}
}
