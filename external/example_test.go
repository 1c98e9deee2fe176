//go:build linux

package external_test

import (
	"context"
	"fmt"
	"os"

	"github.com/orwl-go/orwl/external"
	"github.com/orwl-go/orwl/orwl"
)

// An unmodified sort(1) reads a location as its standard input and writes another as its
// standard output, inside a critical section of both.
func Example() {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 1, Locations: []string{"names", "sorted"}},
		func(ctx context.Context, t *orwl.Task) error {
			names, sorted := t.Loc(0, "names"), t.Loc(0, "sorted")
			fill := t.WriteInsertOnce(names, 0)
			in, out := t.ReadInsertOnce(names, 1), t.WriteInsertOnce(sorted, 1)
			show := t.ReadInsertOnce(sorted, 2)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if err := fill.Section(ctx, func([]byte) error {
				b, err := fill.Resize(len("pear\napple\nfig\n"))
				copy(b, "pear\napple\nfig\n")
				return err
			}); err != nil {
				return err
			}
			sort := external.Command("sort")
			sort.Env = append(os.Environ(), "LC_ALL=C")
			sort.Input("names", in)
			sort.Output("sorted", out)
			sort.Stdin, sort.Stdout = "names", "sorted"
			if err := sort.Run(ctx); err != nil {
				return err
			}
			return show.Section(ctx, func(b []byte) error {
				fmt.Print(string(b))
				return nil
			})
		})
	fmt.Println(err)
	// Output:
	// apple
	// fig
	// pear
	// <nil>
}
