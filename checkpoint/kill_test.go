package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// writer is the process TestKillDuringWrite kills: it restarts from the newest checkpoint
// in dir, as a job would, then writes checkpoints one after another, printing a line after
// each piece and each commit, until it is killed.
func writer(dir string) int {
	s, err := Create(dir, testJob)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c, _, err := Find([]string{dir}, testJob)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	k := 1
	if c != nil {
		k = c.Number + 1
	}
	for ; ; k++ {
		var infos []PieceInfo
		for _, key := range testKeys() {
			info, err := s.WritePiece(k, key, killContent(k, key))
			if err != nil {
				fmt.Println("error", err)
				return 1
			}
			infos = append(infos, info)
			fmt.Println("piece", k)
		}
		if err := s.Commit(k, infos); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("commit", k)
	}
}

// killContent is content large enough that a kill often lands inside a write.
func killContent(k int, key Key) []byte {
	b := make([]byte, 64<<10+k)
	copy(b, content(k, key))
	b[len(b)-1] = byte(k)
	return b
}

// A process killed (SIGKILL) at random moments while it writes checkpoints, several times
// over, always leaves the last checkpoint it committed, or a newer one, complete and
// correct, with nothing to report.
func TestKillDuringWrite(t *testing.T) {
	dir := t.TempDir()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	last := 0
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		for n := 1 + rng.IntN(40); n > 0 && lines.Scan(); n-- {
			if strings.HasPrefix(lines.Text(), "error") {
				t.Fatalf("round %d: writer: %s", round, lines.Text())
			}
			var k int
			if _, err := fmt.Sscanf(lines.Text(), "commit %d", &k); err == nil {
				last = k
			}
		}
		cmd.Process.Kill()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: writer ended with %v before it was killed", round, err)
		}
		c, notes, err := Find([]string{dir}, testJob)
		if err != nil || len(notes) != 0 || last > 0 && (c == nil || c.Number < last) {
			t.Fatalf("round %d: after a kill past commit %d: %+v, %q, %v", round, last, c, notes, err)
		}
		if c == nil { // killed before its first commit
			continue
		}
		for _, key := range testKeys() {
			got := make([]byte, len(killContent(c.Number, key)))
			if err := c.Load(key, got); err != nil || string(got) != string(killContent(c.Number, key)) {
				t.Fatalf("round %d: checkpoint %d piece %v: %v", round, c.Number, key, err)
			}
		}
		es, err := list(dir)
		complete := 0
		for _, e := range es {
			if e.complete {
				complete++
			}
		}
		if err != nil || complete > 3 { // 3 when killed between a commit and its removals
			t.Fatalf("round %d: %d complete checkpoints (%v), want at most 3", round, complete, err)
		}
		last = c.Number
	}
}
