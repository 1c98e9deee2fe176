package checkpoint_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/orwl-go/orwl/checkpoint"
)

// Two processes write checkpoint 1 of a job of two tasks, each keeping its own task's
// piece and a partner copy of the other's; then one directory is lost, and a restart (on
// any number of processes) finds the checkpoint complete in the other.
func Example() {
	root, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	pattern := filepath.Join(root, "rank{rank}")
	job := checkpoint.Fingerprint{Program: "example", Tasks: 2, Locations: []string{"block"},
		Params: map[string]string{"n": "4"}}

	var stores []*checkpoint.Store
	for rank := range 2 {
		s, err := checkpoint.Create(checkpoint.Expand(pattern, rank, "host"), job)
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	var manifest []checkpoint.PieceInfo
	for task := range 2 {
		key := checkpoint.LocationKey(task, "block")
		data := []byte(fmt.Sprintf("block of task %d", task))
		info, err := stores[task].WritePiece(1, key, data) // the owner's copy
		if err != nil {
			log.Fatal(err)
		}
		if _, err := stores[1-task].WritePiece(1, key, data); err != nil { // the partner's
			log.Fatal(err)
		}
		manifest = append(manifest, info)
	}
	for _, s := range stores { // every piece is durable somewhere: commit everywhere
		if err := s.Commit(1, manifest); err != nil {
			log.Fatal(err)
		}
	}

	os.RemoveAll(stores[1].Dir()) // rank 1's node is lost
	dirs, err := checkpoint.Glob(pattern)
	if err != nil {
		log.Fatal(err)
	}
	c, notes, err := checkpoint.Find(dirs, job)
	if err != nil || c == nil {
		log.Fatal(err, notes)
	}
	key := checkpoint.LocationKey(1, "block")
	p, _ := c.Piece(key)
	buf := make([]byte, p.Size)
	if err := c.Load(key, buf); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d directory, checkpoint %d, %d pieces, %v: %q\n", len(dirs), c.Number, len(c.Pieces), key, buf)

	job.Params["n"] = "8"
	_, _, err = checkpoint.Find(dirs, job) // another job: refused
	var other *checkpoint.MismatchError
	if errors.As(err, &other) {
		fmt.Printf("checkpoint %d in %s: %s\n", other.Checkpoint, filepath.Base(other.Dir), other.Diff)
	}
	// Output:
	// 1 directory, checkpoint 1, 2 pieces, task 1 location "block": "block of task 1"
	// checkpoint 1 in rank0: parameter n=4, this job n=8
}
