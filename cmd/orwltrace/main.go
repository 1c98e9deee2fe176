// Command orwltrace turns an ORWL trace (Chrome trace event JSON written by
// package trace) into an SVG Gantt chart, and prints its summary.
//
// Usage:
//
//	orwltrace [flags] FILE.json [MORE.json ...]
//
// With one file it reads that trace; with several it merges them as the
// parts of one job (each part's clock offset applied). Flags may come before
// or after the files:
//
//	-o FILE.svg    write the Gantt chart there (default: the first input with .svg)
//	-summary       print the per-task summary; with -summary alone no SVG is written
//	-json FILE     also write the (merged) trace as JSON
//	-title TEXT    chart title (default: the input's base name)
//	-width N       chart width in pixels (default 1600)
//	-validate      check every event (its fields, timestamps from 0 to a year, begins
//	               and ends paired) and the trace's structure (nesting, flows); fail
//	               on the first problem
//
// Open the SVG in any browser; open the JSON in https://ui.perfetto.dev or
// chrome://tracing for detail.
//
// It only reads the files it is given and writes the files it is asked for.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/trace/gantt"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "orwltrace:", err)
		}
		os.Exit(2)
	}
}

// The chart widths orwltrace draws: narrower has no room for the labels, wider is of no use
// on a screen and costs memory in proportion.
const minWidth, maxWidth = 400, 100_000

// run is the whole command, testable: args without the program name.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orwltrace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the SVG Gantt chart to this file (default: first input with .svg)")
	summary := fs.Bool("summary", false, "print the per-task summary (alone: no SVG unless -o is given)")
	jsonOut := fs.String("json", "", "also write the (merged) trace as Chrome trace JSON to this file")
	title := fs.String("title", "", "chart title (default: the input's base name)")
	width := fs.Int("width", 1600, "chart width in pixels")
	validate := fs.Bool("validate", false, "check nesting and flows; fail if the trace is inconsistent")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: orwltrace [flags] FILE.json [MORE.json ...]")
		fs.PrintDefaults()
	}
	// Accept flags after the file names too: parse, take a positional
	// argument, parse the rest.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		files = append(files, args[0])
		args = args[1:]
	}
	if len(files) == 0 {
		fs.Usage()
		return errors.New("no trace file given")
	}
	if *width < minWidth || *width > maxWidth {
		return fmt.Errorf("-width %d: want %d to %d pixels", *width, minWidth, maxWidth)
	}
	parts := make([][]byte, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if *validate {
			if err := checkFile(b); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
		parts[i] = b
	}
	t, err := trace.Merge(parts)
	if err != nil {
		return err
	}
	if *validate {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%s: %w", files[0], err)
		}
	}
	if *jsonOut != "" {
		if err := writeFile(*jsonOut, t.WriteJSON); err != nil {
			return err
		}
	}
	svgPath := *out
	if svgPath == "" && !*summary {
		svgPath = strings.TrimSuffix(files[0], filepath.Ext(files[0])) + ".svg"
	}
	if svgPath != "" {
		opts := &gantt.Options{Width: *width, Title: *title}
		if opts.Title == "" {
			opts.Title = "ORWL trace: " + filepath.Base(files[0])
		}
		if err := writeFile(svgPath, func(w io.Writer) error { return gantt.Render(w, t, opts) }); err != nil {
			return err
		}
		if !*summary {
			fmt.Fprintf(stdout, "wrote %s (%d tasks)\n", svgPath, len(t.Tasks()))
		}
	}
	if *summary {
		return trace.Summarize(stdout, t)
	}
	return nil
}

// writeFile writes a file in one go, so that a failure leaves no partial
// output behind the given name.
func writeFile(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
