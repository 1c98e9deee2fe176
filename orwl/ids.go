package orwl

import (
	"fmt"
	"sync/atomic"

	"github.com/orwl-go/orwl/handle"
)

// This file holds the ticket ids, the requester's and the owner's halves of one contract:
// the requester numbers its remote tickets densely, hands a retired ticket's id out again,
// and the owner keeps the requests it serves for a rank in a table indexed by those ids,
// whose entries are reused with them.

// maxTicketID bounds the ticket ids a peer may use: ids are dense (retired ids are handed
// out again), so a larger one is a broken peer, not a big job.
const maxTicketID = 1 << 24

// ticketTable holds the requester's tickets by id (0 unused). It changes under
// requester.mu and is read without a lock (find): it grows into a copy twice as long.
type ticketTable []atomic.Pointer[remoteTicket]

// newTicket registers a new ticket of h on q under a free id; r.mu held.
func (r *requester) newTicket(q *remoteQueue, h *handle.Handle) *remoteTicket {
	t := &remoteTicket{q: q, ticketBase: ticketBase{h: h, spec: h.Spec(), j: r.j}}
	t.self = t
	if k := len(r.freeIDs); k > 0 {
		t.id, r.freeIDs = r.freeIDs[k-1], r.freeIDs[:k-1]
	} else {
		r.lastID++
		t.id = r.lastID
	}
	tab := r.table()
	if t.id >= uint64(len(tab)) {
		grown := make(ticketTable, max(16, 2*t.id))
		for i := range tab {
			grown[i].Store(tab[i].Load())
		}
		r.tickets.Store(&grown)
		tab = grown
	}
	tab[t.id].Store(t)
	return t
}

// table returns the ticket table, empty before the first ticket.
func (r *requester) table() ticketTable {
	if tab := r.tickets.Load(); tab != nil {
		return *tab
	}
	return nil
}

// find returns the active ticket numbered id on a location of rank from, or nil.
func (r *requester) find(from int, id uint64) *remoteTicket {
	if tab := r.table(); id < uint64(len(tab)) {
		if t := tab[id].Load(); t != nil && t.active.Load() && t.q.owner == from {
			return t
		}
	}
	return nil
}

// retire frees t's id, once its last message is on its way: a request that reuses the id
// follows it.
func (r *requester) retire(t *remoteTicket) {
	r.mu.Lock()
	r.table()[t.id].Store(nil)
	r.freeIDs = append(r.freeIDs, t.id)
	t.id = 0
	r.mu.Unlock()
}

// servedAt returns the entry of from's ticket id, making it on first use.
func (o *owner) servedAt(from int, id uint64) (*served, error) {
	if id == 0 || id > maxTicketID {
		return nil, fmt.Errorf("orwl: rank %d sent ticket id %d, outside 1..%d", from, id, maxTicketID)
	}
	table := o.served[from]
	if uint64(len(table)) <= id {
		for uint64(len(table)) <= id {
			table = append(table, nil)
		}
		o.served[from] = table
	}
	if table[id] == nil {
		s := &served{o: o, from: from, id: id}
		s.req.Tag = s
		table[id] = s
	}
	return table[id], nil
}

// servedGrant returns from's entry for ticket id when it holds a grant, else nil.
func (o *owner) servedGrant(from int, id uint64) *served {
	if id >= uint64(len(o.served[from])) {
		return nil
	}
	s := o.served[from][id]
	if s == nil || !s.active || s.delivered.Load() != s.placed {
		return nil
	}
	return s
}
