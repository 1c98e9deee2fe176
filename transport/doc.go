// Package transport is the websocket mesh that connects the processes of one
// ORWL job: bootstrap through a coordinator (rank 0), mutual authentication
// with the job secret, one writer and one reader goroutine per connection,
// a compact frame format (a msgpack header followed by raw payload bytes),
// heartbeats and failure detection, a message-ordering barrier, and a final
// barrier among the surviving processes at the end of a job.
//
// Topology: every pair of processes (i, j) is joined by two websockets. The
// one i dialed to j carries i's Requester-role messages to j (requests,
// releases, write-back data: masked, as websocket clients must mask) and
// j's Owner-role messages back to i (grants carrying location data:
// unmasked, as servers do not mask). Bulk data therefore always travels the
// cheap, unmasked direction.
//
// Wire: gorilla/websocket performs the HTTP upgrade; after it the mesh reads
// and writes the RFC 6455 frames itself (one final binary frame per message,
// client frames masked on sockets), so that nothing is allocated or copied per message
// and the payload of an unmasked frame goes from the sender's memory to the
// socket (writev) and from the socket into Handler.Sink's buffer.
//
// Processes of one host exchange their frames through shared memory (shm.go, ring.go),
// where a goroutine that waits for a message may read it itself (Mesh.Poll).
//
// This package knows nothing of ORWL semantics: it moves frames whose types
// from TypeUser up are defined by the upper layer (the remote-location
// protocol in package orwl), and it must not interpret them, buffer them
// beyond one frame, or call back into the upper layer except through
// Handler. It does no job discovery (see internal/jobenv).
package transport
