package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// figures: regenerates the figures of docs/performance.md (between the markers
// <!-- figures:begin --> and <!-- figures:end -->) from fresh measurements: the lock
// benchmarks of package orwl (go test -bench, best of three runs, each beside its
// reference from the same run) and this harness's kernels, matmul, first, hybrid, stencil,
// wavefront, sph, cholesky, checkpoint, hosts, grant and faults commands (their -json output).
// The matmul command sweeps sizes and process counts for its charts (lab/results/matmul_n.svg,
// matmul_procs.svg); the table gives one size at one process per core. Figures in that
// page are only ever written by this command, and so are the files in lab/results: it
// finds docs/performance.md and lab/results in the checkout around the working directory
// (-page and -results name others) and gives the commands it runs -out lab/results. Run it from
// the checkout's root, as the tables' headers say: go run ./lab/bench figures.

func init() {
	register(command{
		name:    "figures",
		summary: "measure and rewrite the figures of docs/performance.md and the lab's results",
		setup:   figuresSetup,
	})
}

const (
	figuresBegin = "<!-- figures:begin -->"
	figuresEnd   = "<!-- figures:end -->"
)

// figuresFlags are the flags of the figures command.
type figuresFlags struct {
	page, results              string
	n, mmRounds, firstRounds   int
	mmSizes, mmProcs           string
	firstSizes, sections       string
	stencilArgs, wavefrontArgs string
	sphArgs, scaleArgs         string
}

// figuresSetup declares the flags of the figures command and returns its body.
func figuresSetup(fs *flag.FlagSet) func(*report) error {
	f := &figuresFlags{}
	fs.StringVar(&f.page, "page", "", "the page whose figures to rewrite (default: docs/performance.md of the checkout around the working directory)")
	fs.StringVar(&f.results, "results", "", "folder for the files of the commands it runs, linked from the page (default: lab/results of the checkout)")
	fs.IntVar(&f.n, "n", 4096, "matrix size of the matmul table")
	fs.StringVar(&f.mmSizes, "matmul-n", "2048,4096,6144,8192", "matrix sizes of the matmul sweep (its charts); -n is added")
	fs.StringVar(&f.mmProcs, "matmul-procs", "1,2,4", "process counts of the matmul sweep; one per core is added")
	fs.IntVar(&f.mmRounds, "matmul-rounds", 2, "rounds of every measurement of the matmul sweep")
	fs.StringVar(&f.firstSizes, "first-n", "4096,6144", "matrix sizes of the first-multiplication comparison")
	fs.IntVar(&f.firstRounds, "first-rounds", 5, "alternations of the first-multiplication comparison")
	fs.StringVar(&f.sections, "sections", "locks,kernels,matmul,first,hybrid,stencil,wavefront,sph,scale,cholesky,checkpoint,hosts,grant,faults,gpu", "the measurements to make; the other sections keep their figures, marked with the day they were measured; gpu measures nothing: it rewrites the GPU part alone from the results of bench gpu in the results folder's gpu/")
	fs.StringVar(&f.stencilArgs, "stencil-args", "", "more flags of the stencil command (for example -sizes 1000 -rounds 1)")
	fs.StringVar(&f.wavefrontArgs, "wavefront-args", "", "more flags of the wavefront command (for example -n 20000 -rounds 1)")
	fs.StringVar(&f.sphArgs, "sph-args", "", "more flags of the sph command (for example -n 20000 -steps 20)")
	fs.StringVar(&f.scaleArgs, "scale-args", "-procs 4,8,16,32,64,128", "flags of the scale command")
	return func(*report) error { return benchFigures(f) }
}

// figuresSections are the measurements the figures command can make, in the order of the
// page (gpu measures nothing: it rewrites the GPU part from bench gpu's results).
var figuresSections = []string{"locks", "kernels", "matmul", "first", "hybrid", "stencil", "wavefront", "sph", "scale", "cholesky", "checkpoint", "grant", "hosts", "faults", "gpu"}

// benchFigures measures what f asks and rewrites the figures of f.page.
func benchFigures(f *figuresFlags) error {
	mm, want, err := checkFigures(f)
	if err != nil {
		return err
	}
	root, out, links, err := figuresPaths(f)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(f.page)
	if err != nil {
		return err
	}
	if want["gpu"] {
		if text, err = gpuFigures(text, filepath.Join(out, "gpu"), links+"/gpu"); err != nil {
			return fmt.Errorf("%s: %w", f.page, err)
		}
		delete(want, "gpu")
		if len(want) == 0 {
			return os.WriteFile(f.page, text, 0o644)
		}
	}
	begin, end := bytes.Index(text, []byte(figuresBegin)), bytes.Index(text, []byte(figuresEnd))
	if begin < 0 || end < begin {
		return fmt.Errorf("%s has no %s ... %s section", f.page, figuresBegin, figuresEnd)
	}
	figures, err := measureFigures(f, mm, want, root, out, links, string(text[begin:end]))
	if err != nil {
		return err
	}
	page := append([]byte{}, text[:begin]...)
	page = append(page, figures...)
	page = append(page, text[end:]...)
	if err := os.WriteFile(f.page, page, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "figures: wrote %s and the commands' files in %s\n", f.page, out)
	return nil
}

// matmulSweep is what the figures command asks of the matmul command: its -n and -procs.
type matmulSweep struct{ sizes, procs string }

// checkFigures checks f's flags and returns the matmul sweep and the sections -sections
// names.
func checkFigures(f *figuresFlags) (mm matmulSweep, want map[string]bool, err error) {
	if mm.sizes, err = withValue(f.mmSizes, f.n); err != nil {
		return mm, nil, badFlags("-matmul-n: %w", err)
	}
	if mm.procs, err = withValue(f.mmProcs, runtime.NumCPU()); err != nil {
		return mm, nil, badFlags("-matmul-procs: %w", err)
	}
	if _, err := intList(f.firstSizes); err != nil || f.firstRounds < 1 || f.mmRounds < 1 {
		return mm, nil, badFlags("-first-n must list sizes, -first-rounds and -matmul-rounds be at least 1")
	}
	want = map[string]bool{}
	for _, name := range splitList(f.sections) {
		if !slices.Contains(figuresSections, name) {
			return mm, nil, badFlags("-sections: unknown section %q", name)
		}
		want[name] = true
	}
	return mm, want, nil
}

// measureFigures makes the measurements of the sections in want, running the commands with
// -out out (root is the checkout's root, links the results folder as the page links it),
// and returns the figures, from the begin marker up to the end marker. A section it does not
// measure keeps its figures from old (the page's figures so far), marked with the day and
// the code they were measured on, so that a run of a few sections leaves the others true.
func measureFigures(f *figuresFlags, mm matmulSweep, want map[string]bool, root, out, links, old string) (string, error) {
	measure := map[string]func(b *strings.Builder) error{
		"locks":   func(b *strings.Builder) error { return lockFigures(b, root) },
		"kernels": func(b *strings.Builder) error { return kernelFigures(b, out) },
		"matmul":  func(b *strings.Builder) error { return matmulFigures(b, out, f, mm) },
		"first": func(b *strings.Builder) error {
			return appendRows(b, out, firstFigures, "first", "-n", f.firstSizes, "-rounds", strconv.Itoa(f.firstRounds), "-hugepages", "default,on")
		},
		"hybrid": func(b *strings.Builder) error { return hybridFigures(b, out) },
		"stencil": func(b *strings.Builder) error {
			return appendRows(b, out, stencilFigures, append([]string{"stencil"}, strings.Fields(f.stencilArgs)...)...)
		},
		"wavefront": func(b *strings.Builder) error {
			return appendRows(b, out, wavefrontFigures, append([]string{"wavefront"}, strings.Fields(f.wavefrontArgs)...)...)
		},
		"sph": func(b *strings.Builder) error {
			return appendRows(b, out, sphFigures, append([]string{"sph"}, strings.Fields(f.sphArgs)...)...)
		},
		"scale": func(b *strings.Builder) error {
			return appendRows(b, out, scaleFigures, append([]string{"scale"}, strings.Fields(f.scaleArgs)...)...)
		},
		"cholesky": func(b *strings.Builder) error {
			return appendRows(b, out, choleskyFigures, "cholesky", "-n", "4096,8192", "-single=false")
		},
		"checkpoint": func(b *strings.Builder) error { return appendRows(b, out, checkpointFigures, "checkpoint") },
		"grant":      func(b *strings.Builder) error { return appendRows(b, out, grantFigures, "grant") },
		"hosts":      func(b *strings.Builder) error { return appendRows(b, out, hostsFigures, "hosts") },
		"faults":     func(b *strings.Builder) error { return appendRows(b, out, faultFigures, "faults") },
	}
	kept := keptSections(old)
	today, code, setup := time.Now().UTC().Format("2006-01-02"), codeVersion(root), thisSetup()
	var sections []figuresSection
	for _, name := range figuresSections {
		run := measure[name]
		switch {
		case run == nil: // gpu: a part of its own
		case want[name]:
			var b strings.Builder
			if err := run(&b); err != nil {
				return "", err
			}
			sections = append(sections, figuresSection{name, today, code, setup, strings.Trim(b.String(), "\n")})
		case kept[name].body != "":
			sections = append(sections, kept[name])
		default:
			fmt.Fprintf(os.Stderr, "figures: the page has no %s figures to keep; -sections %s measures them\n", name, name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nMeasured by `go run ./lab/bench figures`: %s.\n", figuresBegin, whenMeasured(sections))
	b.WriteString("Every ratio compares two rows of the same run; absolute numbers vary with the machine and its load.\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n<!-- figures:%s %s %s on %s -->\n\n%s\n\n<!-- figures:%s end -->\n", s.name, s.day, s.code, s.setup, s.body, s.name)
	}
	link := func(what, file string) string { return "[" + what + "](" + links + "/" + file + ")" }
	fmt.Fprintf(&b, "\nCharts: %s, %s, %s; tables: %s.\n", link("kernels", "kernels.svg"), link("matmul against N", "matmul_n.svg"),
		link("matmul against processes", "matmul_procs.svg"), strings.Join([]string{link("matmul", "matmul.txt"),
			link("first multiplication", "first.txt"), link("hybrid", "hybrid.txt"), link("stencil", "stencil.txt"),
			link("wavefront", "wavefront.txt"), link("sph", "sph.txt"), link("scale", "scale.txt"), link("cholesky", "cholesky.txt"), link("checkpoint", "checkpoint.txt"),
			link("hosts", "hosts.txt"), link("grant", "grant.txt"), link("faults", "faults.txt")}, ", "))
	return b.String(), nil
}

// figuresSection is one section of the figures: its name in figuresSections, the day (UTC),
// the code (commit) and the setup (thisSetup) it was measured on, and its text. Sections
// measured on different days may come from different machines: each keeps its own.
type figuresSection struct{ name, day, code, setup, body string }

// thisSetup names the machine and toolchain that measure: "AMD EPYC, 2 cores, go1.26.8,
// amd64".
func thisSetup() string {
	return fmt.Sprintf("%s, %d cores, %s, %s", cpuModel(), runtime.NumCPU(), runtime.Version(), runtime.GOARCH)
}

// sectionMarks finds the sections of a page's figures: each between
// <!-- figures:NAME DAY CODE on SETUP --> and <!-- figures:NAME end -->. Pages written
// before 2026-11-29 have no SETUP in the marks, and name one for all in their header
// (oldHeaderSetup).
var (
	sectionMarks   = regexp.MustCompile(`(?s)<!-- figures:(\w+) (\S+) (\S+)(?: on ([^\n]*?))? -->\n(.*?)\n<!-- figures:(\w+) end -->`)
	oldHeaderSetup = regexp.MustCompile("Measured by `go run ./lab/bench figures` on ([^:\n]+):")
)

// keptSections returns the sections of the figures text old, by name.
func keptSections(old string) map[string]figuresSection {
	setup := "an unnamed machine"
	if m := oldHeaderSetup.FindStringSubmatch(old); m != nil {
		setup = m[1]
	}
	kept := map[string]figuresSection{}
	for _, m := range sectionMarks.FindAllStringSubmatch(old, -1) {
		if m[1] == m[6] {
			kept[m[1]] = figuresSection{m[1], m[2], m[3], cmp.Or(m[4], setup), strings.Trim(m[5], "\n")}
		}
	}
	return kept
}

// whenMeasured says which sections were measured on which day, code and setup, the latest
// first: "locks and sph on 2026-11-28 (code 1a2b3c4; AMD EPYC, 2 cores, go1.26.8, amd64);
// kernels on 2026-11-27 (code 9c9b69b; ...)".
func whenMeasured(sections []figuresSection) string {
	type run struct{ day, code, setup string }
	var runs []run
	names := map[run][]string{}
	for _, s := range sections {
		r := run{s.day, s.code, s.setup}
		if names[r] == nil {
			runs = append(runs, r)
		}
		names[r] = append(names[r], s.name)
	}
	slices.SortStableFunc(runs, func(a, b run) int { return strings.Compare(b.day, a.day) })
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%s on %s (code %s; %s)", joinAnd(names[r]), r.day, r.code, r.setup)
	}
	return strings.Join(parts, "; ")
}

// codeVersion names the code of the checkout at root: its commit, short, and "+changes"
// when files differ from it.
func codeVersion(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	code := strings.TrimSpace(string(out))
	if diff, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/performance.md", ":!lab/results").Output(); err == nil && len(diff) > 0 {
		code += "+changes"
	}
	return code
}

// The remote hand-off of the user program (examples/handoff) and the MPI ping-pong in the
// locks table: round trips per run, and rounds alternated between them.
const handoffIters, handoffRounds = 200000, 3

// lockFigures writes the table of the lock benchmarks of package orwl (in the checkout at
// root), each beside its reference, then the remote hand-off of a user program under
// orwlrun, a remote read and a remote write, beside Open MPI's ping-pong (measureHandoff).
func lockFigures(b *strings.Builder, root string) error {
	fmt.Fprintln(os.Stderr, "figures: lock benchmarks (go test -bench ./orwl)")
	locks, err := goBench(root, "./orwl", "SectionUncontended|Handoff|ReadersWriter|RemotePush|RemoteReaderSteady", "1s")
	if err != nil {
		return err
	}
	b.WriteString("| ORWL operation | time | reference | ratio |\n|---|---|---|---|\n")
	lockRow := func(what, name, ref, refName string) {
		x, r := locks[name], locks[ref]
		if x.nsPerOp == 0 || r.nsPerOp == 0 {
			return
		}
		fmt.Fprintf(b, "| %s | %s, %.0f allocs | %s %s | %.2fx |\n", what, nanos(x.nsPerOp), x.allocs, refName, nanos(r.nsPerOp), x.nsPerOp/r.nsPerOp)
	}
	if u, ok := locks["SectionUncontended/untraced"]; ok {
		fmt.Fprintf(b, "| uncontended section (acquire, re-request, map, release) | %s, %.0f allocs | | |\n", nanos(u.nsPerOp), u.allocs)
	}
	lockRow("the same, tracing on (4 events)", "SectionUncontended/traced", "SectionUncontended/untraced", "tracing off:")
	lockRow("hand-off between two tasks, per round trip", "Handoff/orwl", "Handoff/channel", "channel ping-pong:")
	lockRow("hand-off between two tasks, per round trip", "Handoff/orwl", "Handoff/mutex-cond", "sync.Cond hand-off:")
	lockRow("1 writer then 8 readers, per cycle (ordered)", "ReadersWriter/orwl", "ReadersWriter/rwmutex", "sync.RWMutex (no order):")
	lockRow("remote hand-off of 8 bytes between 2 processes", "RemoteHandoff/orwl", "RemoteHandoff/tcp", "raw TCP ping-pong:")
	fmt.Fprintln(os.Stderr, "figures: remote hand-off, examples/handoff under orwlrun and Open MPI's ping-pong, alternated")
	h, err := measureHandoff(handoffIters, handoffRounds)
	if err != nil {
		return err
	}
	if x := locks["RemoteHandoff/orwl"]; x.nsPerOp > 0 && h.mpi > 0 {
		fmt.Fprintf(b, "| remote hand-off of 8 bytes between 2 processes | %s | Open MPI shared-memory ping-pong: %s | %.2fx |\n", nanos(x.nsPerOp), nanos(h.mpi), x.nsPerOp/h.mpi)
	}
	h.rows(b)
	if p, t := locks["RemotePush/orwl"], locks["RemotePush/tcp"]; p.mbPerS > 0 && t.mbPerS > 0 {
		fmt.Fprintf(b, "| remote grant of 8 MiB between 2 processes | %.0f MB/s | raw TCP stream: %.0f MB/s | %.2fx |\n", p.mbPerS, t.mbPerS, p.mbPerS/t.mbPerS)
	}
	if s, ok := locks["RemoteReaderSteady"]; ok {
		fmt.Fprintf(b, "| iterative remote reader, steady state | %s, %.0f allocs/op | | |\n", nanos(s.nsPerOp), s.allocs)
	}
	return nil
}

// kernelFigures writes the table of the kernels command: each kernel against its reference.
func kernelFigures(b *strings.Builder, out string) error {
	fmt.Fprintln(os.Stderr, "figures: kernels")
	kern, err := selfJSON(out, "kernels", "-n", "1024,2048", "-kernels", "openblas,gonum", "-time", "1s", "-rounds", "2")
	if err != nil {
		return err
	}
	b.WriteString("\n| kernel | N | threads | GFLOP/s | reference | ratio |\n|---|---|---|---|---|---|\n")
	for _, r := range kern {
		if r["reference"] == true || r["ref"] == nil || r["ref"] == "" {
			continue
		}
		fmt.Fprintf(b, "| %v | %v | %v | %.1f | %v | %.2fx |\n", r["kernel"], r["n"], r["threads"], num(r["gflops"]), r["ref"], num(r["ratio"]))
	}
	return nil
}

// matmulFigures runs the matmul sweep sw (its charts) and writes the table of f's size -n
// at one process per core, with ORWL's ratios to StarPU and ScaLAPACK.
func matmulFigures(b *strings.Builder, out string, f *figuresFlags, sw matmulSweep) error {
	fmt.Fprintln(os.Stderr, "figures: matmul")
	cores := runtime.NumCPU()
	mm, err := selfJSON(out, "matmul", "-n", sw.sizes, "-procs", sw.procs, "-rounds", strconv.Itoa(f.mmRounds))
	if err != nil {
		return err
	}
	b.WriteString("\n| matmul N=" + strconv.Itoa(f.n) + " | processes | grid | kernel threads | GFLOP/s | vs roofline |\n|---|---|---|---|---|---|\n")
	impl := map[any]float64{}
	for _, r := range mm {
		if num(r["n"]) != float64(f.n) || (r["impl"] != "roofline" && num(r["procs"]) != float64(cores)) {
			continue // the charts show the other sizes and process counts
		}
		fmt.Fprintf(b, "| %v (%v) | %v | %v | %v | %.1f | %.2fx |\n", r["impl"], r["kernel"], r["procs"], r["grid"], r["threads"], num(r["gflops"]), num(r["vs_roofline"]))
		impl[r["impl"]] = num(r["gflops"])
	}
	if impl["orwl"] > 0 && impl["starpu"] > 0 {
		fmt.Fprintf(b, "\nORWL / StarPU dgemm at N=%d, in GFLOP/s (one StarPU CPU worker per ORWL process, blocks of NB, StarPU's mean time): %.2fx.\n", f.n, impl["orwl"]/impl["starpu"])
	}
	if impl["orwl"] > 0 && impl["scalapack"] > 0 {
		fmt.Fprintf(b, "\nORWL / ScaLAPACK PDGEMM at N=%d, same grid and NB: %.2fx.\n", f.n, impl["orwl"]/impl["scalapack"])
	}
	return nil
}

// hybridFigures writes the sentence of the hybrid command: dynamic balancing against the
// best static split.
func hybridFigures(b *strings.Builder, out string) error {
	fmt.Fprintln(os.Stderr, "figures: hybrid")
	hy, err := selfJSON(out, "hybrid")
	if err != nil {
		return err
	}
	confirm := map[any]map[string]any{}
	for _, r := range hy {
		confirm[r["mode"]] = r
	}
	if d, st := confirm["confirm-dynamic"], confirm["confirm-static"]; d != nil && st != nil {
		fmt.Fprintf(b, "\nMixed kernels %v, N=%v, %v tasks in as many processes: dynamic balancing %.3fs (final share of %s %.3f), "+
			"the best of %d static splits, measured again beside it, %.3fs (share %.3f): %.2fx; "+
			"mean over the run's multiplications, learning included: %.3fs against %.3fs.\n",
			d["kernel"], d["n"], d["tasks"], num(d["seconds"]), strings.Split(fmt.Sprint(d["kernel"]), ":")[0], num(d["share"]),
			len(hy)-3, num(st["seconds"]), num(st["share"]), num(d["vs_best_static"]), num(d["mean_seconds"]), num(st["mean_seconds"]))
	}
	return nil
}

// figuresPaths fills in f's default page and results folder, those of the checkout
// around the working directory, and returns the checkout's root, the results folder as the
// commands get it (-out: relative to the working directory when below it) and as the
// page links it (relative to the page's folder, with slashes).
func figuresPaths(f *figuresFlags) (root, out, links string, err error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", "", "", err
	}
	if root, err = checkoutRoot(wd); err != nil {
		return "", "", "", err
	}
	if f.page == "" {
		f.page = filepath.Join(root, "docs", "performance.md")
	}
	if f.results == "" {
		f.results = filepath.Join(root, "lab", "results")
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(wd, p)
	}
	results := abs(f.results)
	out = results
	if rel, err := filepath.Rel(wd, results); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		out = rel
	}
	rel, err := filepath.Rel(filepath.Dir(abs(f.page)), results)
	if err != nil {
		return "", "", "", err
	}
	return root, out, filepath.ToSlash(rel), nil
}

// checkoutRoot returns the root of the orwl-go checkout that holds dir: dir or the nearest
// folder above it with a lab/go.mod.
func checkoutRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "lab", "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not in an orwl-go checkout (no lab/go.mod in it or above it)", dir)
		}
	}
}

// benchLine is the result of one benchmark of go test -bench.
type benchLine struct{ nsPerOp, mbPerS, allocs float64 }

var (
	benchName   = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?(?:\s|$)`)
	benchNumber = regexp.MustCompile(`([\d.]+) (ns/op|MB/s|allocs/op)`)
)

// goBench runs the benchmarks matching pattern in pkg (in folder dir) three times and returns the best run
// of each (the shortest time per operation), by name. A benchmark's numbers may come lines
// after its name (when it prints something itself).
func goBench(dir, pkg, pattern, benchtime string) (map[string]benchLine, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-count", "3", "-benchmem", pkg)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -bench %s %s: %w\n%s", pattern, pkg, err, out)
	}
	lines := map[string]benchLine{}
	name := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := benchName.FindStringSubmatch(sc.Text()); m != nil {
			name = m[1]
		}
		var l benchLine
		for _, m := range benchNumber.FindAllStringSubmatch(sc.Text(), -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			switch m[2] {
			case "ns/op":
				l.nsPerOp = v
			case "MB/s":
				l.mbPerS = v
			case "allocs/op":
				l.allocs = v
			}
		}
		if l.nsPerOp > 0 && name != "" {
			if best, ok := lines[name]; !ok || l.nsPerOp < best.nsPerOp {
				lines[name] = l
			}
			name = ""
		}
	}
	return lines, nil
}

// selfRows runs another command of this harness, args[0], with -json, -out out and args[1:],
// and decodes the JSON objects it prints.
func selfRows[T any](out string, args ...string) ([]T, error) {
	args = append([]string{args[0], "-json", "-out", out}, args[1:]...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench %s: %w", strings.Join(args, " "), err)
	}
	var rows []T
	dec := json.NewDecoder(bytes.NewReader(stdout))
	for dec.More() {
		var r T
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("bench %s: %w", args[0], err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// appendRows runs the command args[0] of this harness with -json, -out out and args[1:], and
// writes what format makes of its rows into b.
func appendRows[R any](b *strings.Builder, out string, format func([]R) string, args ...string) error {
	fmt.Fprintln(os.Stderr, "figures:", args[0])
	rows, err := selfRows[R](out, args...)
	if err != nil {
		return err
	}
	b.WriteString(format(rows))
	return nil
}

// selfJSON runs another command of this harness as selfRows does and returns the JSON
// objects it prints.
func selfJSON(out string, args ...string) ([]map[string]any, error) {
	return selfRows[map[string]any](out, args...)
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// nanos formats a duration in nanoseconds with a unit that suits it, to four significant
// digits.
func nanos(ns float64) string {
	unit := math.Pow(10, math.Floor(math.Log10(max(ns, 1)))-3) // four significant digits
	return time.Duration(ns).Round(time.Duration(max(1, unit))).String()
}

// cpuModel returns the processor's name from /proc/cpuinfo, or the architecture.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
			}
		}
	}
	return runtime.GOARCH
}

// stencilFigures is the stencil part of the Figures section: time per iteration of ORWL and
// of the C MPI halo exchange, with their ratios, then the inner loops alone, Go against C.
func stencilFigures(rows []stencilRow) string {
	var b strings.Builder
	shape := map[string]string{"line": "line (3-point)", "plane": "plane (5-point)"}
	layout := func(r stencilRow) string { return shape[r.Layout] + ", tasks " + r.Grid }
	ratio := func(r stencilRow, name string) string {
		if v, ok := r.Ratio[name]; ok {
			return fmt.Sprintf("%.2fx", v)
		}
		return "-"
	}
	time := func(r stencilRow, name string) string {
		if v, ok := r.Seconds[name]; ok {
			return seconds(v)
		}
		return "not installed"
	}
	check := func(r stencilRow) string {
		if r.Checked {
			return ""
		}
		return " (checksums differ)"
	}
	// table writes the rows of kind, under a header of the given columns, when there are any.
	table := func(kind string, columns []string, cells func(r stencilRow) []any) {
		header := false
		for _, r := range rows {
			if r.Kind != kind {
				continue
			}
			if !header {
				fmt.Fprintf(&b, "\n| %s |\n|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
				header = true
			}
			fmt.Fprintf(&b, strings.Repeat("| %v ", len(columns))+"|\n", cells(r)...)
		}
	}
	table("halo", []string{"Jacobi stencil, one task per process", "cells per task", "ORWL per iteration", "C MPI over TCP",
		"time ORWL / MPI TCP", "C MPI over shared memory", "time ORWL / MPI shm"}, func(r stencilRow) []any {
		return []any{layout(r) + check(r), r.CellsPerTask, time(r, "orwl"), time(r, "mpi-tcp"), ratio(r, "orwl/mpi-tcp"),
			time(r, "mpi-shm"), ratio(r, "orwl/mpi-shm")}
	})
	table("shared", []string{"two jobs at once on the same cores, each one task per process", "cells per task", "ORWL alone",
		"ORWL, two jobs (slower)", "slowdown", "C MPI shm alone", "C MPI shm, two jobs (slower)", "slowdown"}, func(r stencilRow) []any {
		return []any{layout(r) + check(r), r.CellsPerTask, time(r, "orwl"), time(r, "orwl-x2"), ratio(r, "orwl-x2/orwl"),
			time(r, "mpi-shm"), time(r, "mpi-shm-x2"), ratio(r, "mpi-shm-x2/mpi-shm")}
	})
	table("over", []string{"more processes than cores: one job, one task per process", "cells per task", "ORWL per iteration",
		"C MPI over shared memory (`--oversubscribe`)", "time ORWL / MPI shm"}, func(r stencilRow) []any {
		return []any{layout(r) + check(r), r.CellsPerTask, time(r, "orwl"), time(r, "mpi-shm"), ratio(r, "orwl/mpi-shm")}
	})
	table("loop", []string{"inner loop alone, one task", "cells", "Go per iteration", "C per iteration", "time Go / C"}, func(r stencilRow) []any {
		return []any{shape[r.Layout] + check(r), r.CellsPerTask, time(r, "go"), time(r, "c"), ratio(r, "go/c")}
	})
	return b.String()
}

// wavefrontFigures is the Levenshtein part of the Figures section: the sequential and
// parallel groups, each row against its group's reference, then the block sweep.
func wavefrontFigures(rows []wavefrontRow) string {
	var b strings.Builder
	what := map[string]string{
		"c-seq1": "C loop, one row at a time", "c-seq2": "C loop, two rows per pass", "c-seq3": "C loop, three rows, H = D - i - j",
		"go-seq": "Go loop alone (the tasks' kernel)", "orwl": "ORWL", "c-omp": "C OpenMP blocked wavefront, three-row kernel",
	}
	ratio := func(r wavefrontRow, none string) string {
		s := none
		if r.Ref != "" {
			s = fmt.Sprintf("%.2fx %s", r.Ratio, what[r.Ref])
		}
		if !r.Checked {
			s += " (distances differ)"
		}
		return s
	}
	if len(rows) > 0 {
		fmt.Fprintf(&b, "\n| Levenshtein wavefront, %d x %d characters | tasks or threads | processes | block | seconds | GCUPS | ratio of GCUPS |\n|---|---|---|---|---|---|---|\n", rows[0].LA, rows[0].LB)
	}
	for _, r := range rows {
		if r.Group != "block sweep" {
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %.3f | %.3f | %s |\n", what[r.Name], r.Tasks, r.Procs, blockText(r.Block), r.Seconds, r.GCUPS, ratio(r, "reference"))
		}
	}
	sweep := false
	for i, r := range rows {
		if r.Group != "block sweep" || r.Name != "orwl" {
			continue
		}
		if !sweep {
			fmt.Fprintf(&b, "\n| block size, %d tasks in as many processes | ORWL GCUPS | C OpenMP GCUPS, as many threads | ratio of GCUPS |\n|---|---|---|---|\n", r.Tasks)
			sweep = true
		}
		omp := "-"
		if i > 0 && rows[i-1].Group == "block sweep" && rows[i-1].Name == "c-omp" {
			omp = fmt.Sprintf("%.3f", rows[i-1].GCUPS)
		}
		fmt.Fprintf(&b, "| %d | %.3f | %s | %s |\n", r.Block, r.GCUPS, omp, ratio(r, "-"))
	}
	return b.String()
}

// grantFigures is the large-grant part of the Figures section: throughput of each way
// against the raw TCP stream, and the memory streaming takes.
func grantFigures(rows []grantRow) string {
	var b strings.Builder
	b.WriteString("\n| remote grant, 2 processes | location | MB/s | raw TCP stream | ratio | peak extra memory, reader / owner |\n|---|---|---|---|---|---|\n")
	var tcp float64
	for _, r := range rows {
		if r.Method == "tcp" {
			tcp = r.MBPerS
		}
	}
	for _, r := range rows {
		what := map[string]string{"shm": "shared memory (one host: read in place)", "socket": "websocket (ORWL_SHM=off, as between hosts)"}[r.Method]
		if what == "" {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f MB/s | %.2fx | %s / %s |\n", what, formatMiB(int64(r.Size)), r.MBPerS, tcp, r.VsTCP, formatMiB(r.ReaderExtra), formatMiB(r.OwnerExtra))
	}
	return b.String()
}

// withValue returns the comma-separated list of positive integers list with v added,
// sorted, without duplicates.
func withValue(list string, v int) (string, error) {
	vs, err := intList(list)
	if err != nil {
		return "", err
	}
	vs = append(vs, v)
	slices.Sort(vs)
	var out []string
	for _, x := range slices.Compact(vs) {
		out = append(out, strconv.Itoa(x))
	}
	return strings.Join(out, ","), nil
}

// firstFigures is the first-multiplication part of the Figures section: per N, the medians
// of the rounds, and the spread of the ratio.
func firstFigures(rows []firstRow) string {
	var b strings.Builder
	c := map[int]firstRow{}
	for _, r := range rows {
		if r.Round == 0 && r.Impl == "c-cold" {
			c[r.N] = r
		}
	}
	rounds := 0
	for _, r := range rows {
		rounds = max(rounds, r.Round)
	}
	fmt.Fprintf(&b, "\n| first multiplication, from A and B generated (median of %d alternated rounds) | N | seconds | page faults | C OpenBLAS cold call: seconds | page faults | C / ORWL: median (min-max) |\n|---|---|---|---|---|---|---|\n", rounds)
	for _, r := range rows {
		if r.Round != 0 || r.Impl == "c-cold" {
			continue
		}
		fmt.Fprintf(&b, "| %s, %d processes, NB %d | %d | %.3f | %d | %.3f | %d | %.2fx (%.2f-%.2f) |\n",
			r.Impl, r.Procs, r.NB, r.N, r.Secs, r.Faults, c[r.N].Secs, c[r.N].Faults, r.Ratio, r.Min, r.Max)
	}
	return b.String()
}

// faultFigures is the failure-detection part of the Figures section.
func faultFigures(rows []faultRow) string {
	var b strings.Builder
	b.WriteString("\n| fault of 1 process | processes | peer timeout | trials | every other process failed after: min | median | max |\n|---|---|---|---|---|---|---|\n")
	what := map[string]string{"kill": "killed (SIGKILL)", "stop": "stopped (SIGSTOP)", "partition": "cut off from one other (emulated hosts)"}
	for _, r := range rows {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %d | | skipped: %s | | | |\n", what[r.Kind], r.Procs, r.Skipped)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %s | %s |\n", what[r.Kind], r.Procs, r.PeerTimeout, r.Trials, seconds(r.Min), seconds(r.Median), seconds(r.Max))
	}
	return b.String()
}

// hostsFigures is the across-hosts part of the Figures section.
func hostsFigures(rows []hostsRow) string {
	var b strings.Builder
	b.WriteString("\n| matmul across emulated hosts | link | N | grid | seconds | bound: compute / link | vs bound |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %d hosts | %s | skipped: %s | | | | |\n", r.Hosts, r.Rate, r.Skipped)
			continue
		}
		fmt.Fprintf(&b, "| %d hosts, a process each | %s | %d | %s | %.3f | %.3f / %.3f | %.2fx |\n",
			r.Hosts, r.Rate, r.N, r.Grid, r.Seconds, r.ComputeBound, r.LinkBound, r.VsBound)
	}
	return b.String()
}

// choleskyFigures is the tiled Cholesky part of the Figures section: every row against
// OpenBLAS's dpotrf of the same run.
func choleskyFigures(rows []cholRow) string {
	var b strings.Builder
	b.WriteString("\n| tiled Cholesky | N | processes x threads | NB | GFLOP/s | first GFLOP/s | vs dpotrf | first vs dpotrf's first |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d x %d | %d | %.1f | %.1f | %.2fx | %.2fx |\n",
			r.Impl, r.N, r.Procs, r.Threads, r.NB, r.GFlops, r.FirstGFlops, r.Ratio, r.FirstRatio)
	}
	return b.String()
}

// checkpointFigures is the checkpoints part of the Figures section.
func checkpointFigures(rows []ckptRow) string {
	var b strings.Builder
	b.WriteString("\n| checkpoints of the stencil | value | reference | ratio | note |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		ref, ratio := "", ""
		if r.Ref != 0 {
			ref = fmt.Sprintf("%.4g %s", r.Ref, r.Unit)
		}
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		fmt.Fprintf(&b, "| %s | %.4g %s | %s | %s | %s |\n", r.Measure, r.Value, r.Unit, ref, ratio, r.Note)
	}
	return b.String()
}
