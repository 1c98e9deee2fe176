package jobenv

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// slurm is a task of a SLURM step that no PMI places (srun with MpiDefault=none):
// SLURM_PROCID and the step's size, only inside a step (SLURM_STEP_ID set; a batch script
// also sees SLURM_PROCID, and is one process). The coordinator is derived from the node
// list and the job id, unless srun hands down a PMI connection.
var slurm = srunLauncher(SourceSLURM,
	func(env envReader) bool { return env.has("SLURM_PROCID") && inSlurmStep(env) },
	func(env envReader) (placement, error) {
		sizeVar := cmp.Or(env.firstSet("SLURM_STEP_NUM_TASKS"), "SLURM_NTASKS")
		return readRankSize(env, "SLURM_PROCID", sizeVar)
	})

// srunLauncher is a launcher that srun can be (SLURM, or its PMI-1/2 and PMIx plugins)
// that read places: SLURM's node list completes what read says (readSlurmNodes), the
// launcher may hand down a PMI connection, and the coordinator and the secret are derived
// from the job id when neither is given nor exchanged.
func srunLauncher(source string, detect func(envReader) bool, read func(envReader) (placement, error)) launcher {
	return launcher{
		source: source,
		detect: detect,
		read: func(env envReader) (placement, error) {
			p, err := read(env)
			if err == nil {
				err = readSlurmCores(env, &p)
			}
			if err != nil {
				return placement{}, err
			}
			return p, readSlurmNodes(env, &p)
		},
		pmi:    true,
		coord:  derivedCoord,
		secret: derivedSecret,
	}
}

// readSlurmCores completes p with what SLURM says of this node's cores: how many the job
// has here (SLURM_CPUS_ON_NODE), and whether srun bound each task to cores of its own
// (SLURM_CPU_BIND_TYPE, "mask_cpu:" under the task/affinity plugin's default, "none" when
// it binds nothing).
func readSlurmCores(env envReader, p *placement) error {
	n, ok, err := env.int("SLURM_CPUS_ON_NODE")
	switch {
	case err != nil:
		return err
	case ok && n < 1:
		return fmt.Errorf("jobenv: SLURM_CPUS_ON_NODE=%d; need at least 1", n)
	case ok:
		p.job.Cores = n
	}
	if inSlurmStep(env) {
		bind := env.first("SLURM_CPU_BIND_TYPE")
		p.job.Bound = bind != "" && bind != "none"
	}
	return nil
}

// inSlurmStep reports whether the process is a task of a SLURM step (started by srun).
func inSlurmStep(env envReader) bool {
	return env.has("SLURM_STEP_ID") || env.has("SLURM_STEPID")
}

// readSlurmNodes completes p with SLURM's node list, whichever of srun's PMI plugins
// placed the process (srun --mpi=pmix sets PMIX_*, --mpi=pmi2 PMI_*): the hosts, this
// node's name, the job id (SLURM's job and step ids), and inside a step the number of
// tasks on this node when the launcher did not say it.
func readSlurmNodes(env envReader, p *placement) error {
	nodeVar := env.firstSet("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	if nodeVar == "" {
		return nil
	}
	s, _ := env.lookup(nodeVar)
	hosts, err := ExpandHostlist(s)
	if err != nil {
		return fmt.Errorf("jobenv: %s=%q: %w", nodeVar, s, err)
	}
	j := &p.job
	j.Hosts, j.Node = hosts, env.first("SLURMD_NODENAME")
	p.localOnly = len(hosts) <= 1
	if jid := env.first("SLURM_JOB_ID", "SLURM_JOBID"); jid != "" {
		j.JobID = "slurm:" + jid + "." + env.first("SLURM_STEP_ID", "SLURM_STEPID")
	}
	if j.LocalSize == 0 && inSlurmStep(env) {
		j.LocalSize, err = slurmLocalSize(env, hosts, j.Node)
	}
	return err
}

// slurmLocalSize returns the number of tasks of this step on this node, from
// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": two tasks on each of the first three nodes, one on
// the fourth) and this node's index (SLURM_NODEID, else Node's place in hosts), or 0 when
// they do not say.
func slurmLocalSize(env envReader, hosts []string, node string) (int, error) {
	counts, err := tasksPerNode(env)
	if err != nil || len(counts) == 0 {
		return 0, err
	}
	idx, ok, err := env.int("SLURM_NODEID")
	if err != nil {
		return 0, err
	}
	if !ok {
		idx = -1
		for i, h := range hosts {
			if node != "" && h == node {
				idx = i
			}
		}
	}
	switch {
	case idx >= 0 && idx < len(counts):
		return counts[idx], nil
	case !slicesDiffer(counts):
		return counts[0], nil
	}
	return 0, nil
}

// tasksPerNode expands SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE) into one
// count per node, or nil when neither is set.
func tasksPerNode(env envReader) ([]int, error) {
	v := env.firstSet("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	if v == "" {
		return nil, nil
	}
	s, _ := env.lookup(v)
	var counts []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 && strings.HasPrefix(part[i:], "(x") && strings.HasSuffix(part, ")") {
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(n)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 0 || r < 1 || len(counts)+r > maxHosts {
			return nil, fmt.Errorf("jobenv: %s=%q: want counts such as 2(x3),1", v, s)
		}
		for range r {
			counts = append(counts, c)
		}
	}
	return counts, nil
}

// slicesDiffer reports whether the counts are not all the same.
func slicesDiffer(c []int) bool {
	for _, x := range c {
		if x != c[0] {
			return true
		}
	}
	return false
}
