package fluid

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
)

// Params describe one job.
type Params struct {
	N     int    // particles
	Steps int    // time steps
	Seed  uint64 // seed of the initial positions (the problem's default is 1)
	Tasks int    // ORWL tasks (Run only; Sequential ignores it)
	// Trace is orwl.Config.Trace: a file for the job's Chrome trace, or "".
	Trace string
	// Progress, when not nil, is called by task 0 after each of its steps.
	Progress func(done, total int)
}

// MaxN is the most particles Validate accepts: particle ids and indexes are int32.
const MaxN = 1 << 30

// Validate reports what makes p unusable, or nil.
func (p Params) Validate() error {
	switch {
	case p.N < 1 || p.N > MaxN:
		return fmt.Errorf("%d particles: need 1 to %d", p.N, MaxN)
	case p.Steps < 0:
		return fmt.Errorf("%d steps: need at least 0", p.Steps)
	case p.Tasks < 1:
		return fmt.Errorf("%d tasks: need at least 1", p.Tasks)
	}
	if most := MaxTasks(p.N); p.Tasks > most {
		k := newConsts(p.N)
		return fmt.Errorf("%d tasks for %d particles: at most %d (%d cells, and every task but a lone one owns at least %d, the halo's width)",
			p.Tasks, p.N, most, k.cells, k.band)
	}
	return nil
}

// MaxTasks returns the most tasks a job of n particles can have: every task owns at least
// one halo band of cells (see the package comment), so that its halo lies within its two
// neighbours.
func MaxTasks(n int) int {
	k := newConsts(n)
	return max(1, k.cells/k.band)
}

// consts are the derived values of the problem, each computed once, in the problem's order
// (every product and quotient rounded once).
type consts struct {
	n     int
	h     float64 // smoothing length, 1.2/k with k the integer cube root of n
	hinv  float64
	H2    float64 // the square of the support 2h
	nc    int     // cells per side: their size 1/nc is at least 2h
	cells int     // nc³
	band  int     // nc²+nc+1: a cell's 26 neighbours lie within band cells of it in cell order
	m     float64 // mass of a particle
	dt    float64
	sigma float64 // 1/(πh³) = W(0)
	sig4  float64
	c1    float64
	c2    float64
	epsh2 float64
}

func newConsts(n int) *consts {
	k := 1
	for (k+1)*(k+1)*(k+1) <= n {
		k++
	}
	c := &consts{n: n}
	c.h = 1.2 / float64(k)
	c.hinv = 1.0 / c.h
	H := 2.0 * c.h
	c.H2 = H * H
	c.nc = max(1, int(1.0/H))
	c.cells = c.nc * c.nc * c.nc
	c.band = c.nc*c.nc + c.nc + 1
	c.m = 1.0 / float64(n)
	c.dt = 0.1 * c.h
	c.sigma = 1.0 / (((math.Pi * c.h) * c.h) * c.h)
	c.sig4 = 0.25 * c.sigma
	c.c1 = (c.sigma * c.hinv) * c.hinv
	c.c2 = (0.75 * c.sigma) * c.hinv
	c.epsh2 = (0.01 * c.h) * c.h
	return c
}

// cellOf returns the cell of the point (x, y, z): c = cx + nc*(cy + nc*cz), each coordinate
// truncated and clamped to [0, nc-1].
func (k *consts) cellOf(x, y, z float64) int {
	f := float64(k.nc)
	cx := min(max(int(x*f), 0), k.nc-1)
	cy := min(max(int(y*f), 0), k.nc-1)
	cz := min(max(int(z*f), 0), k.nc-1)
	return cx + k.nc*(cy+k.nc*cz)
}

// State is the particles of a job by id: particle i is at (X[i], Y[i], Z[i]) with velocity
// (VX[i], VY[i], VZ[i]).
type State struct {
	X, Y, Z, VX, VY, VZ []float64
}

func newState(n int) *State {
	return &State{X: make([]float64, n), Y: make([]float64, n), Z: make([]float64, n),
		VX: make([]float64, n), VY: make([]float64, n), VZ: make([]float64, n)}
}

// Initial returns the particles at the start: a quarter of them in the octant [0,0.5)³
// (density 2), the others in the rest of the unit box (rejection), drawn from one
// splitmix64 stream seeded with seed; all at rest.
func Initial(n int, seed uint64) *State {
	s := newState(n)
	rng := splitmix{seed}
	dense := n / 4
	for id := range n {
		if id < dense {
			s.X[id], s.Y[id], s.Z[id] = 0.5*rng.next(), 0.5*rng.next(), 0.5*rng.next()
			continue
		}
		for {
			x, y, z := rng.next(), rng.next(), rng.next()
			if !(x < 0.5 && y < 0.5 && z < 0.5) {
				s.X[id], s.Y[id], s.Z[id] = x, y, z
				break
			}
		}
	}
	return s
}

// splitmix is the splitmix64 generator; next returns a uniform double in [0,1).
type splitmix struct{ s uint64 }

func (r *splitmix) next() float64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>11) * 0x1p-53
}

// Kinetic returns the kinetic energy, Σ (m/2)|v|², summed in ascending id.
func (s *State) Kinetic() float64 {
	half := 0.5 * (1.0 / float64(len(s.X)))
	var e float64
	for i := range s.X {
		vx, vy, vz := s.VX[i], s.VY[i], s.VZ[i]
		e += float64(half * (float64(float64(vx*vx)+float64(vy*vy)) + float64(vz*vz)))
	}
	return e
}

// Checksum is the FNV-1a 64 hash of x, y, z, vx, vy, vz of every particle in ascending id,
// as little-endian doubles: equal checksums mean bit-identical states. The C reference of
// the bench harness computes the same.
func (s *State) Checksum() uint64 {
	h := fnv.New64a()
	var b [48]byte
	for i := range s.X {
		for k, v := range [6]float64{s.X[i], s.Y[i], s.Z[i], s.VX[i], s.VY[i], s.VZ[i]} {
			binary.LittleEndian.PutUint64(b[8*k:], math.Float64bits(v))
		}
		h.Write(b[:])
	}
	return h.Sum64()
}
