package orwl

import (
	"context"
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/handle"
)

// Group is handles of one task taken together: those the task uses at one FIFO position
// (in the ORWL papers' ring, its block to write and its left neighbour's bound to read),
// acquired, mapped and released as one, with one error to check instead of one per handle:
//
//	pos0 := orwl.Group{blockW, leftR}
//	...
//	err := pos0.Section(ctx, func(data [][]byte) error {
//		step(orwl.Float64s(data[0]), orwl.Float64s(data[1])[0])
//		return nil
//	})
//
// A Group acquires its handles in its order and holds them all until it releases them,
// the last first, exactly like sections of its handles nested in that order. So the
// schedule's discipline is the group's: its handles should be of one FIFO position, and a
// task takes its groups (and its other handles) in order of position in every iteration.
// A group that spans positions holds the earlier ones while it waits for the later ones,
// which is nesting sections of different positions: it may deadlock (ErrDeadlock).
//
// Like its handles, a Group is used from its task's goroutine only. Every handle of it must
// be non-nil; the same handle twice fails to acquire (ErrHeld).
type Group []*Handle

// Acquire acquires the handles of g in order (see Handle.Acquire). When one of them fails,
// Acquire releases those it acquired, the last first, and returns that handle's error,
// which names it (with the releases' errors, if any, joined after it). The handle that
// failed is closed, as any failed Handle.Acquire leaves it; those after it keep their
// requests.
func (g Group) Acquire(ctx context.Context) error {
	var buf [groupBuf]*handle.Handle
	hs, err := g.handles(buf[:0])
	if err != nil {
		return err
	}
	return acquire(ctx, hs)
}

// Release releases the handles of g, the last one first (see Handle.Release), and returns
// their errors: one alone as it is, several joined. It releases every handle whatever the
// errors of the others.
func (g Group) Release() error {
	var buf [groupBuf]*handle.Handle
	hs, err := g.handles(buf[:0])
	if err != nil {
		return err
	}
	_, err = handle.EndSection(hs, nil, true, nil)
	return err
}

// Section acquires the handles of g (see Acquire), calls fn with their data, data[i] being
// g[i].Map(), and releases them, the last first. It returns the first error: the
// acquire's, fn's, or else the releases' (one alone as it is, several joined). After
// g[i].Resize, data[i] is no longer valid: use the slice Resize returns.
//
// When fn fails or panics, every handle ends as it would in its own Handle.Section: a read
// handle is released, and a write handle fails its location (its data may be half written:
// it is never handed on; whoever waits on the location, or comes later, gets an error
// naming the handle and fn's error) and is closed. In a checked job a misuse of the data is
// fn's error, naming the handle whose data it was.
func (g Group) Section(ctx context.Context, fn func(data [][]byte) error) (err error) {
	var buf [groupBuf]*handle.Handle
	hs, err := g.handles(buf[:0])
	if err != nil {
		return err
	}
	if err := acquire(ctx, hs); err != nil {
		return err
	}
	data := make([][]byte, len(hs))
	for i, h := range hs {
		data[i] = h.Map()
	}
	done := false
	defer func() {
		var p any
		if !done {
			p = recover()
		}
		if p, err = handle.EndSection(hs, err, done, p); p != nil {
			panic(p) // on top of fn's frames, still on the stack
		}
	}()
	err = fn(data)
	done = true
	return err
}

// groupBuf is the size of a group whose handles are listed without allocating.
const groupBuf = 8

// handles appends the handles under g's to hs and returns it, or an error naming a nil one.
func (g Group) handles(hs []*handle.Handle) ([]*handle.Handle, error) {
	for i, h := range g {
		if h == nil {
			return nil, fmt.Errorf("orwl: handle %d of the group (of %d) is nil", i, len(g))
		}
		hs = append(hs, h.h)
	}
	return hs, nil
}

// acquire acquires hs in order; when one fails, it releases those acquired, the last first.
func acquire(ctx context.Context, hs []*handle.Handle) error {
	for i, h := range hs {
		if err := h.Acquire(ctx); err != nil {
			if _, rerr := handle.EndSection(hs[:i], nil, true, nil); rerr != nil {
				return errors.Join(err, rerr)
			}
			return err
		}
	}
	return nil
}
