package orwl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/checkpoint"
)

// Restarting from a checkpoint (docs/design.md, rule 19). The processes of a job need not see
// each other's directories (a disk per node): each one surveys the directories its pattern
// matches here (checkpoint.Survey) and, once the mesh is connected and before the tasks
// start, reports that inventory to rank 0 along the job's tree (tree.go), as the answers of
// a checkpoint go (checkpoint_tree.go): each process sends its parent one message, the
// inventories of its subtree (its own and those its children sent it), and rank 0 receives
// one from each child. Rank 0's coordinator (checkpoint_coord.go, in its state surveying)
// chooses the newest checkpoint complete across the union of the inventories and, for
// each piece, the process whose copy is read (checkpoint.Choose: the process that now runs
// the piece's task when it has an intact copy), and splits that plan into each process's
// part (planParts): the pieces it reads and those it is sent, numbered as in the whole
// plan. The parts go down the tree: each process receives from its parent, in one message,
// the parts of its subtree, keeps its own and sends each child the parts of the child's
// subtree (split); so does why the job cannot start, when a process could not survey its
// directories (an error that names the rank and why). A process thus sends and receives
// one message to and from each neighbour in the tree, of the inventories or parts of the
// ranks below it, and rank 0 one to and from each child; each process logs its count at
// debug level. Each process then sends the pieces it was chosen for to the processes that
// run their tasks, in parts of at most restartChunk bytes, and waits for those it needs
// from others, checking each one's checksum as it completes. The pieces it has itself are
// read from its disk when the schedule restores the locations and kept states. Nothing
// else chooses the checkpoint: one process alone goes through the same steps. The
// checkpoints of a run of the job that finished (checkpoint.Finished, which each process
// reports with its inventory) are left out of the choice: the job run again after it
// finished starts afresh, and rank 0 says so. A process lost meanwhile fails the job as at
// any time, named by the mesh, and every process waiting for the plan fails with it.

// restartChunk is the most bytes of a piece one message carries.
var restartChunk = 4 << 20

// restart is this process's part in the restart of the job.
type restart struct {
	inv inventory // what this process's directories hold

	mu       sync.Mutex
	plan     *checkpoint.Plan // this process's part of rank 0's plan; nil until it comes, then never changed
	index    []int            // index[i]: the number of plan.Pieces[i] in rank 0's plan
	planErr  string           // why the job cannot start, as rank 0 says
	planned  chan struct{}    // closed when plan (or planErr) is set
	early    []earlyPart      // parts that came before the plan
	incoming map[int]*arrival // the pieces others send this process, by index in plan
	left     int              // incoming pieces not complete yet
	arrived  chan struct{}    // closed when left is 0

	// The inventories and plans this process received from its neighbours in the tree and
	// sent them, and their payloads' bytes, for the log.
	received, receivedBytes, sent, sentBytes atomic.Int64
}

// inventory is what process Rank reports to rank 0: its inventory, or why it has none,
// and the checkpoints its directories hold of a run of the job that finished. The payload
// of an inventoryMsg is those of the sender's subtree, a JSON list.
type inventory struct {
	Rank int `json:"rank"`
	checkpoint.Inventory
	Finished []int  `json:"finished,omitempty"` // checkpoint.Finished
	Error    string `json:"error,omitempty"`
}

// planMsg is the payload of a restartPlanMsg: the parts of rank 0's plan for the processes
// of the receiver's subtree, or why the job cannot start.
type planMsg struct {
	Parts []planPart `json:"parts,omitempty"`
	Error string     `json:"error,omitempty"`
}

// planPart is the part of rank 0's plan that concerns process Rank (planParts): the pieces
// it reads from its directories or is sent.
type planPart struct {
	Rank int `json:"rank"`
	checkpoint.Plan
	Index []int `json:"index,omitempty"` // Index[i]: the number of Pieces[i] in rank 0's plan, which partMsg carries
}

// arrival is a piece on its way to this process.
type arrival struct {
	from int    // the process that sends it
	buf  []byte // its content, of the piece's size
	got  int64  // bytes received so far
}

// earlyPart is a part of a piece received before the plan.
type earlyPart struct {
	from    int
	m       partMsg
	payload []byte
}

// newRestart surveys dirs, the directories this process sees, for checkpoints of job.
func newRestart(dirs []string, job checkpoint.Fingerprint) *restart {
	r := &restart{planned: make(chan struct{}), arrived: make(chan struct{})}
	inv, err := checkpoint.Survey(dirs, job)
	if err != nil {
		r.inv.Error = err.Error()
	} else {
		r.inv.Inventory = *inv
	}
	var notes []string
	r.inv.Finished, notes = checkpoint.Finished(dirs)
	r.inv.Notes = append(r.inv.Notes, notes...)
	return r
}

// recover agrees with the other processes on the checkpoint the job restarts from, sends
// the pieces this process was chosen to send and waits for those it needs from others. It
// runs once the mesh is connected, before the tasks start.
func (c *checkpointer) recover(ctx context.Context) error {
	if c == nil {
		return nil
	}
	r := c.restart
	r.inv.Rank = c.j.rank
	c.answerWith(c.j.rank, inventoryMsg{}, []inventory{r.inv})
	if c.coord != nil { // rank 0 makes the plan
		c.drive(ctx, c.coord.surveyed)
	}
	select {
	case <-r.planned:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	c.j.log.Debug("orwl: restart's inventories and plans", "rank", c.j.rank,
		"received", r.received.Load(), "received_bytes", r.receivedBytes.Load(), "sent", r.sent.Load(), "sent_bytes", r.sentBytes.Load())
	if r.planErr != "" {
		return errors.New(r.planErr)
	}
	c.entered.Store(int64(c.start()) - 1)
	if err := c.sendPieces(); err != nil {
		return err
	}
	select {
	case <-r.arrived:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// skipFinished removes from invs the manifests of the checkpoints in finished, those of a run
// of the job that finished, so that no restart resumes from them, and returns the numbers
// of those it removed.
func skipFinished(invs []*checkpoint.Inventory, finished []int) []int {
	var skipped []int
	for _, inv := range invs {
		inv.Manifests = slices.DeleteFunc(inv.Manifests, func(m checkpoint.Manifest) bool {
			if !slices.Contains(finished, m.Checkpoint) {
				return false
			}
			skipped = append(skipped, m.Checkpoint)
			return true
		})
	}
	slices.Sort(skipped)
	return slices.Compact(skipped)
}

// restartMessage runs a message of the restart from process from. It never blocks: it runs
// on a connection's reader.
func (c *checkpointer) restartMessage(from int, m ckptMessage, payload []byte) {
	r := c.restart
	if _, ok := m.(partMsg); !ok && from != c.j.rank {
		r.received.Add(1)
		r.receivedBytes.Add(int64(len(payload)))
	}
	var err error
	switch m := m.(type) {
	case inventoryMsg:
		var invs []inventory
		if err = json.Unmarshal(payload, &invs); err == nil {
			c.answerWith(from, m, invs)
		}
	case restartPlanMsg:
		var msg planMsg
		if !c.fromParent(from, m) {
			break
		}
		if err = json.Unmarshal(payload, &msg); err == nil {
			err = c.scatter(msg)
		}
	case partMsg:
		r.mu.Lock()
		if r.plan == nil && r.planErr == "" {
			r.early = append(r.early, earlyPart{from: from, m: m, payload: bytes.Clone(payload)}) // payload is the mesh's memory
		} else {
			err = c.part(from, m, payload)
		}
		r.mu.Unlock()
	}
	if err != nil {
		c.j.fail(fmt.Errorf("orwl: checkpoint message from rank %d: %w", from, err))
	}
}

// sendRestart sends m with v, in JSON, to rank to, and counts it.
func (c *checkpointer) sendRestart(to int, m ckptMessage, v any) {
	payload, _ := json.Marshal(v) // plain structs
	if to != c.j.rank {
		c.restart.sent.Add(1)
		c.restart.sentBytes.Add(int64(len(payload)))
	}
	c.send(to, m, payload)
}

// scatter takes msg, the parts of the plan for this process's subtree (or why the job
// cannot start), from its parent: it sends each child the parts of the child's subtree,
// then installs its own.
func (c *checkpointer) scatter(msg planMsg) error {
	rank, procs := c.j.rank, c.j.procs
	children := treeChildren(rank, procs)
	if msg.Error != "" {
		for _, child := range children {
			c.sendRestart(child, restartPlanMsg{}, msg)
		}
		return c.install(planPart{}, msg.Error)
	}
	ranks := make([]int, len(msg.Parts))
	for i, p := range msg.Parts {
		ranks[i] = p.Rank
	}
	if err := checkSubtree(rank, procs, ranks); err != nil {
		return fmt.Errorf("a restart plan whose parts %w", err)
	}
	own, below := split(rank, procs, msg.Parts)
	for i, child := range children {
		c.sendRestart(child, restartPlanMsg{}, planMsg{Parts: below[i]})
	}
	return c.install(own, "")
}

// split returns, of parts, the parts of the plan for the processes of rank's subtree, rank's
// own and, for each of its children (treeChildren), those of the child's subtree, in order.
func split(rank, procs int, parts []planPart) (own planPart, below [][]planPart) {
	children := treeChildren(rank, procs)
	below = make([][]planPart, len(children))
	for _, p := range parts {
		r := p.Rank
		if r == rank {
			own = p
			continue
		}
		for treeParent(r) != rank {
			r = treeParent(r)
		}
		i := r - children[0]
		below[i] = append(below[i], p)
	}
	return own, below
}

// install sets this process's part of the plan rank 0 sent, and makes room for the pieces
// this process will be sent; or, when why is not "", why the job cannot start.
func (c *checkpointer) install(own planPart, why string) error {
	r := c.restart
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &own.Plan
	switch {
	case r.plan != nil || r.planErr != "":
		return errors.New("a second restart plan")
	case why != "":
		r.planErr = why
		close(r.planned)
		return nil
	case len(p.From) != len(p.Pieces) || len(p.Dirs) != len(p.Pieces) || len(own.Index) != len(p.Pieces):
		return fmt.Errorf("a restart plan of %d pieces with %d senders, %d directories and %d numbers", len(p.Pieces), len(p.From), len(p.Dirs), len(own.Index))
	case !slices.IsSorted(own.Index):
		return fmt.Errorf("a restart plan whose pieces are numbered out of order (%v)", own.Index)
	}
	r.incoming = make(map[int]*arrival)
	for i, piece := range p.Pieces {
		if piece.Task < 0 || piece.Task >= c.j.tasks || piece.Size < 0 || p.From[i] < 0 || p.From[i] >= c.j.procs {
			return fmt.Errorf("checkpoint %d: piece %v from rank %d does not belong to this job", p.Checkpoint, piece.Key, p.From[i])
		}
		if c.j.owner[piece.Task] == c.j.rank && p.From[i] != c.j.rank {
			a := &arrival{from: p.From[i]}
			if piece.Kind == checkpoint.Location { // it becomes the location's data (restore)
				a.buf = c.j.bufs.data(int(piece.Size))
			} else {
				a.buf = make([]byte, piece.Size)
			}
			r.incoming[i] = a
		}
	}
	r.plan, r.index, r.left = p, own.Index, len(r.incoming)
	c.resumed = p.Checkpoint
	close(r.planned)
	if r.left == 0 {
		close(r.arrived)
	}
	for _, e := range r.early {
		if err := c.part(e.from, e.m, e.payload); err != nil {
			return err
		}
	}
	r.early = nil
	return nil
}

// part copies a part of a piece into its place, and checks the piece when it is complete;
// restart.mu held, the plan set.
func (c *checkpointer) part(from int, m partMsg, payload []byte) error {
	r := c.restart
	if r.plan == nil || m.k != r.plan.Checkpoint {
		return fmt.Errorf("a part of a piece of checkpoint %d, and the job restarts from another", m.k)
	}
	i, ok := slices.BinarySearch(r.index, int(m.piece))
	a := r.incoming[i]
	if !ok || a == nil || a.from != from {
		return fmt.Errorf("checkpoint %d: a part of piece number %d, which this process is not to be sent by that rank", m.k, m.piece)
	}
	p := r.plan.Pieces[i]
	if m.off != a.got || int64(len(payload)) > p.Size-a.got || len(payload) == 0 && p.Size != 0 {
		return fmt.Errorf("checkpoint %d: piece %v: %d bytes at offset %d, after %d of its %d", m.k, p.Key, len(payload), m.off, a.got, p.Size)
	}
	a.got += int64(copy(a.buf[a.got:], payload))
	if a.got < p.Size {
		return nil
	}
	if crc := checkpoint.Checksum(a.buf); crc != p.CRC {
		return fmt.Errorf("checkpoint %d: piece %v arrived corrupted (crc32c %08x, manifest %08x)", m.k, p.Key, crc, p.CRC)
	}
	if r.left--; r.left == 0 {
		close(r.arrived)
	}
	return nil
}

// sendPieces sends the pieces of the plan this process was chosen to read to the processes
// that run their tasks, each in parts of at most restartChunk bytes.
func (c *checkpointer) sendPieces() error {
	plan := c.restart.plan
	for i, p := range plan.Pieces {
		to := c.j.owner[p.Task]
		if plan.From[i] != c.j.rank || to == c.j.rank {
			continue
		}
		buf := make([]byte, p.Size) // the mesh reads it after Send returns: never reused
		if err := checkpoint.LoadCopy(plan.Dirs[i], plan.Checkpoint, p, buf); err != nil {
			return fmt.Errorf("orwl: reading piece %v of checkpoint %d to send to rank %d: %w", p.Key, plan.Checkpoint, to, err)
		}
		for off := 0; ; off += restartChunk {
			end := min(off+restartChunk, len(buf))
			c.send(to, partMsg{k: plan.Checkpoint, piece: uint32(c.restart.index[i]), off: int64(off)}, buf[off:end])
			if end == len(buf) {
				break
			}
		}
	}
	return nil
}

// piece returns the index of key in the plan, and its entry.
func (r *restart) piece(key checkpoint.Key) (int, checkpoint.PieceInfo, error) {
	i, ok := slices.BinarySearchFunc(r.plan.Pieces, key, func(p checkpoint.PieceInfo, k checkpoint.Key) int { return p.Key.Compare(k) })
	if !ok {
		return 0, checkpoint.PieceInfo{}, fmt.Errorf("checkpoint %d has no piece %v", r.plan.Checkpoint, key)
	}
	return i, r.plan.Pieces[i], nil
}

// load reads piece i of the plan into dst, of its size: from the part that arrived, or
// from this process's copy.
func (r *restart) load(i int, dst []byte) error {
	if a := r.incoming[i]; a != nil {
		copy(dst, a.buf)
		return nil
	}
	return checkpoint.LoadCopy(r.plan.Dirs[i], r.plan.Checkpoint, r.plan.Pieces[i], dst)
}

// restore fills this process's locations and its tasks' kept states from the checkpoint the
// job restarts from, before the schedule; the process of task 0 says so on standard error.
func (c *checkpointer) restore() error {
	if c.start() == 0 {
		return nil
	}
	r, k := c.restart, c.start()
	for _, l := range c.j.owned {
		if l == nil {
			continue
		}
		i, p, err := r.piece(checkpoint.LocationKey(l.id.Task, l.id.Name))
		if err == nil {
			freeBytes(l.data)
			if a := r.incoming[i]; a != nil {
				l.data, a.buf = a.buf, nil // the buffer it arrived in
			} else {
				l.data = c.j.bufs.data(int(p.Size))
				err = r.load(i, l.data)
			}
		}
		if err != nil {
			return fmt.Errorf("orwl: restoring %s from checkpoint %d: %w", l.id, k, err)
		}
	}
	for _, t := range c.j.local {
		for _, s := range t.ckpt.kept {
			i, p, err := r.piece(checkpoint.StateKey(t.id, s.name))
			if err == nil && p.Size != int64(len(s.buf)) {
				err = fmt.Errorf("it is %d bytes, this job keeps %d", p.Size, len(s.buf))
			}
			if err == nil {
				err = r.load(i, s.buf)
			}
			if err != nil {
				return fmt.Errorf("orwl: restoring task %d's state %q from checkpoint %d: %w", t.id, s.name, k, err)
			}
		}
	}
	if c.j.owner[0] == c.j.rank {
		fmt.Fprintf(os.Stderr, "resumed from checkpoint: iteration=%d\n", k)
	}
	return nil
}
