// Package gantt draws an ORWL trace (package trace) as an SVG Gantt chart that a person can
// open in any browser: one row per task, grouped by process, sections coloured by location,
// acquire waits hatched, transfers under the rows, barriers shaded, and a time axis.
//
// It is the viewing side of tracing, apart from the recording in package trace so that
// programs that only record do not depend on it. It reads traces; it must not record.
package gantt

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/trace/internal/units"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options tune [Render]. The zero value (or nil) gives the defaults.
type Options struct {
	Width       int    // picture width in pixels; default 1600
	RowHeight   int    // height of one task row in pixels; default adapts to the number of tasks (26 down to 10)
	Title       string // default "ORWL trace"
	MaxElements int    // cap on the bars drawn; spans are merged harder until under it; default 20000
}

// palette is used for section colours, by sorted location name; names past
// its end get a colour hashed from the name.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"}

const (
	waitFill     = "url(#wait)"
	transferFill = "#222222"
	barrierFill  = "#fbe3b8"
)

// locColor is the colour of the i-th of the sorted location names, name.
func locColor(i int, name string) string {
	if i < len(palette) {
		return palette[i]
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("hsl(%d,55%%,55%%)", h.Sum32()%360)
}

// Render draws the trace as a Gantt chart: one row per task, grouped by
// process; sections coloured by location (with a legend), acquire waits
// hatched grey on top of them, transfers as thin dark bars under the row, the
// schedule barrier as a shaded band, and a time axis. Spans shorter than a
// pixel are merged with their neighbours so that long runs stay small (see
// Options.MaxElements). The output is a standalone SVG document.
func Render(w io.Writer, t *trace.Trace, opts *Options) error {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Width <= 0 {
		o.Width = 1600
	}
	if o.Title == "" {
		o.Title = "ORWL trace"
	}
	if o.MaxElements <= 0 {
		o.MaxElements = 20000
	}
	m := trace.NewTimeline(t)
	c := &chart{m: m, o: o}
	c.layout()
	bw := bufio.NewWriterSize(w, 64<<10)
	c.w = bw
	c.draw()
	return bw.Flush()
}

type chart struct {
	m *trace.Timeline
	o Options
	w *bufio.Writer

	width, height  float64
	left, right    float64 // plot area x range
	top            float64 // y of the first group
	rowH, groupH   float64
	axisY          float64
	legendY        float64
	t0, t1         int64
	scale          float64 // px per ns
	rowY           []float64
	groupY         map[int]float64 // rank -> header y
	groupEnd       map[int]float64
	legend         []legendItem
	locFill        []string // colour of each of m.LocNames
	bars           [][]bar  // per row
	titles         bool
	mergedSpans    int
	drawnElements  int
	mergeGapPixels float64
}

type legendItem struct{ fill, label string }

// width is the horizontal room of a legend item: swatch, label, gap.
func (it legendItem) width() float64 { return 26 + 7.2*float64(len(it.label)) + 18 }

type bar struct {
	x0, x1  float64
	layer   int // 0 outer state, 1 nested section, 2 transfer
	fill    string
	opacity float64 // share of the bar's bins covered, in quarters
	tip     string  // tooltip when the bar is one span
}

func (c *chart) layout() {
	m := c.m
	c.width = float64(c.o.Width)
	c.left, c.right = 150, c.width-24
	c.t0, c.t1 = m.T0, m.T1
	if c.t1 <= c.t0 {
		c.t1 = c.t0 + 1
	}
	c.scale = (c.right - c.left) / float64(c.t1-c.t0)
	n := len(m.Rows)
	c.rowH = float64(c.o.RowHeight)
	if c.rowH <= 0 {
		c.rowH = 26
		if n > 0 {
			c.rowH = math.Max(10, math.Min(26, math.Floor(720/float64(n))))
		}
	}
	c.groupH = 20
	c.axisY = 78
	c.top = c.axisY + 10
	y := c.top
	c.groupY, c.groupEnd = map[int]float64{}, map[int]float64{}
	last := math.MinInt
	for _, r := range m.Rows {
		if r.Rank != last {
			if last != math.MinInt {
				c.groupEnd[last] = y
				y += 6
			}
			c.groupY[r.Rank] = y
			y += c.groupH
			last = r.Rank
		}
		c.rowY = append(c.rowY, y)
		y += c.rowH
	}
	if last != math.MinInt {
		c.groupEnd[last] = y
	}
	if n == 0 {
		y += 40
	}
	c.locFill = make([]string, len(m.LocNames))
	for i, name := range m.LocNames {
		c.locFill[i] = locColor(i, name)
		c.legend = append(c.legend, legendItem{c.locFill[i], "section on " + name})
	}
	c.legend = append(c.legend, legendItem{waitFill, "acquire wait"})
	c.legend = append(c.legend, legendItem{transferFill, "transfer"})
	if len(m.Barriers) > 0 {
		c.legend = append(c.legend, legendItem{barrierFill, "schedule barrier"})
	}
	// Legend: items flow left to right, wrapping.
	x, lines := c.left, 1
	for _, it := range c.legend {
		wdt := it.width()
		if x+wdt > c.right && x > c.left {
			lines++
			x = c.left
		}
		x += wdt
	}
	c.legendY = y + 34
	c.height = c.legendY + float64(lines)*20 + 12
	c.buildBars()
}

// buildBars turns every row into bars. Each row is reduced to state
// timelines (outer: waiting, or in the outermost section of a location;
// inner: in a nested section; transfer lane: moving data), which are binned
// at binW pixels: a bin takes the state that covers most of it, with an
// opacity that shows how much of the bin is covered, and runs of equal bins
// become one bar. A span wider than a bin keeps its exact ends. The bin width
// doubles until the bars fit in MaxElements.
func (c *chart) buildBars() {
	type lines struct{ outer, inner, xfer []seg }
	tls := make([]lines, len(c.m.Rows))
	spans := 0
	for i, r := range c.m.Rows {
		outer, inner, n := c.timelines(r)
		tls[i] = lines{outer, inner, c.transferTimeline(r)}
		spans += n
	}
	binW := 1.0
	for {
		c.bars = c.bars[:0]
		total := 0
		for _, tl := range tls {
			var bs []bar
			bs = c.binned(bs, tl.outer, 0, binW)
			bs = c.binned(bs, tl.inner, 1, binW)
			bs = c.binned(bs, tl.xfer, 2, binW)
			total += len(bs)
			c.bars = append(c.bars, bs)
		}
		if total <= c.o.MaxElements || binW > c.right-c.left {
			c.drawnElements, c.mergedSpans, c.mergeGapPixels = total, spans, binW
			c.titles = total <= 5000
			return
		}
		binW *= 2
	}
}

func (c *chart) x(ts int64) float64 { return c.left + float64(ts-c.t0)*c.scale }

// seg is a piece of a state timeline; st > 0 (1 is waiting or transferring,
// 2+i is a section on location name i).
type seg struct {
	a, b int64
	st   int
	src  *trace.Interval // the span that gave the state, for tooltips
	kind string
}

// state of a location name.
func (c *chart) locState(name string) int {
	i := sort.SearchStrings(c.m.LocNames, name)
	return 2 + i
}

func (c *chart) stateFill(layer, st int) string {
	switch {
	case layer == 2:
		return transferFill
	case st == 1:
		return waitFill
	}
	return c.locFill[st-2]
}

// timelines sweeps a row's sections and waits. It returns the outer and
// inner timelines and the number of spans.
func (c *chart) timelines(r *trace.Row) (outer, inner []seg, n int) {
	type edge struct {
		t     int64
		start bool
		iv    *trace.Interval
		wait  bool
	}
	var edges []edge
	for i := range r.Sections {
		iv := &r.Sections[i]
		edges = append(edges, edge{iv.Ts, true, iv, false}, edge{iv.End, false, iv, false})
	}
	for i := range r.Waits {
		iv := &r.Waits[i]
		edges = append(edges, edge{iv.Ts, true, iv, true}, edge{iv.End, false, iv, true})
	}
	n = len(r.Sections) + len(r.Waits)
	slices.SortStableFunc(edges, func(a, b edge) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		switch {
		case !a.start && b.start:
			return -1 // ends first
		case a.start && !b.start:
			return 1
		}
		return 0
	})
	var secs, waits []*trace.Interval // active, in start order
	remove := func(l []*trace.Interval, iv *trace.Interval) []*trace.Interval {
		for i, x := range l {
			if x == iv {
				return append(l[:i], l[i+1:]...)
			}
		}
		return l
	}
	push := func(tl []seg, s seg) []seg {
		if s.b <= s.a || s.st == 0 {
			return tl
		}
		if k := len(tl); k > 0 && tl[k-1].b == s.a && tl[k-1].st == s.st && tl[k-1].src == s.src {
			tl[k-1].b = s.b
			return tl
		}
		return append(tl, s)
	}
	prev := int64(math.MinInt64)
	for _, e := range edges {
		if prev != math.MinInt64 && e.t > prev {
			switch {
			case len(waits) > 0:
				outer = push(outer, seg{a: prev, b: e.t, st: 1, src: waits[len(waits)-1], kind: "wait"})
			case len(secs) > 0:
				o := secs[0]
				outer = push(outer, seg{a: prev, b: e.t, st: c.locState(o.Loc.Name), src: o, kind: "section"})
				if len(secs) > 1 {
					in := secs[len(secs)-1]
					inner = push(inner, seg{a: prev, b: e.t, st: c.locState(in.Loc.Name), src: in, kind: "section"})
				}
			}
		}
		prev = e.t
		switch {
		case e.start && e.wait:
			waits = append(waits, e.iv)
		case e.start:
			secs = append(secs, e.iv)
		case e.wait:
			waits = remove(waits, e.iv)
		default:
			secs = remove(secs, e.iv)
		}
	}
	return outer, inner, n
}

func (c *chart) transferTimeline(r *trace.Row) []seg {
	u := make([]trace.Interval, len(r.Transfers))
	copy(u, r.Transfers)
	sort.Slice(u, func(i, j int) bool { return u[i].Ts < u[j].Ts })
	var tl []seg
	for i := range u {
		iv := &u[i]
		if k := len(tl); k > 0 && iv.Ts <= tl[k-1].b {
			tl[k-1].b = max(tl[k-1].b, iv.End)
			tl[k-1].src = nil
			continue
		}
		tl = append(tl, seg{a: iv.Ts, b: iv.End, st: 1, src: iv, kind: "transfer"})
	}
	return tl
}

// cell is how much of one bin one state covers, and the segment that covers most of it.
type cell struct {
	st  int
	d   float64 // px covered by st
	seg int     // the segment covering most of it
	sd  float64
}

// binValue is what a bin shows: its main state, the segment behind it, and its coverage.
type binValue struct {
	st, seg int
	level   int // coverage in quarters, 1..4
}

// binned appends the bars of one timeline.
func (c *chart) binned(out []bar, tl []seg, layer int, binW float64) []bar {
	if len(tl) == 0 {
		return out
	}
	bins := c.fillBins(tl, binW)
	val := func(k int) binValue { return valueOf(bins[k], binW) }
	for k := 0; k < len(bins); {
		v := val(k)
		if v.st == 0 {
			k++
			continue
		}
		j, single := k+1, true
		for ; j < len(bins); j++ {
			w := val(j)
			if w.st != v.st || w.level != v.level {
				break
			}
			single = single && w.seg == v.seg
		}
		out = append(out, c.binBar(tl, layer, k, j, v, val(j-1).seg, single, binW))
		k = j
	}
	return out
}

// fillBins spreads the segments of tl over bins of binW pixels.
func (c *chart) fillBins(tl []seg, binW float64) [][]cell {
	nb := int(math.Ceil((c.right - c.left) / binW))
	bins := make([][]cell, nb)
	for si, s := range tl {
		x0, x1 := c.x(s.a), c.x(s.b)
		k0, k1 := int((x0-c.left)/binW), int((x1-c.left)/binW)
		k0, k1 = max(0, min(k0, nb-1)), max(0, min(k1, nb-1))
		for k := k0; k <= k1; k++ {
			lo, hi := c.left+float64(k)*binW, c.left+float64(k+1)*binW
			d := math.Min(hi, x1) - math.Max(lo, x0)
			if d <= 0 && !(x1 == x0 && k == k0) {
				continue
			}
			bins[k] = addCover(bins[k], s.st, si, math.Max(d, 1e-6))
		}
	}
	return bins
}

// addCover adds d pixels of state st from segment si to a bin, which has one cell per state.
func addCover(bin []cell, st, si int, d float64) []cell {
	for j := range bin {
		if bin[j].st == st {
			bin[j].d += d
			if d > bin[j].sd {
				bin[j].seg, bin[j].sd = si, d
			}
			return bin
		}
	}
	return append(bin, cell{st: st, d: d, seg: si, sd: d})
}

// valueOf is what a bin of binW pixels shows: the state that covers most of it.
func valueOf(bin []cell, binW float64) binValue {
	var best cell
	var tot float64
	for _, x := range bin {
		tot += x.d
		if x.d > best.d {
			best = x
		}
	}
	if best.st == 0 {
		return binValue{}
	}
	level := int(math.Ceil(math.Min(1, tot/binW) * 4))
	return binValue{st: best.st, seg: best.seg, level: max(1, level)}
}

// binBar is the bar of bins k to j-1, which show v; lastSeg is the segment behind bin j-1,
// and single says that one segment is behind all of them (the bar then gets its tooltip).
func (c *chart) binBar(tl []seg, layer, k, j int, v binValue, lastSeg int, single bool, binW float64) bar {
	x0, x1 := c.left+float64(k)*binW, c.left+float64(j)*binW
	// Exact ends where a bin's state comes from a span that starts or ends inside it.
	first, last := tl[v.seg], tl[lastSeg]
	if sx := c.x(first.a); sx > x0 && sx < x1 {
		x0 = sx
	}
	if ex := c.x(last.b); ex < x1 && ex > x0 {
		x1 = ex
	}
	b := bar{x0: x0, x1: x1, layer: layer, fill: c.stateFill(layer, v.st), opacity: float64(v.level) / 4}
	if single && first.src != nil {
		b.tip = tip(first, c.t0)
	}
	return b
}

func tip(s seg, t0 int64) string {
	iv := s.src
	d, at := units.Duration(time.Duration(iv.End-iv.Ts)), units.Duration(time.Duration(iv.Ts-t0))
	switch s.kind {
	case "wait":
		return fmt.Sprintf("wait for %s (%s), %s at %s", iv.Loc, iv.Mode, d, at)
	case "transfer":
		return fmt.Sprintf("transfer of %s, %s, %s at %s", iv.Loc, units.Bytes(iv.Bytes), d, at)
	}
	return fmt.Sprintf("%s %s section, %s at %s", iv.Loc, iv.Mode, d, at)
}

func (c *chart) printf(format string, args ...any) { fmt.Fprintf(c.w, format, args...) }

func (c *chart) text(x, y float64, attrs, s string) {
	c.printf(`<text x="%s" y="%s"%s>`, f1(x), f1(y), attrs)
	xml.EscapeText(c.w, []byte(s))
	c.w.WriteString("</text>\n")
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func (c *chart) draw() {
	c.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		int(c.width), int(math.Ceil(c.height)), int(c.width), int(math.Ceil(c.height)))
	c.printf(`<defs><pattern id="wait" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)">` +
		`<rect width="6" height="6" fill="#d4d4d4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7a7a7a" stroke-width="2.5"/></pattern></defs>` + "\n")
	c.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	c.drawTitle()
	c.drawAxis()
	c.drawProcesses()
	c.drawRows()
	if len(c.m.Rows) == 0 {
		c.text(c.left, c.top+24, ` fill="#888"`, "no task events in this trace")
	}
	c.drawLegend()
	c.w.WriteString("</svg>\n")
}

// drawTitle draws the title and the subtitle: the job's size and span, and how spans were
// merged into bars.
func (c *chart) drawTitle() {
	m := c.m
	c.text(c.left, 28, ` font-size="20" font-weight="bold" fill="#222"`, c.o.Title)
	sub := fmt.Sprintf("%d tasks in %d processes, %s", len(m.Rows), m.Procs, units.Duration(time.Duration(c.t1-c.t0)))
	if c.mergedSpans > c.drawnElements {
		sub += fmt.Sprintf("; %d spans drawn as %d bars in %s px bins (faded: partly busy)", c.mergedSpans, c.drawnElements, strconv.FormatFloat(c.mergeGapPixels, 'f', -1, 64))
	}
	c.text(c.left, 48, ` font-size="13" fill="#555"`, sub)
}

// drawProcesses draws each process's group: its header band and its barriers.
func (c *chart) drawProcesses() {
	m := c.m
	ranks := make([]int, 0, len(c.groupY))
	for r := range c.groupY {
		ranks = append(ranks, r)
	}
	sort.Slice(ranks, func(i, j int) bool { return c.groupY[ranks[i]] < c.groupY[ranks[j]] })
	for _, rk := range ranks {
		gy, ge := c.groupY[rk], c.groupEnd[rk]
		ntasks := 0
		for _, r := range m.Rows {
			if r.Rank == rk {
				ntasks++
			}
		}
		c.printf(`<g class="process" data-rank="%d">`+"\n", rk)
		c.printf(`<rect x="8" y="%s" width="%s" height="%s" fill="#eef1f6"/>`+"\n", f1(gy), f1(c.right-8), f1(c.groupH))
		c.text(14, gy+14, ` font-weight="bold" fill="#1f2d3d"`, fmt.Sprintf("%s (%d tasks)", m.ProcessName(rk), ntasks))
		for _, b := range m.Barriers[rk] {
			x0, x1 := c.x(b.Ts), math.Max(c.x(b.End), c.x(b.Ts)+1)
			c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>`, f2(x0), f1(gy+c.groupH), f2(x1-x0), f1(ge-gy-c.groupH), barrierFill)
			xml.EscapeText(c.w, []byte(fmt.Sprintf("%s barrier, %s", b.Loc.Name, units.Duration(time.Duration(b.End-b.Ts)))))
			c.w.WriteString("</title></rect>\n")
		}
		c.w.WriteString("</g>\n")
	}
}

// drawRows draws every task's row: its name and its bars.
func (c *chart) drawRows() {
	pad := math.Max(1, math.Round(c.rowH*0.1))
	xferH := math.Max(2, math.Round(c.rowH*0.2))
	barH := c.rowH - 2*pad - xferH - 1
	fontSize := math.Min(12, c.rowH-1)
	for i, r := range c.m.Rows {
		y := c.rowY[i]
		c.printf(`<g class="task" data-task="%d" data-rank="%d">`+"\n", r.Task, r.Rank)
		if i%2 == 1 {
			c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="#000" fill-opacity="0.035"/>`+"\n", f1(c.left), f1(y), f1(c.right-c.left), f1(c.rowH))
		}
		c.text(c.left-8, y+c.rowH/2+fontSize*0.35, fmt.Sprintf(` text-anchor="end" font-size="%s" fill="#333"`, f1(fontSize)), r.Name)
		for _, b := range c.bars[i] {
			by, bh := y+pad, barH // layer 0: a section
			switch b.layer {
			case 1: // a nested section
				inset := math.Max(1, math.Floor(barH*0.2))
				by, bh = y+pad+inset, barH-2*inset
			case 2: // the transfer lane
				by, bh = y+pad+barH+1, xferH
			}
			c.drawBar(b, by, bh)
		}
		c.w.WriteString("</g>\n")
	}
}

// drawBar draws bar b at height by, bh tall, with its tooltip if it has one.
func (c *chart) drawBar(b bar, by, bh float64) {
	wdt := math.Max(b.x1-b.x0, 0.6)
	op := ""
	if b.opacity < 1 {
		op = fmt.Sprintf(` fill-opacity="%s"`, f2(b.opacity))
	}
	if b.tip == "" || !c.titles {
		c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>`+"\n", f2(b.x0), f1(by), f2(wdt), f1(bh), b.fill, op)
		return
	}
	c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s><title>`, f2(b.x0), f1(by), f2(wdt), f1(bh), b.fill, op)
	xml.EscapeText(c.w, []byte(b.tip))
	c.w.WriteString("</title></rect>\n")
}

// niceStep returns a 1, 2 or 5 times a power of ten step near span/target.
func niceStep(span float64, target int) float64 {
	raw := span / float64(target)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, k := range []float64{1, 2, 5, 10} {
		if k*p >= raw {
			return k * p
		}
	}
	return 10 * p
}

func (c *chart) drawAxis() {
	span := float64(c.t1 - c.t0)
	target := max(2, int((c.right-c.left)/110))
	step := math.Max(1, niceStep(span, target))
	// The largest unit in which a step is at least 0.1: 500µs reads 0.5 ms.
	unit, div := "ns", 1.0
	switch {
	case step >= 1e8:
		unit, div = "s", 1e9
	case step >= 1e5:
		unit, div = "ms", 1e6
	case step >= 1e2:
		unit, div = "µs", 1e3
	}
	bottom := c.legendY - 22
	c.w.WriteString(`<g class="axis">` + "\n")
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444"/>`+"\n", f1(c.left), f1(c.axisY), f1(c.right), f1(c.axisY))
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444"/>`+"\n", f1(c.left), f1(bottom), f1(c.right), f1(bottom))
	for v := 0.0; v <= span+step*1e-9; v += step {
		x := c.left + v*c.scale
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", f1(x), f1(c.axisY), f1(x), f1(bottom))
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444"/>`+"\n", f1(x), f1(c.axisY-5), f1(x), f1(c.axisY))
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444"/>`+"\n", f1(x), f1(bottom), f1(x), f1(bottom+5))
		label := strconv.FormatFloat(v/div, 'f', -1, 64)
		if i := strings.IndexByte(label, '.'); i >= 0 && len(label)-i > 4 {
			label = strconv.FormatFloat(v/div, 'f', 3, 64)
		}
		label += " " + unit
		c.text(x, c.axisY-9, ` text-anchor="middle" font-size="11" fill="#333"`, label)
		c.text(x, bottom+17, ` text-anchor="middle" font-size="11" fill="#333"`, label)
	}
	c.w.WriteString("</g>\n")
}

func (c *chart) drawLegend() {
	c.w.WriteString(`<g class="legend">` + "\n")
	x, y := c.left, c.legendY
	for _, it := range c.legend {
		wdt := it.width()
		if x+wdt > c.right && x > c.left {
			x = c.left
			y += 20
		}
		h := 12.0
		if it.fill == transferFill {
			c.printf(`<rect x="%s" y="%s" width="20" height="4" fill="%s"/>`+"\n", f1(x), f1(y+4), it.fill)
		} else {
			c.printf(`<rect x="%s" y="%s" width="20" height="%s" fill="%s" stroke="#999" stroke-width="0.5"/>`+"\n", f1(x), f1(y), f1(h), it.fill)
		}
		c.text(x+26, y+10.5, ` font-size="12" fill="#333"`, it.label)
		x += wdt
	}
	c.w.WriteString("</g>\n")
}
