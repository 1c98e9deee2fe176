package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// treeSize is the number of processes of the tests of the tree: enough for a depth of 4.
const treeSize = 16

// A process connects only with its neighbours in the tree at the start, and with the peers
// it sends to when it first does: in a ring of 16 processes, where each sends to the next
// one on both roles and gets the answers, a process has a connection with at most 5 peers
// (its parent, two children, the next and the previous), not 15.
func TestConnectionsWhereNeeded(t *testing.T) {
	meshes, recs := startMeshes(t, treeSize, nil)
	for r, m := range meshes {
		if got, want := m.Connected(), len(m.treeNeighbours()); got != want {
			t.Errorf("rank %d: connected with %d peers after the start, want its %d neighbours in the tree", r, got, want)
		}
	}
	for r, m := range meshes {
		for _, role := range []Role{Requester, Owner} {
			if err := m.Send((r+1)%treeSize, role, Header{Type: TypeUser, Arg: int64(role)}, []byte(fmt.Sprint(r))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r, rec := range recs {
		for range 2 {
			f := <-rec.frames
			if want := (r + treeSize - 1) % treeSize; f.from != want || string(f.p) != fmt.Sprint(want) {
				t.Fatalf("rank %d got %q from %d, want %d's message", r, f.p, f.from, want)
			}
		}
	}
	for r, m := range meshes {
		if got := m.Connected(); got > 5 {
			t.Errorf("rank %d: connected with %d peers, want at most 5 (tree and ring)", r, got)
		}
	}
}

// A message to a peer not connected yet, sent right before Close, is delivered, and then
// the peer sees a clean close: Close waits for the dial that carries it (for closeWait at
// most) instead of cutting it, which left the peer a connection broken without a goodbye,
// the sender taken for lost and its last message (a job's failure, say) never read.
func TestCloseDeliversWhatWaitsForItsConnection(t *testing.T) {
	meshes, recs := startMeshes(t, treeSize, nil)
	from, to := treeSize-1, 0
	if meshes[from].Connected() != len(meshes[from].treeNeighbours()) || slices.Contains(meshes[from].treeNeighbours(), to) {
		t.Fatalf("rank %d is connected with rank %d at the start", from, to)
	}
	if err := meshes[from].Send(to, Requester, Header{Type: TypeUser, ID: 7}, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	meshes[from].Close()
	select {
	case f := <-recs[to].frames:
		if f.from != from || f.h.ID != 7 || string(f.p) != "last words" {
			t.Fatalf("rank %d got %+v, want rank %d's message", to, f, from)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("rank %d's message, sent before its Close, never reached rank %d", from, to)
	}
	awaitCleanClose(t, recs[to], to, from)
}

// A process that closes its mesh right after a peer first reached it goes cleanly for that
// peer too: Close waits for its dial back (the peer's Owner-role connection), which it
// would otherwise cut after the peer had accepted it.
func TestCloseAfterAFirstContactIsClean(t *testing.T) {
	meshes, recs := startMeshes(t, treeSize, nil)
	from, to := treeSize-1, 0
	if err := meshes[from].Send(to, Requester, Header{Type: TypeUser, ID: 8}, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-recs[to].frames:
	case <-time.After(5 * time.Second):
		t.Fatalf("rank %d's message never reached rank %d", from, to)
	}
	meshes[to].Close()
	awaitCleanClose(t, recs[from], from, to)
}

// awaitCleanClose waits until rank, whose Handler is rec, sees closed go: cleanly, as a
// process that closed its mesh (ErrPeerClosed), not one that broke its connections.
func awaitCleanClose(t *testing.T, rec *recorder, rank, closed int) {
	t.Helper()
	select {
	case err := <-rec.lost:
		if !errors.Is(err, ErrPeerClosed) {
			t.Fatalf("rank %d took rank %d for lost: %v; want a clean close (ErrPeerClosed)", rank, closed, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("rank %d never saw rank %d go", rank, closed)
	}
}

// crashed are the ways a process goes that the tests of the tree try: killed (its sockets
// closed without a goodbye) and stopped (silent, its sockets open: its writers are held, so
// that its heartbeats never leave, until the test's end).
var crashed = []struct {
	name  string
	crash func(t *testing.T, m *Mesh)
}{
	{"killed", func(_ *testing.T, m *Mesh) { crash(m) }},
	{"stopped", func(t *testing.T, m *Mesh) {
		m.eachConn(func(c *conn) { c.mu.Lock() })
		t.Cleanup(func() { m.eachConn(func(c *conn) { c.mu.Unlock() }) }) // before the meshes close
	}},
}

// A process that is lost is named by every other one within the peer timeout, though only
// its neighbour in the tree is connected with it: the loss spreads along the tree.
func TestLossOfAnUnconnectedProcessReachesAll(t *testing.T) {
	const lost = 13 // a leaf: only its parent, rank 6, watches it
	for _, how := range crashed {
		t.Run(how.name, func(t *testing.T) {
			meshes, recs := startMeshes(t, treeSize, func(rank int, c *Config) {
				// A peer timeout the start of 16 processes on a loaded host stays within.
				c.Heartbeat, c.PeerTimeout = 100*time.Millisecond, 1500*time.Millisecond
			})
			start := time.Now()
			how.crash(t, meshes[lost])
			for r, rec := range recs {
				if r == lost {
					continue
				}
				select {
				case err := <-rec.lost:
					var pl *PeerLostError
					if !errors.As(err, &pl) || pl.Rank != lost {
						t.Errorf("rank %d: PeerLost %v, want rank %d", r, err, lost)
					}
				case <-time.After(10 * time.Second): // a bound on a failure, not a wait
					t.Fatalf("rank %d: rank %d %s is not reported lost", r, lost, how.name)
				}
			}
			t.Logf("every process named rank %d %v after it was %s (peer timeout 1.5s)", lost, time.Since(start).Round(time.Millisecond), how.name)
			if err := meshes[0].Barrier(context.Background()); !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", lost)) {
				t.Errorf("Barrier after the loss: %v", err)
			}
		})
	}
}

// The barrier orders the Requester-role messages sent before it, with connections made on
// the way: each process sends to two peers that it is not connected with at first (its
// dials still going when it enters the barrier), and after each barrier every message sent
// before it has been delivered.
func TestBarrierOrdersMessagesWithPartialConnections(t *testing.T) {
	const rounds, per = 3, 20
	var counts [treeSize][treeSize]atomic.Int64 // counts[to][from]
	meshes, recs := startMeshes(t, treeSize, nil)
	for to, r := range recs {
		r.onRecv = func(from int, h *Header, p []byte) { counts[to][from].Add(1) }
	}
	targets := func(r int) []int { return []int{(r + 3) % treeSize, (r + 7) % treeSize} }
	var wg sync.WaitGroup
	errs := make(chan error, treeSize*rounds)
	for i, m := range meshes {
		wg.Go(func() {
			for round := 1; round <= rounds; round++ {
				for _, j := range targets(i) {
					for range per {
						if err := m.Send(j, Requester, Header{Type: TypeUser}, make([]byte, 64)); err != nil {
							errs <- err
							return
						}
					}
				}
				if err := m.Barrier(context.Background()); err != nil {
					errs <- err
					return
				}
				for from := range treeSize {
					for _, to := range targets(from) {
						if got := counts[to][from].Load(); to == i && got < int64(round*per) {
							errs <- fmt.Errorf("rank %d after barrier %d: %d messages from %d, want %d", i, round, got, from, round*per)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for r, m := range meshes {
		if got := m.Connected(); got > 7 {
			t.Errorf("rank %d: connected with %d peers, want at most 7 (tree and 4 targets)", r, got)
		}
	}
}

// The final barrier in the tree: every process agrees when none failed, though each closes
// its mesh as soon as its FinalBarrier returns; when one says it failed, every other one
// fails naming it, with ErrPeerFailed.
func TestFinalBarrierInTheTree(t *testing.T) {
	for _, failing := range []int{-1, 0, 6, 15} {
		t.Run(fmt.Sprintf("failing=%d", failing), func(t *testing.T) {
			meshes, _ := startMeshes(t, treeSize, nil)
			errs := make([]error, treeSize)
			var wg sync.WaitGroup
			for r, m := range meshes {
				wg.Go(func() {
					errs[r] = m.FinalBarrier(context.Background(), r == failing)
					m.Close() // at once, as Run does: its part of the tree goes with it
				})
			}
			wg.Wait()
			for r, err := range errs {
				switch {
				case failing < 0 || r == failing:
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				case !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d:", failing)):
					t.Errorf("rank %d: %v, want rank %d's failure", r, err, failing)
				}
			}
		})
	}
}

// Connect connects a process with the ranks it names, in both directions, and fails with
// the loss of one it cannot reach.
func TestConnect(t *testing.T) {
	meshes, _ := startMeshes(t, 8, nil)
	ctx := context.Background()
	if err := meshes[7].Connect(ctx, []int{1, 2, 7}); err != nil {
		t.Fatal(err)
	}
	for _, j := range []int{1, 2} {
		if meshes[7].peers[j].conns[Requester].Load() == nil || meshes[7].peers[j].conns[Owner].Load() == nil {
			t.Errorf("rank 7 is not connected with rank %d both ways", j)
		}
	}
	if err := meshes[7].Connect(ctx, []int{8}); err == nil {
		t.Error("Connect to rank 8 of a job of 8 succeeded")
	}
	meshes[5].Close()
	if err := meshes[7].Connect(ctx, []int{5}); !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 5") {
		t.Errorf("Connect to a closed process: %v", err)
	}
}

// A process that sends to one that has closed its mesh, with no connection between them,
// learns that it is gone, from the tree or from its dial (refused, or answered that the
// mesh closes), rather than after a dial's long retries; Send then fails.
func TestSendToAProcessThatClosed(t *testing.T) {
	meshes, recs := startMeshes(t, 8, nil)
	meshes[7].Close() // a leaf: rank 3 is connected with it, rank 5 is not
	meshes[5].Send(7, Requester, Header{Type: TypeUser}, nil)
	select {
	case err := <-recs[5].lost:
		var pl *PeerLostError
		if !errors.As(err, &pl) || pl.Rank != 7 {
			t.Fatalf("PeerLost %v, want rank 7", err)
		}
	case <-time.After(10 * time.Second): // a bound on a failure, not a wait
		t.Fatal("rank 7's close is not reported")
	}
	if err := meshes[5].Send(7, Requester, Header{Type: TypeUser}, nil); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("Send to a closed process: %v", err)
	}
}

// Every process passes a barrier and closes its mesh at once, processes that are not
// neighbours in the tree being connected too: a process still waiting for the tree's
// release learns from the goodbye of one that passed the barrier, or from the loss that
// its goodbye caused, that it is over, and its Barrier succeeds (as it did when every
// process waited for every other's marker).
func TestBarrierThenCloseWithPartialConnections(t *testing.T) {
	for round := range 3 {
		meshes, recs := startMeshes(t, treeSize, nil)
		for r, m := range meshes {
			if err := m.Send((r+5)%treeSize, Owner, Header{Type: TypeUser}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range recs { // delivered: both connections of each pair are up
			<-r.frames
		}
		var wg sync.WaitGroup
		for r, m := range meshes {
			wg.Go(func() {
				if err := m.Barrier(context.Background()); err != nil {
					t.Errorf("round %d, rank %d: %v", round, r, err)
				}
				m.Close()
			})
		}
		wg.Wait()
	}
}

// A process that others take for lost on a third's report (a partition between it and the
// third, say) hears who found it lost before their connections with it end: the error it
// reports for them names that process, not only the messengers that hung up on it; through
// shared memory and through sockets alike.
func TestLostProcessHearsWhoFoundIt(t *testing.T) {
	for _, sockets := range []bool{false, true} {
		t.Run(map[bool]string{false: "rings", true: "sockets"}[sockets], func(t *testing.T) {
			meshes, recs := startMeshes(t, 3, func(_ int, c *Config) { c.NoSharedMemory = sockets })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := meshes[1].Connect(ctx, []int{2}); err != nil { // not neighbours in the tree
				t.Fatal(err)
			}
			// Rank 0's report that it found rank 2 lost reaches rank 1 (as its reader
			// hands it over), while rank 2 is still connected with both.
			meshes[1].lostReport(0, &Header{Type: TypeLost, Arg: 2, Key: 0})
			for {
				select {
				case err := <-recs[2].lost:
					var pl *PeerLostError
					if !errors.As(err, &pl) {
						t.Fatalf("rank 2: %v", err)
					}
					if pl.Rank != 1 {
						continue
					}
					if !strings.Contains(err.Error(), "rank 0 found this process, rank 2, lost") {
						t.Errorf("rank 2's error for rank 1 does not say who found it lost: %v", err)
					}
					return
				case <-ctx.Done():
					t.Fatal("rank 2 still connected with rank 1, which took it for lost")
				}
			}
		})
	}
}
