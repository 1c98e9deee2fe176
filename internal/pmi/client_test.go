package pmi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/pmi"
	"github.com/orwl-go/orwl/internal/testemu/pmitest"
)

// pair connects a client end to a server end in this process.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/pmi.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func endpoint(rank, size, version int) pmi.Endpoint {
	return pmi.Endpoint{FD: -1, Addr: "test:1", ID: -1, Rank: rank, Size: size, Version: version}
}

// Rank 0 puts two values; after the fence every process gets them; a key nobody put is
// ErrNotFound. Both versions, against the test server.
func TestExchange(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprint("PMI-", version), func(t *testing.T) {
			const size = 3
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv := pmitest.NewServer(size)
			defer srv.Close()
			var wg sync.WaitGroup
			got := make([]string, size)
			errs := make([]error, size)
			for rank := range size {
				c, s := pair(t)
				srv.Go(s, rank)
				wg.Go(func() {
					errs[rank] = func() error {
						cl, err := pmi.NewClient(ctx, c, endpoint(rank, size, version))
						if err != nil {
							return err
						}
						if cl.Rank() != rank || cl.Size() != size || cl.Version() != version {
							return fmt.Errorf("client says rank %d of %d, version %d", cl.Rank(), cl.Size(), cl.Version())
						}
						if rank == 0 {
							if err := cl.Put(ctx, "orwl-coord", "10.0.0.1:4242"); err != nil {
								return err
							}
							if err := cl.Put(ctx, "orwl-secret", "00ff"); err != nil {
								return err
							}
						}
						if err := cl.Fence(ctx); err != nil {
							return err
						}
						a, err := cl.Get(ctx, "orwl-coord")
						if err != nil {
							return err
						}
						b, err := cl.Get(ctx, "orwl-secret")
						if err != nil {
							return err
						}
						if _, err := cl.Get(ctx, "nobody"); !errors.Is(err, pmi.ErrNotFound) {
							return fmt.Errorf("get of a key nobody put: %v, want ErrNotFound", err)
						}
						got[rank] = a + " " + b
						return cl.Finalize(ctx)
					}()
				})
			}
			wg.Wait()
			for rank, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", rank, err)
				}
				if got[rank] != "10.0.0.1:4242 00ff" {
					t.Fatalf("rank %d got %q", rank, got[rank])
				}
			}
			srv.Close()
			if err := srv.Wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// script serves canned answers: for each request line it reads, it writes the next answer.
func script(t *testing.T, conn net.Conn, v2 bool, answers ...string) {
	t.Helper()
	go func() {
		buf := make([]byte, 4096)
		for i, a := range answers {
			if _, err := conn.Read(buf); err != nil {
				return
			}
			if v2 && i > 0 {
				a = fmt.Sprintf("%-6d%s", len(a), a)
			}
			if a == "" {
				continue // read, do not answer
			}
			conn.Write([]byte(a))
		}
	}()
}

func TestClientErrors(t *testing.T) {
	init1 := []string{"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=16\n", "cmd=my_kvsname kvsname=kvs_7\n"}
	tests := []struct {
		name    string
		v2      bool
		answers []string
		op      func(ctx context.Context, c *pmi.Client) error
		want    []string // in the error
	}{
		{name: "refused init", answers: []string{"cmd=response_to_init rc=-1 msg=nope\n"},
			want: []string{"PMI_PORT=test:1", "cmd=init", "rc=-1 nope"}},
		{name: "wrong version", v2: true, answers: []string{"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"},
			want: []string{"cmd=init", "speaks PMI version 1", "ORWL_PMI=1"}},
		{name: "wrong answer", answers: []string{"cmd=barrier_out\n"},
			want: []string{"cmd=init", `answered "cmd=barrier_out"`, "want cmd=response_to_init"}},
		{name: "garbage", answers: []string{"hello\n"},
			want: []string{"cmd=init", "malformed"}},
		{name: "bad maxes", answers: []string{init1[0], "cmd=maxes vallen_max=x\n"},
			want: []string{"cmd=get_maxes", "vallen_max"}},
		{name: "no kvsname", answers: []string{init1[0], init1[1], "cmd=my_kvsname\n"},
			want: []string{"cmd=get_my_kvsname", "kvsname"}},
		{name: "launcher gone", answers: init1,
			op:   func(ctx context.Context, c *pmi.Client) error { return c.Fence(ctx) },
			want: []string{"cmd=barrier_in", "did the launcher go away"}},
		{name: "timeout", answers: append(init1[:3:3], ""),
			op:   func(ctx context.Context, c *pmi.Client) error { return c.Fence(ctx) },
			want: []string{"cmd=barrier_in", "deadline exceeded"}},
		{name: "value too long for the server", answers: init1,
			op:   func(ctx context.Context, c *pmi.Client) error { return c.Put(ctx, "k", strings.Repeat("v", 17)) },
			want: []string{"cmd=put", "value of key k (17 bytes)", "1 to 16"}},
		{name: "bad key", answers: init1,
			op:   func(ctx context.Context, c *pmi.Client) error { _, err := c.Get(ctx, "a b"); return err },
			want: []string{"cmd=get", `key "a b"`}},
		{name: "refused put", answers: append(init1[:3:3], "cmd=put_result rc=1 msg=full\n"),
			op:   func(ctx context.Context, c *pmi.Client) error { return c.Put(ctx, "k", "v") },
			want: []string{"cmd=put", "rc=1 full"}},
		{name: "v2 fullinit without size", v2: true, answers: []string{"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n", "cmd=fullinit-response;rc=0;rank=0;"},
			want: []string{"cmd=fullinit", "no integer size"}},
		{name: "v2 refused fence", v2: true,
			answers: []string{"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n", "cmd=fullinit-response;rc=0;rank=0;size=2;", "cmd=kvs-fence-response;rc=5;errmsg=broken;"},
			op:      func(ctx context.Context, c *pmi.Client) error { return c.Fence(ctx) },
			want:    []string{"cmd=kvs-fence", "rc=5 broken"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.name == "timeout" {
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			}
			c, s := pair(t)
			script(t, s, tc.v2, tc.answers...)
			version := 1
			if tc.v2 {
				version = 2
			}
			cl, err := pmi.NewClient(ctx, c, endpoint(0, 2, version))
			if err == nil && tc.op != nil {
				if tc.name == "launcher gone" {
					s.Close() // after answering the init
				}
				err = tc.op(ctx, cl)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for _, s := range kv {
			k, v, _ := strings.Cut(s, "=")
			m[k] = v
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	e, ok, err := pmi.FromEnv(env("PMI_FD=6", "PMI_RANK=2", "PMI_SIZE=3", "PMI_JOBID=77"), 2)
	if want := (pmi.Endpoint{FD: 6, ID: -1, Rank: 2, Size: 3, JobID: "77", Version: 2}); !ok || err != nil || e != want {
		t.Errorf("FromEnv = %+v, %v, %v; want %+v", e, ok, err, want)
	}
	e, ok, err = pmi.FromEnv(env("PMI_PORT=node1:5000", "PMI_ID=4"), 1)
	if want := (pmi.Endpoint{FD: -1, Addr: "node1:5000", ID: 4, Rank: -1, Version: 1}); !ok || err != nil || e != want || e.String() != "PMI_PORT=node1:5000" {
		t.Errorf("FromEnv = %+v, %v, %v; want %+v", e, ok, err, want)
	}
	if _, ok, err := pmi.FromEnv(env("PMI_RANK=1", "PMI_SIZE=2"), 1); ok || err != nil {
		t.Errorf("FromEnv without PMI_FD or PMI_PORT: %v, %v", ok, err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"PMI_FD=x"}, "PMI_FD"},
		{[]string{"PMI_FD=-3"}, "PMI_FD"},
		{[]string{"PMI_PORT=nohostport"}, "PMI_PORT"},
		{[]string{"PMI_FD=3", "PMI_RANK=one"}, "PMI_RANK"},
		{[]string{"PMI_FD=3", "PMI_SIZE=0"}, "PMI_SIZE"},
		{[]string{"PMI_PORT=h:1", "PMI_ID=-1"}, "PMI_ID"},
	} {
		if _, _, err := pmi.FromEnv(env(tc.env...), 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromEnv(%v): %v, want an error naming %s", tc.env, err, tc.want)
		}
	}
	if _, _, err := pmi.FromEnv(env("PMI_FD=3"), 3); err == nil {
		t.Error("FromEnv accepted version 3")
	}
}

func TestDialErrors(t *testing.T) {
	ctx := context.Background()
	f, err := os.CreateTemp(t.TempDir(), "notasocket")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd())) // Dial takes the descriptor over
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pmi.Dial(ctx, pmi.Endpoint{FD: fd, ID: -1, Rank: 0, Version: 1}); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("PMI_FD=%d: not a socket", fd)) {
		t.Errorf("Dial of a regular file: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := pmi.Dial(ctx, pmi.Endpoint{FD: -1, Addr: addr, ID: -1, Version: 1}); err == nil || !strings.Contains(err.Error(), "PMI_PORT="+addr) {
		t.Errorf("Dial of a closed port: %v", err)
	}
}
