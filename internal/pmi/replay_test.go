package pmi_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/pmi"
	"github.com/orwl-go/orwl/internal/testemu/pmitest"
)

// TestRecordedExchanges replays the server side of exchanges recorded from real launchers
// (testdata/*/rank*.txt: SLURM's mpi/pmi2 plugin and MPICH's Hydra, PMI-1 and PMI-2) and
// drives the client through the operations of the recording: the client must send the
// recorded requests byte for byte and understand the recorded answers.
func TestRecordedExchanges(t *testing.T) {
	files, err := filepath.Glob("testdata/*/rank*.txt")
	if err != nil || len(files) < 12 {
		t.Fatalf("recordings: %v, %v", files, err)
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := pmitest.ParseScript(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			reqs, answers := messages(t, s)
			v, _ := reqs[0].Get("pmi_version")
			version, _ := strconv.Atoi(v)
			rank, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "rank"), ".txt"))
			e := pmi.Endpoint{FD: -1, Addr: "recording:0", ID: -1, Rank: rank, Size: 3, Version: version}
			skip := 3 // PMI-1: init, get_maxes, get_my_kvsname
			if version == 2 {
				e.JobID, _ = reqs[1].Get("pmijobid")
				skip = 2
			}
			ops := reqs[skip:]
			answers = answers[len(reqs)-len(ops):]

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, srv := pair(t)
			replayed := make(chan error, 1)
			go func() {
				err := pmitest.Replay(srv, s)
				if err != nil {
					srv.Close() // the client stops waiting
				}
				replayed <- err
			}()
			fail := func(err error) {
				t.Helper()
				select {
				case rerr := <-replayed:
					t.Fatalf("%v\n%v", rerr, err)
				case <-time.After(time.Second):
					t.Fatal(err)
				}
			}
			cl, err := pmi.NewClient(ctx, c, e)
			if err != nil {
				fail(err)
			}
			if cl.Rank() != rank || cl.Size() != 3 {
				t.Fatalf("client says rank %d of %d", cl.Rank(), cl.Size())
			}
			for i, op := range ops {
				key, _ := op.Get("key")
				switch op.Cmd {
				case "put", "kvs-put":
					val, _ := op.Get("value")
					err = cl.Put(ctx, key, val)
				case "barrier_in", "kvs-fence":
					err = cl.Fence(ctx)
				case "get", "kvs-get":
					var got string
					got, err = cl.Get(ctx, key)
					if want, _ := answers[i].Get("value"); err == nil && got != want {
						t.Fatalf("get %s = %q, the recording answered %q", key, got, want)
					}
				case "finalize":
					err = cl.Finalize(ctx)
				default:
					t.Fatalf("recording has request %q", op)
				}
				if err != nil {
					fail(err)
				}
			}
			if err := <-replayed; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// messages splits a recording into the client's requests and the server's answers.
func messages(t *testing.T, s pmitest.Script) (reqs, answers []pmi.Message) {
	t.Helper()
	var server []byte
	for _, c := range s {
		if !c.FromClient {
			server = append(server, c.Data...)
		}
	}
	read := func(data []byte) []pmi.Message {
		r := bufio.NewReader(bytes.NewReader(data))
		first, err := pmi.ReadV1(r)
		if err != nil {
			t.Fatal(err)
		}
		out := []pmi.Message{first}
		v2 := bytes.Contains(s.Requests()[:64], []byte("pmi_version=2"))
		for {
			var m pmi.Message
			if v2 {
				m, err = pmi.ReadV2(r)
			} else {
				m, err = pmi.ReadV1(r)
			}
			if err != nil {
				return out
			}
			out = append(out, m)
		}
	}
	reqs, answers = read(s.Requests()), read(server)
	if len(reqs) != len(answers) || reqs[0].Cmd != "init" {
		t.Fatalf("recording of %d requests and %d answers, first %q", len(reqs), len(answers), reqs[0])
	}
	return reqs, answers
}
