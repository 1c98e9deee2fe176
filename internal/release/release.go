// Package release stores a word with release ordering only: every load and store that the
// storing goroutine made before the store is visible to a goroutine (or a process, through
// shared memory) that loads the new value with sync/atomic. That is all an unlock, a
// position published after a read, or a flag read only as a hint needs; sync/atomic's
// stores are sequentially consistent instead, which on amd64 takes a locked instruction
// (XCHG) that waits for the core's store buffer to drain, several nanoseconds each, many
// times in every round trip between two processes (docs/internals.md, "Where a remote round
// trip goes").
//
// A release store must not be followed by a load that has to see another goroutine's store
// made before it (Dekker's pattern: "I store my flag, then load yours"): that takes
// sync/atomic's store. Loads of the word go through sync/atomic as before.
//
// On amd64 every store of a word is a release store, and the compiler keeps a store after
// the loads and stores that the goroutine made before it, so the store is a plain one there;
// it is sync/atomic's on other architectures, and under the race detector, which sees only
// atomic stores as ordering anything.
package release
