//go:build !race

package main

// ckSteps are the steps of the checkpointed job of the tests (checkpoint_test.go): about a
// second and a half without the race detector, which would make 50 steps end before a
// process could be killed after the second checkpoint.
const ckSteps = 400
