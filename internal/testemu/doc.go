// Package testemu gathers, in its subpackages, the emulators that tests run instead of
// real infrastructure; nothing outside tests and the lab may import them:
//
//   - netemu: hosts as network namespaces joined by a bridge, links shaped with tc;
//   - kubeemu: what Kubernetes gives the pods of the Indexed Jobs of examples/kubernetes;
//   - pmitest: a PMI-1/PMI-2 server, as MPICH's Hydra and SLURM give processes, and the
//     replay of exchanges recorded from them (pmitest/pmirecord records them);
//   - killjob: an example's job under a launcher whose processes are killed once a
//     checkpoint is complete, for the examples' restart tests.
package testemu
