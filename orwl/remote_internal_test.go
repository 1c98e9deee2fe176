package orwl

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// connectedPair builds the jobs of two processes of one job in this process, connected by a
// real mesh on loopback; task 0 runs on rank 0 and task 1 on rank 1.
func connectedPair(t *testing.T) [2]*job {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	coord := ln.Addr().String()
	ln.Close()
	var jobs [2]*job
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for rank := range 2 {
		j, err := newJob(Config{Tasks: 2, Locations: []string{"x"},
			Job: &Job{Rank: rank, Size: 2, Coord: coord, Secret: []byte("pair")}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		j.cancel = cancel
		jobs[rank] = j
		wg.Go(func() {
			ctx, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			errs[rank] = j.connect(ctx)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, j := range jobs {
			j.mesh.Close()
		}
	})
	for _, j := range jobs { // no schedule in this test: requests go straight to the FIFOs
		j.requestsLive.Store(true)
		for _, l := range j.owned {
			if l != nil {
				l.mu.Lock()
				l.scheduled = true
				l.mu.Unlock()
			}
		}
	}
	return jobs
}

// TestRequestForMissingLocationIsRefused: a request for a location the owner does not have
// fails with a clear error, and the job goes on.
func TestRequestForMissingLocationIsRefused(t *testing.T) {
	jobs := connectedPair(t)
	ctx := context.Background()
	bogus := &remoteQueue{n: jobs[1].node, owner: 0, loc: 9999}
	h := handle.New(bogus, handle.Spec{Task: 1, Location: "nowhere", Mode: fifo.Read}, nil)
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	err := h.Acquire(ctx)
	if err == nil || !strings.Contains(err.Error(), "rank 0 refused the request: orwl: rank 0 owns no location numbered 9999") {
		t.Fatalf("acquire of a missing location: %v", err)
	}
	// The job is unharmed: a real location of rank 0 is served.
	q, err := jobs[1].queue(Location{Task: 0, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	good := handle.New(q, handle.Spec{Task: 1, Location: `task 0 "x"`, Mode: fifo.Read}, nil)
	if err := good.Request(); err != nil {
		t.Fatal(err)
	}
	if err := good.Section(ctx, func([]byte) error { return nil }); err != nil {
		t.Fatalf("a valid request after the refused one: %v", err)
	}
}

// A failure relayed from another process that names this process as the one lost says so:
// this process was cut off from, or too slow for, the one that lost it.
func TestRelayedLossOfThisProcessSaysSo(t *testing.T) {
	jobs := connectedPair(t)
	m := failMsg{peerLost: true}
	h := m.header()
	jobs[1].node.Handle(0, &h, []byte("orwl: rank 2 failed: orwl: transport: process rank 1 lost: nothing received"))
	err := jobs[1].failure()
	if err == nil || !strings.Contains(err.Error(), "this process, rank 1, is the one the others lost") {
		t.Fatalf("rank 1's failure: %v", err)
	}
	jobs[0].node.Handle(1, &h, []byte("orwl: transport: process rank 2 lost: EOF"))
	if err := jobs[0].failure(); err == nil || strings.Contains(err.Error(), "is the one the others lost") {
		t.Fatalf("rank 0's failure, which names rank 2: %v", err)
	}
}

// A grant with data for a ticket this process no longer waits for is a broken peer while the
// job runs, and is discarded once the job has failed: the owner granted it before it heard of
// the failure, and refusing it would cut the connection, so that the owner would blame this
// process for the failure instead of the process that caused it.
func TestLateGrantAfterFailureIsDiscarded(t *testing.T) {
	jobs := connectedPair(t)
	g := grantMsg{loc: 0, ticket: 7, version: 2, data: true}
	h := g.header()
	h.Len = 8
	if _, err := jobs[1].node.Sink(0, &h); err == nil {
		t.Fatal("a running job takes data for a ticket it does not know")
	}
	lost := errors.New("orwl: transport: process rank 2 lost: EOF")
	jobs[1].fail(lost)
	buf, err := jobs[1].node.Sink(0, &h)
	if err != nil || buf != nil {
		t.Fatalf("a failed job's sink for a late grant: %v, %v; want the transport's scratch (nil, nil)", buf, err)
	}
	jobs[1].node.Handle(0, &h, make([]byte, 8))
	if err := jobs[1].failure(); !errors.Is(err, lost) {
		t.Fatalf("the failed job's error became %v", err)
	}
}
