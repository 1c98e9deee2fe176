package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Result is what an example prints last, in the process of task 0: the result line
//
//	result: KEY=VALUE KEY=VALUE ... verified=true
//
// or, with -json, one JSON object with the same keys in the same order, and the details
// (Detail) the summary lines give in text. The keys every example shares are spelled alike
// and added by the methods of the same names: tasks and procs (Job), seconds (the run's
// time, or its fastest repetition's), first-seconds and first-gflops (a repeating
// example's first, cold, repetition) and, always last, verified: true, false, or skipped
// when the check was turned off (null in JSON). An example's own keys come first, in the
// order it adds them.
type Result struct {
	fields   []field
	verified *bool
	checked  bool
}

type field struct {
	key, text string
	value     any
	detail    bool // in JSON only
}

// Add adds key=value, value printed as fmt's %v.
func (r *Result) Add(key string, value any) {
	r.fields = append(r.fields, field{key: key, text: fmt.Sprint(value), value: value})
}

// Addf adds key=value, value printed with format (one verb of fmt, such as "%.3f"); the
// JSON keeps it whole.
func (r *Result) Addf(key, format string, value any) {
	r.fields = append(r.fields, field{key: key, text: fmt.Sprintf(format, value), value: value})
}

// Detail adds key: value to the JSON object only.
func (r *Result) Detail(key string, value any) {
	r.fields = append(r.fields, field{key: key, value: value, detail: true})
}

// Job adds tasks and procs.
func (r *Result) Job(tasks, procs int) {
	r.Add("tasks", tasks)
	r.Add("procs", procs)
}

// Seconds adds seconds: the run's time, or its fastest repetition's.
func (r *Result) Seconds(s float64) { r.Addf("seconds", "%.3f", s) }

// First adds first-seconds and first-gflops, the first repetition's time and speed.
func (r *Result) First(seconds, gflops float64) {
	r.Addf("first-seconds", "%.3f", seconds)
	r.Addf("first-gflops", "%.1f", gflops)
}

// Verified records the outcome of the example's check, printed last as verified.
// Without a call, verified is skipped: the check was turned off.
func (r *Result) Verified(ok bool) { r.verified, r.checked = &ok, true }

// Report prints the result on stdout, as a line or, with asJSON, as JSON, and returns the
// exit status: ExitMismatch, after saying so on stderr (as name), when the check failed;
// otherwise 0.
func (r *Result) Report(stdout, stderr io.Writer, name string, asJSON bool) int {
	if asJSON {
		fmt.Fprintln(stdout, r.json())
	} else {
		fmt.Fprintln(stdout, r.line())
	}
	if r.checked && !*r.verified {
		fmt.Fprintln(stderr, name+": the result did not verify")
		return ExitMismatch
	}
	return 0
}

// line is the result line.
func (r *Result) line() string {
	var b bytes.Buffer
	b.WriteString("result:")
	for _, f := range r.fields {
		if !f.detail {
			fmt.Fprintf(&b, " %s=%s", f.key, f.text)
		}
	}
	verified := "skipped"
	if r.checked {
		verified = strconv.FormatBool(*r.verified)
	}
	b.WriteString(" verified=" + verified)
	return b.String()
}

// json is the JSON object, its keys in the result line's order.
func (r *Result) json() string {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range append(r.fields, field{key: "verified", value: r.verified}) {
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value)
		if err != nil { // a value JSON cannot hold (NaN, Inf): its text
			v, _ = json.Marshal(fmt.Sprint(f.value))
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}
