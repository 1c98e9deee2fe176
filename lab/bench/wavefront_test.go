package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/levenshtein/wavefront"
)

// TestWavefrontCMatchesGo runs the C references (one row, two rows, three rows with the Go
// tasks' kernel, the OpenMP wavefront on two threads with several tile sides) on random strings, empty ones and unequal
// lengths included, and compares their distance with the Go loop's. Skipped without gcc.
func TestWavefrontCMatchesGo(t *testing.T) {
	dir := t.TempDir()
	bin, err := buildWavefrontC(dir, []string{"-O2"})
	if err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 12 {
		a, b := wavefront.Generate(r.IntN(300), r.Uint64()), wavefront.Generate(r.IntN(300), r.Uint64())
		if i == 0 {
			a = nil
		}
		fa, fb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		// A trailing newline, which the C program leaves out like the example.
		if err := os.WriteFile(fa, append(a, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fb, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want := wavefront.Sequential(a, b)
		for _, args := range [][]string{{"seq1", fa, fb}, {"seq2", fa, fb}, {"seq3", fa, fb}, {"omp", fa, fb, "1"}, {"omp", fa, fb, "3"}, {"omp", fa, fb, "16"}, {"omp", fa, fb, "1000"}} {
			res, err := runWavefrontC(bin, 2, args...)
			if err != nil || res.Distance != want || res.Seconds < 0 {
				t.Fatalf("%d and %d characters, %s %s: %+v, %v; want distance %d", len(a), len(b), args[0], strings.Join(args[3:], " "), res, err, want)
			}
		}
	}
}

func TestWavefrontFigures(t *testing.T) {
	row := func(group, name string, tasks, procs, block int, gcups float64, ref string, ratio float64) wavefrontRow {
		return wavefrontRow{Group: group, Name: name, Tasks: tasks, Procs: procs, Block: block, LA: 100, LB: 100,
			Seconds: 1e-5 / gcups, GCUPS: gcups, Ref: ref, Ratio: ratio, Checked: true}
	}
	rows := []wavefrontRow{
		row("sequential", "c-seq1", 1, 1, 0, 1, "", 0),
		row("sequential", "c-seq3", 1, 1, 0, 1.3, "c-seq1", 1.3),
		row("sequential", "orwl", 1, 1, 1024, 1.2, "c-seq1", 1.2),
		row("parallel", "c-omp", 2, 1, 1024, 2, "", 0),
		row("parallel", "orwl", 2, 2, 1024, 1.9, "c-omp", 0.95),
		row("block sweep", "c-omp", 2, 1, 128, 1.5, "", 0),
		row("block sweep", "orwl", 2, 2, 128, 1.8, "c-omp", 1.2),
	}
	rows[4].Checked = false
	got := wavefrontFigures(rows)
	for _, want := range []string{
		"| Levenshtein wavefront, 100 x 100 characters |",
		"| C loop, one row at a time | 1 | 1 | - | 0.000 | 1.000 | reference |",
		"| C loop, three rows, H = D - i - j | 1 | 1 | - | 0.000 | 1.300 | 1.30x C loop, one row at a time |",
		"| ORWL | 1 | 1 | 1024 | 0.000 | 1.200 | 1.20x C loop, one row at a time |",
		"| C OpenMP blocked wavefront, three-row kernel | 2 | 1 | 1024 | 0.000 | 2.000 | reference |",
		"| ORWL | 2 | 2 | 1024 | 0.000 | 1.900 | 0.95x C OpenMP blocked wavefront, three-row kernel (distances differ) |",
		"| block size, 2 tasks in as many processes |",
		"| 128 | 1.800 | 1.500 | 1.20x C OpenMP blocked wavefront, three-row kernel |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 128 | 1.500") {
		t.Errorf("the sweep's C row is listed as an ORWL row:\n%s", got)
	}
}
