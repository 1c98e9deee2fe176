package transport

// A watchList is the connections through shared memory that a task's Poll looks at: those
// that delivered a message within the last watchKeep choices, chosen again every
// watchEvery waits. A process has such a connection with every process of its host that it
// exchanged anything with (rank 0 of a job that gathers its result, with every process; each
// process, with its neighbours in the job's trees), while a task mostly waits on a few (the
// owners of the locations it uses, the requesters of its own). A look costs a cache miss or
// two per ring looked at, after the other processes of a crowded core ran, and a wait looks
// again and again; the connections left out are no worse off than where no task polls:
// their writers wake their readers (ringHeader.polling stays 0 there), which deliver their
// messages, and those make the connection watched again at the next choice.
//
// A watchList belongs to one Poller, used by one goroutine at a time.
type watchList struct {
	from  *[]*conn     // the mesh's connections (Mesh.onRings) when conns was chosen
	conns []*conn      // the connections watched
	track []watchTrack // of each of *from
	left  int          // waits until the next choice
}

// watchTrack is what a watchList knows of one connection: conn.received at the last choice,
// and the choices since it last moved, up to watchKeep.
type watchTrack struct {
	seen  uint64
	quiet uint8
}

// How often a watchList chooses, and for how long it keeps a connection that went quiet: a
// choice loads a word or two of every connection, and a connection whose messages come less
// often than once every watchKeep·watchEvery waits has them delivered by its reader, a
// wake-up each.
const (
	watchEvery = 16
	watchKeep  = 4
)

// watched returns the connections of all that the next wait looks at.
func (w *watchList) watched(all *[]*conn) []*conn {
	if all == w.from && w.left > 0 {
		w.left--
		return w.conns
	}
	list := *all
	if all != w.from { // a connection came: a new list, every connection watched at first
		w.from = all
		w.track = make([]watchTrack, len(list))
	}
	w.conns = w.conns[:0]
	for i, c := range list {
		t := &w.track[i]
		if n := c.received(); n != t.seen {
			t.seen, t.quiet = n, 0
		} else if t.quiet < watchKeep {
			t.quiet++
		}
		if t.quiet < watchKeep {
			w.conns = append(w.conns, c)
		}
	}
	w.left = watchEvery - 1
	return w.conns
}
