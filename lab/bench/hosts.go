package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/internal/testemu/netemu"
	"github.com/orwl-go/orwl/kernels"
)

// hosts: examples/matmul across emulated hosts, one process (and task) per host, every
// host's link shaped to a rate (network namespaces on a bridge, tc tbf; needs root), against
// the bound max(compute time, bytes the busiest host must move one way / link rate). The
// compute time is the roofline of this machine measured in the same run (one kernel call on
// the whole problem, all cores): the emulated hosts share this machine's cores. Reaching the
// bound needs the transfers to overlap the compute. N defaults to 2048 per host, so that
// every host gets the same number of blocks; the grid and NB are matmul's defaults.

func init() {
	register(command{
		name:     "hosts",
		summary:  "matmul across emulated hosts on shaped links against max(compute, bytes / link rate)",
		files:    tableFiles("hosts"),
		children: []child{jsonChild(matmulChildEnv, matmulChild)},
		setup:    benchHosts,
	})
}

// hostsRow is one row of the hosts table.
type hostsRow struct {
	Hosts        int     `json:"hosts"`
	Rate         string  `json:"rate"`
	N            int     `json:"n"`
	NB           int     `json:"nb"`
	Grid         string  `json:"grid"`
	Seconds      float64 `json:"seconds"`
	ComputeBound float64 `json:"compute_seconds"`
	LinkBound    float64 `json:"link_seconds"`
	VsBound      float64 `json:"vs_bound"`
	Skipped      string  `json:"skipped,omitempty"`
}

func benchHosts(fs *flag.FlagSet) func(rep *report) error {
	hostList := fs.String("hosts", "2,3", "comma-separated numbers of hosts")
	rateList := fs.String("rates", "1gbit,10gbit", "comma-separated link rates, in tc's syntax")
	n := fs.Int("n", 0, "matrix size N (0: 2048 per host)")
	reps := fs.Int("reps", 2, "multiplications per measurement; seconds is the fastest of them")
	rounds := fs.Int("rounds", 2, "measurements of every row; the best is reported")
	return func(rep *report) error {
		counts, err := intList(*hostList)
		if err != nil {
			return badFlags("-hosts: %w", err)
		}
		rates := splitList(*rateList)
		bitsPerS := make([]float64, len(rates))
		for i, r := range rates {
			if bitsPerS[i], err = parseRate(r); err != nil {
				return badFlags("-rates: %w", err)
			}
		}
		if slices.ContainsFunc(counts, func(c int) bool { return c < 2 || c > 16 }) || *n < 0 || *reps < 1 || *rounds < 1 {
			return badFlags("-hosts must be 2 to 16, -n not negative, -reps and -rounds at least 1")
		}
		kernel, err := fastestCPUKernel()
		if err != nil {
			return err
		}
		g, err := kernels.Get(kernel)
		if err != nil {
			return err
		}
		cores := runtime.NumCPU()
		var rows []hostsRow
		for _, h := range counts {
			size := *n
			if size == 0 {
				size = 2048 * h
			}
			gr := grid.Square(h)
			nb := summa.DefaultNB(size, gr)
			compute, err := bestOf(2**rounds, func() (float64, error) { return timeRoofline(g, size, cores, *reps) })
			if err != nil {
				return err
			}
			moved := busiestHostBytes(size, nb, gr)
			for i, rate := range rates {
				r := hostsRow{Hosts: h, Rate: rate, N: size, NB: nb, Grid: gr.String(), ComputeBound: compute, LinkBound: moved * 8 / bitsPerS[i]}
				job := orwlJob{N: size, NB: nb, Grid: gr.String(), Kernels: slices.Repeat([]string{kernel}, h), Threads: max(1, cores/h), Reps: *reps}
				r.Seconds, err = bestOf(*rounds, func() (float64, error) { return timeOnHosts(job, rate) })
				if err != nil {
					if !errors.Is(err, netemu.ErrUnavailable) {
						return fmt.Errorf("%d hosts at %s: %w", h, rate, err)
					}
					r.Skipped = err.Error()
					fmt.Fprintf(os.Stderr, "hosts: skipped: %v\n", err)
				} else {
					r.VsBound = max(r.ComputeBound, r.LinkBound) / r.Seconds
				}
				rows = append(rows, r)
			}
		}
		rep.header("kernel %s, %d cores shared by the hosts; fastest of %d multiplications, best of %d rounds",
			kernel, cores, *reps, *rounds)
		rep.line("%5s %7s %6s %5s %5s %9s %9s %9s %9s\n", "hosts", "rate", "N", "NB", "grid", "seconds", "compute", "link", "vs-bound")
		for _, r := range rows {
			if r.Skipped != "" {
				rep.line("%5d %7s skipped: %s\n", r.Hosts, r.Rate, r.Skipped)
			} else {
				rep.line("%5d %7s %6d %5d %5s %9.3f %9.3f %9.3f %9.3f\n", r.Hosts, r.Rate, r.N, r.NB, r.Grid, r.Seconds, r.ComputeBound, r.LinkBound, r.VsBound)
			}
			rep.row(r)
		}
		return rep.write(rows)
	}
}

// parseRate reads a rate in tc's syntax ("100mbit", "1gbit", "10gbit") as bits per second.
func parseRate(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				break
			}
			return f * u.scale, nil
		}
	}
	return 0, fmt.Errorf("%q is not a rate such as 100mbit or 1gbit", s)
}

// busiestHostBytes is the most bytes one task of a multiplication over grid g, one task per
// host, receives or sends: the blocks of A in its grid row and of B in its grid column that
// other tasks own, and a copy of each of its own for every other task of its row (A) or
// column (B).
func busiestHostBytes(n, nb int, g grid.Grid) float64 {
	blocks := (n + nb - 1) / nb
	width := func(k int) float64 { return float64(min(nb, n-k*nb)) }
	var most float64
	for id := range g.Tasks() {
		p, q := g.Coords(id)
		var in, out float64
		for i := range blocks {
			for k := range blocks {
				bytes := width(i) * width(k) * 8
				if i%g.P == p && k%g.Q != q { // A(i,k), in its row, another's
					in += bytes
				}
				if i%g.P == p && k%g.Q == q { // A(i,k), its own, to the rest of its row
					out += bytes * float64(g.Q-1)
				}
				if k%g.Q == q && i%g.P != p { // B(i,k), in its column, another's
					in += bytes
				}
				if k%g.Q == q && i%g.P == p { // B(i,k), its own, to the rest of its column
					out += bytes * float64(g.P-1)
				}
			}
		}
		most = max(most, in, out)
	}
	return most
}

// timeOnHosts runs job over as many emulated hosts as it has tasks, links shaped to rate,
// and returns the fastest multiplication.
func timeOnHosts(job orwlJob, rate string) (float64, error) {
	names := make([][]string, len(job.Kernels))
	for i := range names {
		names[i] = []string{"h" + strconv.Itoa(i+1)}
	}
	hosts, err := netemu.New(names...)
	if err != nil {
		return 0, err
	}
	defer hosts.Close()
	if err := hosts.Shape(rate); err != nil {
		return 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	spec, _ := json.Marshal(job)
	coord := net.JoinHostPort(hosts.Hosts[0].Addr, "7411")
	var outs []*bytes.Buffer
	errs := make(chan error, len(names))
	for rank := range names {
		cmd := hosts.Command(ctx, rank, exe, "hosts")
		cmd.Env = netemu.CleanEnv(matmulChildEnv+"="+string(spec), "ORWL_RANK="+strconv.Itoa(rank), "ORWL_SIZE="+strconv.Itoa(len(names)),
			"ORWL_COORD="+coord, "ORWL_SECRET=hosts", "ORWL_LISTEN="+hosts.Hosts[rank].Addr)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		outs = append(outs, out)
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		go func() {
			err := cmd.Wait()
			if err != nil {
				cancel() // one process failed: stop the others
				err = fmt.Errorf("rank %d: %w", rank, err)
			}
			errs <- err
		}()
	}
	var failed []error
	for range names {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		var all strings.Builder
		for rank, o := range outs {
			fmt.Fprintf(&all, "rank %d:\n%s", rank, o.String())
		}
		return 0, fmt.Errorf("%v\n%s", failed, all.String())
	}
	sc := bufio.NewScanner(outs[0])
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "{") {
			var res orwlResult
			if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
				return 0, err
			}
			if !res.Verified {
				return 0, fmt.Errorf("the product did not verify")
			}
			return res.Seconds, nil
		}
	}
	return 0, fmt.Errorf("rank 0 printed no result:\n%s", outs[0].String())
}
