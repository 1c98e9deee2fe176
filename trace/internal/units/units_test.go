package units

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{950, "950ns"},
		{12345, "12.3µs"},
		{4561 * time.Microsecond, "4.56ms"},
		{999 * time.Millisecond, "999ms"},
		{1234 * time.Millisecond, "1.23s"},
		{150 * time.Second, "150s"},
	} {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%d) = %q, want %q", int64(tc.d), got, tc.want)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{512, "512B"},
		{1536, "1.50KiB"},
		{12 << 20, "12.0MiB"},
		{3 << 30, "3.00GiB"},
	} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
