// Package checkpoint stores the checkpoints of a job durably, so that the job survives the
// loss of a process or a node and restarts on any number of processes.
//
// It is storage only: it never decides when a checkpoint is taken, what goes into it, nor
// which process keeps which copy; a runtime does (package orwl takes a checkpoint at the
// boundary of FIFO rounds, docs/design.md, rule 16). It does no networking and starts no goroutine
// that outlives a call.
//
// # Pieces and checkpoints
//
// A checkpoint k (numbered from 1, in increasing order) is a set of pieces: the content of
// a task's location (LocationKey) and a task's registered private state (StateKey). Pieces
// belong to tasks, not to processes, so a checkpoint written by 4 processes restarts on 3.
// A piece's content is any bytes, hundreds of MiB if need be: WritePiece writes a []byte
// without copying it, NewPiece streams (a PieceWriter is an io.Writer), Checkpoint.Load
// reads into a buffer of the right size and Checkpoint.Open streams.
//
// # On disk
//
// Each process writes into a directory of its own (a Store), which it names from a
// pattern: "{rank}" and "{host}" in it become its rank and host name (Expand). A pattern
// without "{rank}" names the job's directory, which its processes share (on one host, or
// on a file system several hosts mount): each process writes into its subdirectory
// "rank-R". A restart searches every directory the pattern may have produced (Glob),
// whatever the number of processes that wrote them:
//
//	DIR/LOCK                   flocked while a Store has DIR open (one process per DIR); names it
//	DIR/ckpt-7/                checkpoint 7
//	DIR/ckpt-7/location.3.block   a piece: its raw bytes (task 3's location "block")
//	DIR/ckpt-7/state.3.iter       a piece: task 3's state "iter"
//	DIR/ckpt-7/MANIFEST        the pieces DIR holds, and the whole's Summary: JSON, then "crc32c XXXXXXXX"
//	DIR/ckpt-8/                checkpoint 8, being written: no MANIFEST yet
//	DIR/.recycle/              the files of the checkpoint pruned last, which new pieces reuse
//	DIR/FINISHED               the job finished: its checkpoints are not resumed from (MarkFinished)
//
// A piece's file name is its kind, task and name, the name's bytes other than letters,
// digits, '_' and '-' written as %XX. The manifest lists pieces (key, size, CRC-32C) and
// the job's Fingerprint: every piece of the whole job (Commit), or those its directory
// holds with the Summary of the whole, their count and the sum of their digests
// (CommitPart), so that its length does not grow with the job. A piece of at most
// InlineMax bytes may live in the manifest instead (InlinePiece: its content in base64
// there), with no file: a stencil's halos would otherwise cost a file each, written,
// fsync'd and copied to a partner at every checkpoint.
//
// # Guarantees
//
//   - A piece is written to a temporary file, checksummed (CRC-32 Castagnoli), fsync'd and
//     renamed into place before WritePiece (or Finish) returns. The temporary file is the
//     file of the same name of the checkpoint pruned last, when there is one, overwritten:
//     a job's pieces keep their sizes from one checkpoint to the next, and a file
//     overwritten costs no inode, no disk block and no new page of the page cache.
//   - A checkpoint is complete only when its manifest is committed: the checkpoint's
//     directory fsync'd (the pieces' names durable, one fsync for all of them), then the
//     manifest written to a temporary file, fsync'd, renamed to MANIFEST, the directory
//     fsync'd again. A complete checkpoint is never modified. After a commit the
//     directory keeps its two newest complete checkpoints; older ones, and incomplete
//     ones older than the one committed, are removed or recycled (renamed away first,
//     durably, so never seen half removed or overwritten). A process killed between a
//     commit and these removals leaves a third, removed at the next commit.
//   - A process killed at any moment, or a full disk (an error matching ErrNoSpace and
//     syscall.ENOSPC, the partial file removed), leaves every complete checkpoint intact.
//   - A directory holding a checkpoint of another job (a different Fingerprint: program,
//     tasks, locations, sizes, parameters) is neither used nor erased: Create and Find
//     return a *MismatchError naming the first difference.
//   - Choose (over the inventories of several processes) and Find (over directories one
//     process sees) return the newest checkpoint complete across them: a manifest in any of
//     them (manifests of parts, CommitPart: their union, which must have the count and the
//     digest of their Summary, else it is not taken for the whole), and an intact copy
//     (size and checksum) of every piece in at least one. A
//     corrupted, truncated or missing piece makes them fall back to the previous complete
//     checkpoint, and their notes say so.
//   - A directory is read as untrusted input (what a disk, another user or a bad copy left
//     there). Only regular files are read, never through a symbolic link nor waiting on a
//     named pipe, a manifest only up to the length one of the job can have; nothing outside
//     the directory is renamed, overwritten or removed (a link named as a checkpoint or as
//     .recycle, a link or hard link among the recycled files, is removed or left, never
//     followed). A manifest that the job could not have written (a piece of no task or
//     location of the job, out of order, inline data that does not match) or whose pieces
//     would not fit in the memory of the processes that hold or read them (Inventory.Memory)
//     is damage: Choose and Find fall back to the previous complete checkpoint, and say why.
//
// # How a runtime uses it
//
// Every process opens its directory with Create(Expand(pattern, rank, host), job). For
// checkpoint k it writes the pieces of its own tasks (WritePiece) and sends each piece's
// bytes to a partner process on another node, which writes the same key into its own
// Store: each piece then lives on two nodes (an inline piece too: in both manifests).
// Each process sends the Summary of the PieceInfos it wrote (Summarize) to one process,
// which adds them up and, once it knows that every piece of the job is written somewhere,
// sends the checkpoint's Summary to every process; each calls CommitPart(k, held, whole),
// held being the pieces its directory holds, its own and its partner's copies. A restart
// then finds every piece listed as long as, of each process, its directory or its
// partner's survives. A checkpoint whose pieces cannot all be written (a full disk) is not
// committed anywhere: each process calls Discard(k) and the job goes on.
//
// At a restart, on any number of processes, the processes need not see each other's
// directories (a disk per node, as with SCR's or FTI's node-local levels). Each surveys the
// directories it sees (Survey(Glob(pattern), job)); one chooses over all their inventories
// (Choose), whose Plan names the checkpoint the job restarts from (Checkpoint 0: start
// afresh) and the copy of each piece that is read (LoadCopy); a piece sent to another
// process is checked on arrival against the manifest's checksum (Checksum). Package orwl's
// restore.go describes that protocol in full. Each process then continues writing
// checkpoints after the one restored; the first write of a number into a Store removes that
// Store's leftovers of the abandoned run numbered as high or higher.
//
// When the whole job succeeds, each process calls MarkFinished on its Store. A restart
// leaves out the checkpoints that Finished names in the directories it surveys: a job run
// again after it finished starts afresh rather than resuming from its last checkpoint.
//
// Find is the same choice for one process that sees every directory (a tool, a test):
// Survey and Choose in one call, returning a Checkpoint that reads each piece from the
// intact copy chosen.
package checkpoint
