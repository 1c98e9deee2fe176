//go:build linux

package external_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/orwl-go/orwl/external"
	"github.com/orwl-go/orwl/orwl"
)

// BenchmarkRun: one run of cp from an input location to an output location, per size
// (go run ./lab/bench external compares it with the same program on plain files).
func BenchmarkRun(b *testing.B) {
	if _, err := exec.LookPath("cp"); err != nil {
		b.Skip("no cp")
	}
	for _, size := range []struct {
		name  string
		bytes int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(size.bytes))
			err := orwl.Run(context.Background(), orwl.Config{Tasks: 1, Locations: []string{"in", "out"}},
				func(ctx context.Context, t *orwl.Task) error {
					t.Scale("in", size.bytes)
					c := external.Command("cp", "{in}", "{out}")
					c.Input("in", t.ReadInsert(t.Loc(0, "in"), 0))
					c.Output("out", t.WriteInsert(t.Loc(0, "out"), 0))
					if err := t.Schedule(ctx); err != nil {
						return err
					}
					for b.Loop() {
						if err := c.Run(ctx); err != nil {
							return err
						}
					}
					return nil
				})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
