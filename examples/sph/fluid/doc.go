// Package fluid is the engine of examples/sph: a smoothed particle hydrodynamics (SPH)
// simulation over ORWL tasks, bit-identical to its sequential reference whatever the
// number of tasks and processes, and to the C implementation of the same problem built
// without fused multiply-adds (the bench harness's, go run ./lab/bench sph).
//
// # The problem
//
// N particles of an isothermal ideal gas (P = ρ, sound speed 1) in the unit box with
// reflecting walls: a quarter of them start at rest in the octant [0, 0.5)³ (density 2),
// the others in the rest of the box (density 6/7), drawn from one splitmix64 stream
// (Initial), and the dense corner expands. Each time step has four phases: the cell list
// (cells of side 1/nc >= 2h, the support of the cubic-spline kernel, h = 1.2/⌊N^⅓⌋), the
// density phase (ρ and P/ρ² of every particle from its neighbours' positions), the force
// phase (the pressure gradient and Monaghan's artificial viscosity, from positions,
// velocities, ρ and P/ρ²) and a symplectic Euler step with a fixed dt = 0.1h. Both phases
// are gathers: a particle sums over its neighbours and writes only itself. The work of a
// particle is its neighbour count, from 3 to 157 at N = 100000: the load is irregular,
// and it changes every step as the particles move.
//
// # Bit-identical results
//
// A particle sums its neighbours in one canonical order: cells in the order
// c = cx + nc·(cy + nc·cz), particles by ascending id within a cell, the 27 neighbour cells
// visited dz, dy, dx (dx fastest). The order depends on the positions only, not on which
// task computes the particle nor on where its neighbours live. Every product that feeds an
// addition is written float64(a*b) (kernel.go), which the Go specification forbids to fuse
// into a multiply-add on any GOAMD64 level or architecture. With the initial positions
// exact in every language, the result is then the same bits as the C build's (checksum
// 7b4e5c70b7cba47c for 20000 particles and 20 steps, f53967f6c1c61b09 for 100000 and 50). The
// halos hold their owner's exact doubles, and the order of every access to a location is
// fixed by the schedule (docs/design.md, rules 6 and 11), so the timing of the tasks cannot
// change anything.
//
// # Tasks own ranges of cells
//
// Task t owns a contiguous range [c0, c1) of cells in the canonical order, never a part of
// a cell, and computes the particles in it. A particle's 26 neighbour cells lie within
// band = nc²+nc+1 cells of its own in that order, so the halo of a task is the band of
// cells before c0 and the band after c1: the last band of task t-1 and the first of task
// t+1, since every task of several owns at least band cells (MaxTasks). In its own memory a
// task lays out its window, the halo before, its own cells and the halo after, as one
// array per coordinate in canonical order with a start index per cell: the three cells
// along x of each (dz, dy) of a neighbourhood are then one contiguous run of particles,
// nine runs per cell. The density phase keeps the neighbours it finds (a candidate is
// tested without a branch) and F(r) of each for the force phase, which therefore visits
// only neighbours, takes no square root and reads a neighbour as one 64-byte record
// (position, velocity, ρ, P/ρ²). Both phases select the kernel's pieces and the
// viscosity with masks, not with branches that a neighbour takes at random.
//
// On amd64 with AVX2 the three loops over a particle's candidates and neighbours (the
// distance filter, the density sum with F(r), the force sum) run in assembly
// (kernel_amd64.s), four at a time: the same IEEE operations in the same order, with no
// fused multiply-add, and every sum added lane after lane in index order, so the bits are
// those of the scalar Go loops (kernel.go). The filter takes all the candidates of a
// particle in one call, the last one to three of a span in masked lanes; the two sums
// leave their last one to three neighbours to the scalar loops, which do everything on
// other architectures or with the purego build tag.
//
// # A step, and its locations
//
// A task's state between two steps lives in its location parts: its particles (ids,
// positions, velocities), the cells it owns next and its work in every step so far. A step
// takes the task's handles in this order of FIFO position (run.go), each once, so
// that the rounds of every location are the steps (Task.Iterate):
//
//  0. it reads the particles that its neighbours passed to it after the last step (their
//     locations outR and outL), and sorts its particles into canonical order;
//  1. it writes the positions and velocities of its first and last bands, with the count
//     of each cell, into bandL and bandR (halo exchange 1);
//  2. it reads its neighbours' bands into its window and runs the density phase;
//  3. it writes ρ and P/ρ² of the particles of its bands into rhoL and rhoR (halo exchange
//     2), with its work in this step and that of its cells nearest each boundary;
//  4. it runs the force phase and the integration of its particles more than a band from
//     its ends, whose neighbours are all its own, while its neighbours finish their density
//     phase; then it reads their densities into its window, decides where its two
//     boundaries move, and computes the particles along its boundaries;
//  5. it writes the particles whose cell now belongs to a neighbour (a particle moves far
//     less than a cell in a step, and a boundary moves at most half the width of a range,
//     so they belong to the next task on either side) into outL and outR, and the others,
//     its new cells and its work into parts.
//
// The writer of a band or a density comes before its reader in every round, and the reader
// of outL and outR before its writer: a task reads the particles sent in the step before.
// After the last step every task keeps its particles, and writes them into result, which
// task 0 reads.
//
// # Load balance
//
// The first split cuts the cells where the sums of an estimate of their work (a cell's
// particles times those of its 27-cell neighbourhood, from the initial positions, which
// every task computes alike) are nearest to equal. Then, after every density phase, each
// pair of neighbouring tasks moves the boundary between them by diffusion of the measured
// work: the difference of their works (neighbour counts, integers) over one plus the larger
// number of neighbours (so that a pair alone splits it evenly), the cells passed chosen
// from those nearest the boundary whose measured works add up nearest to that. Both tasks
// of the pair compute it from the same integers, exchanged in step 3, so they agree bit
// for bit in any process, and the work the next step finds is balanced to within the
// changes of one step. At 100000 particles on 2 tasks for 50 steps the imbalance (the
// largest task's work over the mean, averaged over the steps) is 1.0005.
//
// # Checkpoints
//
// Everything a task needs to go on is in its locations at the boundary of two rounds:
// parts (its particles, its cells, its work so far) and the particles in transit in outL
// and outR; the bands and densities of the step before are rewritten before they are read.
// So a checkpoint (docs/design.md, rule 16) needs no kept state, and a job restarted from
// one (RunCheckpointed) reads its parts back (a one-shot read before the first step)
// instead of computing the initial particles, and ends with the bytes of an uninterrupted
// run (rule 17), on any number of processes.
//
// The package does the computation of one job; it does not parse flags or print anything.
package fluid
