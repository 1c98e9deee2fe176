//go:build race

package main

// ckSteps are the steps of the checkpointed job of the tests (checkpoint_test.go): about a
// second under the race detector.
const ckSteps = 50
