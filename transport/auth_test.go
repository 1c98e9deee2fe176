package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A client with a wrong secret, or none, is refused and logged; the job
// then starts and works.
func TestWrongSecretRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	logs := logBuffer{lines: make(chan string, 100)}
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		m   *Mesh
		err error
	}
	r0 := newRecorder()
	done0 := make(chan result, 1)
	go func() {
		m, err := Start(ctx, Config{Rank: 0, Size: 2, Listener: ln, Coord: addr, Secret: testSecret, Handler: r0, Logger: logger})
		done0 <- result{m, err}
	}()

	// Wrong secret, as rank 1 registering.
	intruder := &Mesh{rank: 1, size: 2, cfg: Config{Secret: []byte("guess")}, done: make(chan struct{})}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+wsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = intruder.clientAuth(time.Time{}, newWire(ws.NetConn(), true), 0, purposeRegister)
	ws.Close()
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong secret: clientAuth = %v, want ErrAuth", err)
	}
	logs.waitLog(t, "wrong secret")
	// No secret at all: answer the challenge with garbage.
	ws, _, err = websocket.DefaultDialer.Dial("ws://"+addr+wsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.WriteMessage(websocket.BinaryMessage, []byte("let me in"))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("garbage hello was not refused")
	}
	ws.Close()
	logs.waitLog(t, "malformed message header")

	r1 := newRecorder()
	m1, err := Start(ctx, Config{Rank: 1, Size: 2, Coord: addr, Secret: testSecret, Handler: r1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	res := <-done0
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer closeAll([]*Mesh{res.m, m1})
	if err := m1.Send(0, Requester, Header{Type: TypeUser}, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if f := <-r0.frames; string(f.p) != "hi" {
		t.Fatalf("got %q", f.p)
	}
	barrier1 := make(chan error, 1)
	go func() { barrier1 <- m1.Barrier(ctx) }()
	if err := res.m.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-barrier1; err != nil {
		t.Fatal(err)
	}
	// After Start, the listener stays open for the connections made on first Send, and
	// still refuses a client without the secret, as a peer of the mesh.
	ws, _, err = websocket.DefaultDialer.Dial("ws://"+addr+wsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = intruder.clientAuth(time.Time{}, newWire(ws.NetConn(), true), 0, purposeMesh)
	ws.Close()
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong secret after the start: clientAuth = %v, want ErrAuth", err)
	}
}

func TestMismatchedSecretsFailStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var err0 error
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m *Mesh
		m, err0 = Start(ctx, Config{Rank: 0, Size: 2, Listener: ln, Coord: ln.Addr().String(), Secret: testSecret, Logger: quietLogger()})
		if m != nil {
			m.Close()
		}
	}()
	_, err1 := Start(ctx, Config{Rank: 1, Size: 2, Coord: ln.Addr().String(), Secret: []byte("other"), Logger: quietLogger()})
	wg.Wait()
	if !errors.Is(err1, ErrAuth) {
		t.Errorf("rank 1: %v, want ErrAuth", err1)
	}
	if err0 == nil || !strings.Contains(err0.Error(), "ranks [1] did not register") {
		t.Errorf("rank 0: %v, want an error naming rank 1", err0)
	}
}
