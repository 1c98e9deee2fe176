package orwl

import (
	"strings"
	"testing"

	"github.com/orwl-go/orwl/checkpoint"
)

// testRestart returns the checkpointer of rank 1 of a job of 2 tasks on 2 processes, before
// the plan of a restart from checkpoint 5, whose piece 1 (task 1's state, data) rank 0 sends.
func testRestart(data []byte) (*checkpointer, planPart) {
	j := &job{tasks: 2, rank: 1, procs: 2, owner: []int{0, 1}}
	c := &checkpointer{j: j, restart: &restart{planned: make(chan struct{}), arrived: make(chan struct{})}}
	crc := checkpoint.Checksum(data)
	plan := planPart{Rank: 1, Plan: checkpoint.Plan{Checkpoint: 5,
		Pieces: []checkpoint.PieceInfo{{Key: checkpoint.LocationKey(0, "v"), Size: 8, CRC: crc}, {Key: checkpoint.StateKey(1, "acc"), Size: int64(len(data)), CRC: crc}},
		From:   []int{0, 0}, Dirs: []string{"/a", "/a"}}, Index: []int{0, 1}}
	return c, plan
}

// TestPartsAreChecked: the parts of a piece sent at a restart must come from the process
// the plan names, in order, and the piece they make must have its manifest's checksum; an
// error names the piece. Parts that come before the plan wait for it.
func TestPartsAreChecked(t *testing.T) {
	data := []byte("abcdefgh")
	c, plan := testRestart(data)
	if err := c.install(plan, ""); err != nil {
		t.Fatal(err)
	}
	part := func(from, piece int, off int64, b string) error {
		c.restart.mu.Lock()
		defer c.restart.mu.Unlock()
		return c.part(from, partMsg{k: 5, piece: uint32(piece), off: off}, []byte(b))
	}
	for _, bad := range []struct {
		err  error
		want string
	}{
		{part(0, 0, 0, "abcdefgh"), "piece number 0, which this process is not to be sent"},
		{part(1, 1, 0, "abc"), "piece number 1, which this process is not to be sent by that rank"},
		{part(0, 1, 0, "abc"), ""},
		{part(0, 1, 4, "efgh"), `task 1 state "acc": 4 bytes at offset 4, after 3 of its 8`},
		{part(0, 1, 3, "defghi"), `6 bytes at offset 3, after 3 of its 8`},
		{part(0, 1, 3, "deFgh"), `checkpoint 5: piece task 1 state "acc" arrived corrupted (crc32c`},
	} {
		if bad.want == "" && bad.err != nil || bad.want != "" && (bad.err == nil || !strings.Contains(bad.err.Error(), bad.want)) {
			t.Errorf("error %v, want one with %q", bad.err, bad.want)
		}
	}
	select {
	case <-c.restart.arrived:
		t.Fatal("a corrupted piece arrived")
	default:
	}

	c, plan = testRestart(data)
	c.restartMessage(0, partMsg{k: 5, piece: 1, off: 0}, data[:5])
	c.restartMessage(0, partMsg{k: 5, piece: 1, off: 5}, data[5:])
	if err := c.install(plan, ""); err != nil {
		t.Fatal(err)
	}
	<-c.restart.arrived
	got := make([]byte, len(data))
	if err := c.restart.load(1, got); err != nil || string(got) != string(data) || c.start() != 5 {
		t.Fatalf("load: %q, %v; start %d", got, err, c.start())
	}
	if err := c.install(plan, ""); err == nil {
		t.Fatal("a second plan was taken")
	}
}
