package fluid

import "time"

// Sequential computes p's steps in one window holding every cell, without ORWL, with the
// physics of Run (this package's kernels): the reference that Run's result must equal bit
// for bit. It returns the final state, the interactions (twice the neighbour pairs,
// summed over the steps) and the time of the steps in seconds.
func Sequential(p Params) (s *State, interactions int64, seconds float64, err error) {
	k := newConsts(p.N)
	s = Initial(p.N, p.Seed)
	var all particles
	all.fill(s)
	var o order
	var w window
	start := time.Now()
	for range p.Steps {
		if err := o.sort(k, &all, 0, k.cells); err != nil {
			return nil, 0, 0, err
		}
		w.reset(k, 0, 0, k.cells, k.cells)
		w.addOwn(&all, &o)
		interactions += 2 * w.density()
		w.forces(&all, 0, k.cells) // all was copied into w
	}
	seconds = time.Since(start).Seconds()
	all.scatter(s)
	return s, interactions, seconds, nil
}

// fill sets p to the particles of s, in id order.
func (p *particles) fill(s *State) {
	p.resize(len(s.X))
	for i := range p.id {
		p.id[i] = int32(i)
	}
	for i, a := range [6][]float64{s.X, s.Y, s.Z, s.VX, s.VY, s.VZ} {
		copy(*p.floats()[i], a)
	}
}
