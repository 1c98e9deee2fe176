package orwl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/transport"
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

// queueOfX returns j's queue of task 0's location "x" (see connectedPair).
func queueOfX(t *testing.T, j *job) handle.Queue {
	t.Helper()
	q, err := j.queue(Location{Task: 0, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestRequestForMissingLocationIsRefused: a request for a location the owner does not have
// fails with a clear error, and the job goes on.
func TestRequestForMissingLocationIsRefused(t *testing.T) {
	jobs := connectedPair(t)
	ctx := context.Background()
	bogus := &remoteQueue{r: &jobs[1].node.req, owner: 0, loc: 9999}
	h := handle.New(bogus, handle.Spec{Task: 1, Location: "nowhere", Mode: fifo.Read}, nil)
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	err := h.Acquire(ctx)
	if err == nil || !strings.Contains(err.Error(), "rank 0 refused the request: orwl: rank 0 owns no location numbered 9999") {
		t.Fatalf("acquire of a missing location: %v", err)
	}
	// The job is unharmed: a real location of rank 0 is served.
	q := queueOfX(t, jobs[1])
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

// The request of an iterative remote handle's next round, which waits to go with the release
// of its grant, still enters the owner's FIFO before a request the task makes after it (rule
// 14): here a write requested in the section, which must wait for the read's next round.
func TestNextRoundGoesBeforeALaterRequest(t *testing.T) {
	jobs := connectedPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := queueOfX(t, jobs[1])
	jobs[1].requestsLive.Store(false) // the iterative handle's first request comes from the schedule
	it := handle.New(q, handle.Spec{Task: 1, Location: `task 0 "x"`, Mode: fifo.Read, Iterative: true}, nil)
	if err := it.Request(); err != nil {
		t.Fatal(err)
	}
	jobs[1].requestsLive.Store(true)
	if err := it.Acquire(ctx); err != nil { // requests round 1
		t.Fatal(err)
	}
	w := handle.New(q, handle.Spec{Task: 1, Location: `task 0 "x"`, Mode: fifo.Write}, nil)
	if err := w.Request(); err != nil {
		t.Fatal(err)
	}
	if err := it.Release(); err != nil {
		t.Fatal(err)
	}
	if err := it.Acquire(ctx); err != nil { // round 1, ahead of the write: granted once round 0 is released
		t.Fatalf("the read's next round, requested before the write: %v", err)
	}
	if w.Test() {
		t.Fatal("the write, requested after the read's next round, is granted while that round is held")
	}
	if err := it.Release(); err != nil {
		t.Fatal(err)
	}
	if err := w.Section(ctx, func([]byte) error { return nil }); err != nil {
		t.Fatalf("the write after the read's round 1: %v", err)
	}
}

// A release that carries the request of a next round for a ticket without rounds is a
// broken peer: the job fails with a protocol error naming the ticket.
func TestNextRoundOfATicketWithoutRounds(t *testing.T) {
	jobs := connectedPair(t)
	q := queueOfX(t, jobs[1])
	h := handle.New(q, handle.Spec{Task: 1, Location: `task 0 "x"`, Mode: fifo.Read}, nil)
	if err := h.Request(); err != nil {
		t.Fatal(err)
	}
	if err := h.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	var id uint64 // the ticket of h: the one active ticket of rank 1
	jobs[1].node.req.mu.Lock()
	tab := jobs[1].node.req.table()
	for i := range tab {
		if tk := tab[i].Load(); tk != nil && tk.active.Load() {
			id = tk.id
		}
	}
	jobs[1].node.req.mu.Unlock()
	m := releaseMsg{loc: q.(*remoteQueue).loc, ticket: id, next: id + 1}
	if err := jobs[1].mesh.Send(0, transport.Requester, m.header(), nil); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("protocol error from rank 1: release of ticket %d with the request of a next round, and it has no rounds", id)
	for end := time.Now().Add(10 * time.Second); jobs[0].failure() == nil && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if err := jobs[0].failure(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("rank 0's failure: %v; want it to say %q", err, want)
	}
}

// Two iterative read handles of one process on the same remote location, acquired one after
// the other and released in the same order: the second one's acquire sends the first one's
// next request, which waits for a release (remoteQueue.next), ahead of its own; then the
// first release goes alone and the second carries its next request. Every round, both read
// what the owner's writer wrote in that round.
func TestTwoIterativeReadersOfOneLocation(t *testing.T) {
	jobs := connectedPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const rounds = 200
	local := queueOfX(t, jobs[0])
	remote := queueOfX(t, jobs[1])
	jobs[0].requestsLive.Store(false) // the first requests come from the schedule, in FIFO order
	jobs[1].requestsLive.Store(false)
	w := handle.New(local, handle.Spec{Task: 0, Location: `task 0 "x"`, Mode: fifo.Write, Iterative: true}, nil)
	if err := w.Request(); err != nil {
		t.Fatal(err)
	}
	var readers [2]*handle.Handle
	for i := range readers {
		readers[i] = handle.New(remote, handle.Spec{Task: 1, Location: `task 0 "x"`, Pos: 1 + i, Mode: fifo.Read, Iterative: true}, nil)
		if err := readers[i].Request(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := jobs[0].ownLocation(Location{Task: 0, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for queued := 0; queued < 1+len(readers); { // the schedule's barrier: every first request placed
		if ctx.Err() != nil {
			t.Fatalf("%d of %d first requests placed", queued, 1+len(readers))
		}
		time.Sleep(time.Millisecond)
		l.mu.Lock()
		queued = 0
		l.fifo.Each(func(*fifo.Request) { queued++ })
		l.mu.Unlock()
	}
	jobs[0].requestsLive.Store(true)
	jobs[1].requestsLive.Store(true)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		for k := range rounds {
			if werr = w.Acquire(ctx); werr != nil {
				return
			}
			b, err := w.Resize(8)
			if err != nil {
				werr = err
				return
			}
			binary.LittleEndian.PutUint64(b, uint64(k))
			if werr = w.Release(); werr != nil {
				return
			}
		}
	})
	for k := range rounds {
		for i, r := range readers {
			if err := r.Acquire(ctx); err != nil {
				t.Fatalf("round %d, reader %d: %v", k, i, err)
			}
			if got := binary.LittleEndian.Uint64(r.Map()); got != uint64(k) {
				t.Fatalf("round %d, reader %d read %d", k, i, got)
			}
		}
		for i, r := range readers {
			if err := r.Release(); err != nil {
				t.Fatalf("round %d, reader %d: %v", k, i, err)
			}
		}
	}
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
}

// Once a rank is lost, a request on one of its locations fails with the loss
// (requester.lose, remoteQueue.Request).
func TestRequestOnALostRankFails(t *testing.T) {
	jobs := connectedPair(t)
	lost := errors.New("rank 0 lost for the test")
	jobs[1].node.req.lose(0, lost)
	h := handle.New(queueOfX(t, jobs[1]), handle.Spec{Task: 1, Location: `task 0 "x"`, Mode: fifo.Read}, nil)
	if err := h.Request(); !errors.Is(err, lost) {
		t.Fatalf("request on a location of the lost rank: %v; want it to wrap %v", err, lost)
	}
}

// The requester's ticket table grows as tickets are registered, and find, which takes no
// lock, returns every active ticket, for its owner's rank only; a retired ticket's id is
// handed out again.
func TestTicketTable(t *testing.T) {
	r := &requester{j: &job{}}
	q := &remoteQueue{r: r, owner: 1}
	h := handle.New(q, handle.Spec{Task: 0, Location: `task 1 "x"`, Mode: fifo.Read}, nil)
	register := func() *remoteTicket {
		r.mu.Lock()
		defer r.mu.Unlock()
		tk := r.newTicket(q, h)
		tk.active.Store(true)
		return tk
	}
	var tickets []*remoteTicket
	for range 40 { // the table grows twice
		tickets = append(tickets, register())
	}
	for i, tk := range tickets {
		if tk.id != uint64(i+1) {
			t.Fatalf("ticket %d has id %d, want %d", i, tk.id, i+1)
		}
		if got := r.find(1, tk.id); got != tk {
			t.Fatalf("find(1, %d) = %p, want %p", tk.id, got, tk)
		}
		if got := r.find(0, tk.id); got != nil {
			t.Fatalf("find(0, %d), on the wrong rank, = %p, want nil", tk.id, got)
		}
	}
	tickets[3].active.Store(false)
	if got := r.find(1, tickets[3].id); got != nil {
		t.Fatalf("find of an inactive ticket = %p, want nil", got)
	}
	id := tickets[5].id
	r.retire(tickets[5])
	if got := r.find(1, id); got != nil {
		t.Fatalf("find of a retired id = %p, want nil", got)
	}
	if again := register(); again.id != id || r.find(1, id) != again {
		t.Fatalf("the next ticket has id %d, want the retired %d, found again", again.id, id)
	}
	if got := r.find(1, 1000); got != nil {
		t.Fatalf("find of an id never handed out = %p, want nil", got)
	}
}

// A view's grant whose owner has ended before this process could map the data does not
// fail the job as a protocol error: the owner's loss, which the transport reports within
// the peer timeout, names the cause, and the grant waits for it. (Before: "protocol error
// from rank 0: grant of ...: hugemem: opening process ...'s shared memory".)
func TestViewOfAnEndedOwnerWaitsForItsLoss(t *testing.T) {
	jobs := connectedPair(t)
	ctx := context.Background()
	w := handle.New(queueOfX(t, jobs[0]), handle.Spec{Task: 0, Location: `task 0 "x"`, Mode: fifo.Write}, nil)
	if err := w.Request(); err != nil {
		t.Fatal(err)
	}
	if err := w.Acquire(ctx); err != nil { // holds x: the remote read waits behind it
		t.Fatal(err)
	}
	q := queueOfX(t, jobs[1]).(*remoteQueue)
	r := handle.New(q, handle.Spec{Task: 1, Location: `task 0 "x"`, Mode: fifo.Read}, nil)
	if err := r.Request(); err != nil {
		t.Fatal(err)
	}
	var ticket *remoteTicket
	for id := range uint64(8) {
		if ticket = jobs[1].node.req.find(0, id); ticket != nil {
			break
		}
	}
	if ticket == nil {
		t.Fatal("the read's ticket is not found")
	}
	ended := exec.Command(os.Args[0], "-test.run=^$")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	g := grantMsg{loc: q.loc, ticket: ticket.id, version: 1, view: true}
	h := g.header()
	payload := hugemem.Share{PID: int32(ended.Process.Pid), FD: 3, Len: hugemem.Threshold}.Append(nil)
	h.Len = uint64(len(payload))
	jobs[1].node.Handle(0, &h, payload)
	if err := jobs[1].failure(); err != nil {
		t.Fatalf("a view of an ended owner failed the job: %v", err)
	}
	if ticket.latch.Granted() {
		t.Fatal("a view that could not be mapped granted the read")
	}
}
