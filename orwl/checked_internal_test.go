package orwl

import (
	"flag"
	"testing"
)

// TestCheckedDefault: a job is checked inside a test binary unless it runs benchmarks or
// ORWL_CHECKED says off; ORWL_CHECKED=on or off and the Config's choice decide otherwise, and
// anything else is refused.
func TestCheckedDefault(t *testing.T) {
	bench := flag.Lookup("test.bench")
	defer bench.Value.Set(bench.Value.String())
	for _, c := range []struct {
		choice Checking
		env    string
		bench  string
		want   bool
	}{
		{CheckedDefault, "", "", true},
		{CheckedDefault, "", "Handoff", false},
		{CheckedDefault, "off", "", false},
		{CheckedDefault, "on", "Handoff", true},
		{CheckedOn, "off", "", true},
		{CheckedOff, "on", "", false},
	} {
		t.Setenv(envChecked, c.env)
		bench.Value.Set(c.bench)
		if got, err := c.choice.resolve(); err != nil || got != c.want {
			t.Errorf("choice %d, %s=%q, -test.bench=%q: checked %v (%v), want %v", c.choice, envChecked, c.env, c.bench, got, err, c.want)
		}
	}
	t.Setenv(envChecked, "yes")
	if _, err := CheckedDefault.resolve(); err == nil {
		t.Errorf("%s=yes was accepted", envChecked)
	}
}
