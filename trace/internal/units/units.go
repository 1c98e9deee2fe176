// Package units prints the durations and byte counts of traces with about 3 significant
// digits, so that the summary (package trace) and the Gantt chart (package trace/gantt) say
// the same figure the same way.
package units

import (
	"fmt"
	"time"
)

// num prints v with about 3 significant digits, never in exponent form.
func num(v float64) string {
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%.0f", v)
	case v >= 9.995:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Duration prints d with about 3 significant digits: 0, 950ns, 12.3µs, 4.56ms, 1.23s.
func Duration(d time.Duration) string {
	v := float64(d)
	switch {
	case d == 0:
		return "0"
	case v < 1e3:
		return fmt.Sprintf("%dns", d)
	case v < 1e6:
		return num(v/1e3) + "µs"
	case v < 1e9:
		return num(v/1e6) + "ms"
	}
	return num(v/1e9) + "s"
}

// Bytes prints n bytes with about 3 significant digits: 512B, 1.50KiB, 12.0MiB, 3.00GiB.
func Bytes(n int64) string {
	v := float64(n)
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return num(v/(1<<10)) + "KiB"
	case n < 1<<30:
		return num(v/(1<<20)) + "MiB"
	}
	return num(v/(1<<30)) + "GiB"
}
