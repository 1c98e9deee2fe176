package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func msg(cmd string, kv ...string) Message {
	m := Message{Cmd: cmd}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Attrs = append(m.Attrs, Attr{kv[i], kv[i+1]})
	}
	return m
}

// parseCase is one input of a parser and what it must give; bad: an error wrapping
// ErrMalformed.
type parseCase struct {
	in   string
	want Message
	bad  bool
}

func checkParse(t *testing.T, name string, parse func([]byte) (Message, error), tests []parseCase) {
	t.Helper()
	for _, tc := range tests {
		got, err := parse([]byte(tc.in))
		switch {
		case tc.bad && (err == nil || !errors.Is(err, ErrMalformed)):
			t.Errorf("%s(%q) = %+v, %v; want an error wrapping ErrMalformed", name, tc.in, got, err)
		case !tc.bad && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("%s(%q) = %+v, %v; want %+v", name, tc.in, got, err, tc.want)
		}
	}
}

func TestParseV1(t *testing.T) {
	checkParse(t, "ParseV1", ParseV1, []parseCase{
		{in: "cmd=barrier_out\n", want: msg("barrier_out")},
		{in: "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n", want: msg("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0")},
		{in: "cmd=get_result rc=0 msg=success value=10.0.0.1:4242", want: msg("get_result", "rc", "0", "msg", "success", "value", "10.0.0.1:4242")},
		{in: "cmd=maxes  kvsname_max=256   keylen_max=64 vallen_max=1024 \n", want: msg("maxes", "kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")},
		{in: `cmd=get_result value=a\ b\\c rc=0`, want: msg("get_result", "value", `a b\c`, "rc", "0")},
		{in: "cmd=put kvsname=kvs_1 key=orwl-coord value=[::1]:7", want: msg("put", "kvsname", "kvs_1", "key", "orwl-coord", "value", "[::1]:7")},
		{in: "cmd=set debug", want: msg("set", "debug", "")},
		{in: "cmd=x a==b", want: msg("x", "a", "=b")},
		{in: "", bad: true},
		{in: "barrier_out\n", bad: true},
		{in: "cmd=\n", bad: true},
		{in: "cmd=x =y", bad: true},
		{in: "cmd=x a;b=1", bad: true},
		{in: "cmd=x a=\x00", bad: true},
		{in: " cmd=x", bad: true},
	})
}

func TestParseV2(t *testing.T) {
	checkParse(t, "ParseV2", ParseV2, []parseCase{
		{in: "cmd=kvs-fence-response;rc=0;", want: msg("kvs-fence-response", "rc", "0")},
		{in: "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=3;appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
			want: msg("fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", "1", "size", "3", "appnum", "-1", "debugged", "FALSE", "pmiverbose", "FALSE")},
		{in: "cmd=kvs-get-response;rc=0;found=TRUE;value=a b=c", want: msg("kvs-get-response", "rc", "0", "found", "TRUE", "value", "a b=c")},
		{in: "cmd=kvs-get-response;value=;", want: msg("kvs-get-response", "value", "")},
		{in: "cmd=x;;", bad: true},
		{in: "rc=0;cmd=x;", bad: true},
		{in: "cmd=;", bad: true},
		{in: "cmd=x;novalue;", bad: true},
		{in: "cmd=x;k=a\nb;", bad: true},
		{in: "cmd=x;k\xff=1;", bad: true},
	})
}

func TestAppend(t *testing.T) {
	m := msg("kvs-put", "key", "orwl-coord", "value", "10.1.2.3:45678")
	if got, want := string(AppendV2(nil, m)), "48    cmd=kvs-put;key=orwl-coord;value=10.1.2.3:45678;"; got != want {
		t.Errorf("AppendV2 = %q, want %q", got, want)
	}
	if got, want := string(AppendV1([]byte("x"), msg("barrier_in"))), "xcmd=barrier_in\n"; got != want {
		t.Errorf("AppendV1 = %q, want %q", got, want)
	}
}

func TestReadFraming(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(string(AppendV2(nil, msg("a", "k", "v"))) + string(AppendV2(nil, msg("b"))) + "     6cmd=c;"))
	for _, want := range []Message{msg("a", "k", "v"), msg("b"), msg("c")} {
		if m, err := ReadV2(r); err != nil || !reflect.DeepEqual(m, want) {
			t.Fatalf("ReadV2 = %+v, %v; want %+v", m, err, want)
		}
	}
	for _, in := range []string{"3     cmd", "0     x", "9999999cmd=x;", "-1    x", "abc   cmd=x;"} {
		if _, err := ReadV2(strings.NewReader(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ReadV2(%q): %v, want ErrMalformed", in, err)
		}
	}
	if _, err := ReadV2(strings.NewReader("20    cmd=x;")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated body: %v, want io.ErrUnexpectedEOF", err)
	}
	long := bufio.NewReaderSize(strings.NewReader("cmd=x v="+strings.Repeat("a", 100)+"\n"), 16)
	if _, err := ReadV1(long); !errors.Is(err, ErrMalformed) {
		t.Errorf("line over the buffer: %v, want ErrMalformed", err)
	}
	if _, err := ReadV1(bufio.NewReader(strings.NewReader("cmd=x"))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("line without newline at EOF: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadV1(bufio.NewReader(strings.NewReader(""))); err != io.EOF {
		t.Errorf("empty stream: %v, want io.EOF", err)
	}
}

func TestValid(t *testing.T) {
	for _, k := range []string{"orwl-coord", "a", "A_b/9", strings.Repeat("k", 64)} {
		if !ValidKey(k) {
			t.Errorf("ValidKey(%q) = false", k)
		}
	}
	for _, k := range []string{"", "a b", "a=b", "a;b", strings.Repeat("k", 65), "é"} {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q) = true", k)
		}
	}
	for _, v := range []string{"10.0.0.1:80", "[fe80::1%eth0]:80", "deadbeef", strings.Repeat("v", 1024)} {
		if !ValidValue(v) {
			t.Errorf("ValidValue(%q) = false", v)
		}
	}
	for _, v := range []string{"", "a b", "a;b", `a\b`, "a\nb", "\x7f", strings.Repeat("v", 1025)} {
		if ValidValue(v) {
			t.Errorf("ValidValue(%q) = true", v)
		}
	}
}

// Whatever the bytes, the parsers return a message or an error wrapping ErrMalformed, and
// a message whose values are valid survives formatting and parsing again.
func FuzzParseV1(f *testing.F) {
	for _, s := range []string{"cmd=barrier_out\n", "cmd=get_result rc=0 value=x", `cmd=a b=\ c`, "cmd= ", "cmd=x a"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseV1(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !roundTrips(m) {
			return
		}
		again, err := ParseV1(AppendV1(nil, m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%+v formats to %q, which parses to %+v, %v", m, AppendV1(nil, m), again, err)
		}
	})
}

func FuzzParseV2(f *testing.F) {
	for _, s := range []string{"cmd=kvs-fence-response;rc=0;", "cmd=x;k=v", "cmd=x;;", "cmd=;k="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseV2(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !roundTrips(m) {
			return
		}
		framed := AppendV2(nil, m)
		again, err := ReadV2(bytes.NewReader(framed))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%+v frames to %q, which reads as %+v, %v", m, framed, again, err)
		}
	})
}

// roundTrips reports whether every value of m is carried unchanged by both formats.
func roundTrips(m Message) bool {
	if !ValidValue(m.Cmd) {
		return false
	}
	for _, a := range m.Attrs {
		if a.Value != "" && !ValidValue(a.Value) {
			return false
		}
	}
	return true
}
