// Package transport is the websocket mesh that connects the processes of one
// ORWL job: bootstrap through a coordinator (rank 0), mutual authentication
// with the job secret, one writer and one reader goroutine per connection,
// a compact frame format (a msgpack header followed by raw payload bytes),
// heartbeats and failure detection, a message-ordering barrier, and a final
// barrier among the surviving processes at the end of a job.
//
// Topology: a pair of processes (i, j) that is connected is joined by two
// websockets. The one i dialed to j carries i's Requester-role messages to j
// (requests, releases, write-back data: masked, as websocket clients must
// mask) and j's Owner-role messages back to i (grants carrying location data:
// unmasked, as servers do not mask). Bulk data therefore always travels the
// cheap, unmasked direction. Pairs connect where they are needed: the start
// registers every process with the coordinator, hands out the address book
// and connects each process with its neighbours in a binary tree over the
// ranks (tree.go); any other pair connects when one of them first sends to
// the other, the messages waiting meanwhile, and the other dials back
// (connect.go); Mesh.Connect connects a known set of peers ahead. Heartbeats
// go on open connections only, and the tree watches every process: a lost
// one is found by a neighbour within the peer timeout and the news spreads
// along the tree and the open connections, each process passing it on once.
// The barriers are the tree's too (barrier.go): markers on the open
// connections order the messages, a reduction up the tree and a release down
// it end the barrier. So a process's connections, heartbeats, barrier
// messages and shared-memory rings grow with the peers it exchanges messages
// with, not with the size of the job.
//
// Wire: gorilla/websocket performs the HTTP upgrade; after it the mesh reads
// and writes the RFC 6455 frames itself (one final binary frame per message,
// client frames masked on sockets), so that nothing is allocated or copied per message
// and the payload of an unmasked frame goes from the sender's memory to the
// socket (writev) and from the socket into Handler.Sink's buffer.
//
// Processes of one host exchange their frames through shared memory (shm.go, ring.go),
// where a goroutine that waits for a message may read it itself (Poller.Poll).
//
// This package knows nothing of ORWL semantics: it moves frames whose types
// from TypeUser up are defined by the upper layer (the remote-location
// protocol in package orwl), and it must not interpret them, buffer them
// beyond one frame, or call back into the upper layer except through
// Handler. It does no job discovery (see internal/jobenv).
package transport
