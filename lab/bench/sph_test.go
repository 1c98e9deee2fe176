package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestSphCMatchesDefinition builds the C reference both ways and checks the validation run
// of 20000 particles and 20 steps against the definition: the exact build on 2 threads,
// the default (FMA) build on 1, kinetic energy, checksum and interactions bit for bit.
// Skipped without gcc or OpenMP.
func TestSphCMatchesDefinition(t *testing.T) {
	exact, def, err := buildSphC(t.TempDir(), []string{"-O3", "-march=native"})
	if errors.Is(err, errSphNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		impl, bin string
		threads   string
	}{{"c-exact", exact, "2"}, {"c-default", def, "1"}} {
		r, err := runSph(context.Background(), []string{"OMP_NUM_THREADS=" + c.threads}, c.bin, "20000", "20", "1")
		if err != nil {
			t.Fatal(err)
		}
		r.Impl, r.Particles, r.Steps = c.impl, 20000, 20
		if check, ok := sphCheck(r, nil); !ok || check != "definition's "+c.impl {
			page := sphValidation[sphKey{20000, 20}]
			t.Errorf("%s on %s threads: kinetic %.17g, checksum %s, %d interactions; %s: %v (definition: %+v)",
				c.impl, c.threads, r.Kinetic, r.Checksum, r.Interactions, check, ok, page)
		}
	}
}

func TestParseSphResult(t *testing.T) {
	out := "[1] done\n[0] result: particles=100 steps=2 tasks=2 procs=2 seconds=0.5 interactions=1000000 interactions_per_s=2e+06 kinetic=0.25 checksum=00ff00ff00ff00ff imbalance=1.1250 verified=skipped\n"
	r, err := parseSphResult(out)
	if err != nil || r.Seconds != 0.5 || r.Interactions != 1e6 || r.InteractionsPerS != 2e6 || r.Kinetic != 0.25 || r.Checksum != "00ff00ff00ff00ff" || r.Imbalance != 1.125 {
		t.Fatalf("ORWL's line: %+v, %v", r, err)
	}
	c := "interactions=45525300 cells=1331 h=0.044\nresult: particles=20000 steps=20 threads=1 seconds=2 interactions_per_s=2.27e+07 kinetic=0.054524002614179487 checksum=7b4e5c70b7cba47c\n"
	if r, err := parseSphResult(c); err != nil || r.Interactions != 45525300 || r.Kinetic != 0.054524002614179487 || r.Imbalance != 0 {
		t.Fatalf("C's line: %+v, %v", r, err)
	}
	for _, bad := range []string{
		"no result here",
		"result: particles=1 steps=1 seconds=1 interactions_per_s=1 kinetic=1 checksum=ab verified=false",
		"result: particles=1 steps=1 seconds=1 interactions_per_s=1 kinetic=1 verified=skipped",
		"result: particles=1 steps=1 seconds=x interactions_per_s=1 kinetic=1 checksum=ab",
		"result: particles=1 steps=1 seconds=1 interactions_per_s=1 kinetic=1",
	} {
		if _, err := parseSphResult(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestSphFinish checks the ratios and checks of a table at a size the definition does not
// give, and how the figures show them.
func TestSphFinish(t *testing.T) {
	row := func(impl string, threads, procs int, ips float64, sum string) sphRow {
		return sphRow{Impl: impl, Threads: threads, Procs: procs, Particles: 1000, Steps: 3, Seconds: 1, InteractionsPerS: ips, Kinetic: 0.5, Checksum: sum}
	}
	rows := []sphRow{
		row("c-exact", 1, 1, 10, "aa"), row("c-default", 1, 1, 12, "bb"), row("orwl", 1, 1, 9, "aa"),
		row("c-exact", 2, 1, 20, "aa"), row("c-default", 2, 1, 25, "bb"), row("orwl", 2, 2, 18, "cc"),
	}
	rows[5].Imbalance, rows[5].Kinetic = 1.2, 0.5000001
	sphFinish(rows)
	want := []struct {
		vsExact, vsDefault float64
		check              string
		agrees             bool
	}{
		{0, 1 / 1.2, "", true}, {1.2, 0, "", true}, {0.9, 0.75, "c-exact, 1 thread(s)", true},
		{0, 0.8, "c-exact, 1 thread(s)", true}, {1.25, 0, "c-default, 1 thread(s)", true}, {0.9, 0.72, "c-exact, 1 thread(s)", false},
	}
	for i, w := range want {
		r := rows[i]
		if !near(r.VsExact, w.vsExact) || !near(r.VsDefault, w.vsDefault) || r.Check != w.check || r.Agrees != w.agrees {
			t.Errorf("row %d (%s, %d threads): vs exact %g, vs default %g, check %q %v; want %+v", i, r.Impl, r.Threads, r.VsExact, r.VsDefault, r.Check, r.Agrees, w)
		}
	}
	if d := rows[5].KineticVsExact; d < 1.9e-7 || d > 2.1e-7 {
		t.Errorf("kinetic vs exact %g, want 2e-7", d)
	}
	skipped := row("orwl", 1, 1, 0, "")
	skipped.Skipped = "examples/sph is missing or does not build: go build examples/sph: exit status 1"
	got := sphFigures(append(rows, skipped))
	for _, w := range []string{
		"| SPH, 1000 particles, 3 steps |",
		"| C OpenMP, no FMA (exact) | 1 | 1 | 1.000 | 10 | - | 0.83x | - | aa |",
		"| ORWL examples/sph | 1 | 1 | 1.000 | 9 | 0.90x | 0.75x | - | aa = c-exact, 1 thread(s) |",
		"| ORWL examples/sph | 2 | 2 | 1.000 | 18 | 0.90x | 0.72x | 1.2000 | cc DIFFERS from c-exact, 1 thread(s) |",
		"| ORWL examples/sph | 1 | 1 | skipped: examples/sph is missing",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
}

// near says whether a and b are equal to 1e-12, relatively.
func near(a, b float64) bool {
	d := a - b
	return d*d <= 1e-24*(a*a+b*b)
}
