package orwl

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/orwl-go/orwl/internal/tick"
)

// The driver of rank 0's coordinator (checkpoint_coord.go): a queue of its inputs, filled by
// the connections' readers and the ticks of Checkpoint.Every, and one loop that feeds them
// to the machine and does what it says.

// coordInbox is the queue of the coordinator's inputs. put never blocks: the readers that
// call it must not wait, and rank 0's answers to itself are put by the loop that takes them.
type coordInbox struct {
	mu   sync.Mutex
	q    []coordInput
	wake chan struct{} // a value when q may have grown
}

func newCoordInbox() *coordInbox { return &coordInbox{wake: make(chan struct{}, 1)} }

// put queues in.
func (b *coordInbox) put(in coordInput) {
	b.mu.Lock()
	b.q = append(b.q, in)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take returns the queued inputs, oldest first, and empties the queue.
func (b *coordInbox) take() []coordInput {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.q
	b.q = nil
	return q
}

// toCoordinator hands an input from process from to rank 0's coordinator; a process other
// than rank 0 coordinates nothing, and such a message fails the job.
func (c *checkpointer) toCoordinator(in coordInput) {
	if c.coord == nil {
		c.j.fail(fmt.Errorf("orwl: rank %d: %s from rank %d, and only rank 0 coordinates checkpoints", c.j.rank, describe(in.msg), in.from))
		return
	}
	c.inbox.put(in)
}

// coordinate is rank 0's part while the tasks run: a checkpoint every c.every until ctx is
// done, when the one being taken is given up.
func (c *checkpointer) coordinate(ctx context.Context) {
	var ticks sync.WaitGroup
	ticks.Go(func() {
		tick.Every(ctx, c.every, func() bool {
			c.inbox.put(coordInput{kind: onTick})
			return true
		})
	})
	c.drive(ctx, func() bool { return false })
	ticks.Wait()
	c.perform(c.coord.step(coordInput{kind: onEnd}))
}

// drive feeds the coordinator its inputs as they come, and does what it says, until ctx is
// done or until done reports true. done is asked after each batch of inputs taken from the
// queue: those taken with the one that made it true are fed too, to the same machine.
func (c *checkpointer) drive(ctx context.Context, done func() bool) {
	for !done() {
		q := c.inbox.take()
		for _, in := range q {
			c.perform(c.coord.step(in))
		}
		if len(q) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-c.inbox.wake:
		}
	}
}

// perform does the coordinator's actions, in order.
func (c *checkpointer) perform(acts []coordAction) {
	for _, a := range acts {
		switch a.kind {
		case doSend:
			switch {
			case a.to >= 0:
				c.send(a.to, a.msg, a.payload)
				continue
			case isBroadcast(a.msg): // along the job's tree
				c.broadcast(a.msg)
				continue
			}
			for r := range c.j.procs {
				c.send(r, a.msg, a.payload)
			}
		case doLog:
			c.j.log.Log(context.Background(), a.level, a.text)
		case doFail:
			c.j.fail(a.err)
		case doComplete:
			c.j.log.Info("orwl: checkpoint complete", "iteration", a.msg.(committedMsg).k, "seconds", time.Since(c.armedAt).Seconds())
		}
	}
}
