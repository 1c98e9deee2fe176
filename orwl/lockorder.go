package orwl

// Lock order. The mutexes of the package, and the only ways they nest: a mutex on the left
// of > may be held while one on its right is taken, never the other way round; every other
// mutex is taken alone. Under any of them a message is only queued (transport.Mesh.Send,
// SendAhead), never written (SendNow, Flush with now), and nothing waits.
//
//	remoteQueue.sendMu > requester.mu         a request that registers a new ticket
//	remoteQueue.sendMu > spareMirrors.mu      a release gives its mirror's buffer up
//	remoteQueue.sendMu > pairReader.mu        a pair's reader reuses a ticket (pair.go)
//	location.mu        > checkpointer.mu      a snapshot queues its piece for the writer
//
// Taken alone: location.sendMu, jobWide.mu, job.errMu, job.mu, restart.mu, coordInbox.mu,
// writerProcs.
// Inside any of them only other packages' locks are taken (the transport's connection
// queues, hugemem's registry of guarded buffers), which take none of these.
