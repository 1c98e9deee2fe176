package jobenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orwl-go/orwl/internal/pmi"
)

// ExchangeTimeout bounds Rendezvous's PMI exchange (unless ctx ends sooner): every process
// of the job must reach the launcher's fence within it.
const ExchangeTimeout = 60 * time.Second

// Keys rank 0 puts in the launcher's PMI key-value space.
const (
	KeyCoord  = "orwl-coord"  // rank 0's coordinator address, host:port
	KeySecret = "orwl-secret" // the job secret, hex-encoded; the secret is this text
)

// Errors Rendezvous wraps, for errors.Is.
var (
	// ErrCoordTaken: rank 0 cannot listen on a derived coordinator port, something else
	// holds it (another job that derived the same port, or another program).
	ErrCoordTaken = errors.New("derived coordinator port taken")
	// ErrWrongNode: rank 0 does not run on the node the derived coordinator address names.
	ErrWrongNode = errors.New("rank 0 is not on the coordinator's node")
)

// Rendezvous readies j for connecting the job, once Discover has placed this process:
//
//   - When j.Listen names a network interface of this host (ORWL_LISTEN=ib0, the same on
//     every host), it becomes that interface's address (its first global IPv4 address,
//     else IPv6).
//   - With a PMI connection (j.PMI), every process speaks to the launcher: rank 0 listens
//     on a port the kernel chooses and puts its address (unless Coord was given) and a
//     random secret (unless Secret was given) in the launcher's key-value space; after the
//     launcher's fence every other process gets them. Rank 0 listens on j.Listen when it
//     names an address (127.0.0.1 for a job on one host, or ORWL_LISTEN) and publishes
//     that; when j.Listen is unspecified (0.0.0.0, a job on several hosts) it listens on
//     every interface and publishes the address this host's name resolves to, if it is
//     one of this host's, else the first global address of an interface that is up
//     (IPv4 first). Set ORWL_LISTEN where that is not the network the job should use. The
//     exchange happens once per process; a later call reuses its result.
//   - Rank 0 with a coordinator derived from the job id listens on it here, so that a port
//     that is taken is reported as such (ErrCoordTaken); with one derived from a SLURM node
//     list it first checks that it runs on that list's first node (ErrWrongNode).
//   - Rank 0 of a Kubernetes Indexed Job listens on the coordinator's port (KubernetesPort
//     unless ORWL_COORD says otherwise) on j.Listen, every interface by default, rather
//     than on its own DNS name.
//   - Rank 0 with an inherited listener (orwlrun's ORWL_COORD_FD) takes it over.
//
// It returns rank 0's coordinator listener, which the caller owns, or nil where the
// transport listens on Coord itself and on the other ranks. On rank 0, when the secret is
// derived from the job id (j.WeakSecret), it warns once per process on log (nil:
// slog.Default()) that anyone who can see the job id can compute it, and how to set one.
func (j *Job) Rendezvous(ctx context.Context, log *slog.Logger) (net.Listener, error) {
	if j.Size <= 1 {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	if err := j.listenOnInterface(); err != nil {
		return nil, err
	}
	if j.Rank == 0 && j.WeakSecret && weakWarned.CompareAndSwap(false, true) {
		log.Warn(fmt.Sprintf("orwl: the job secret is derived from the %s job id %q, so anyone who can see the job id can join the job; "+
			"export %s=$(openssl rand -hex 32) to every process (mpirun: add -x %s), "+
			"or start the job with a launcher that hands down a PMI connection (mpiexec.hydra, srun --mpi=pmi2), which carries a random secret",
			j.Source, j.JobID, EnvSecret, EnvSecret), "rank", j.Rank)
	}
	switch {
	case j.CoordFD >= 0:
		return j.CoordListener()
	case j.PMI != nil:
		return j.exchange(ctx)
	case j.Rank != 0:
		return nil, nil
	case j.CoordFrom == CoordNodeList:
		if j.Node != "" && len(j.Hosts) > 0 && !sameHost(j.Node, j.Hosts[0]) {
			return nil, fmt.Errorf("jobenv: rank 0 runs on %s, but the coordinator address %s is derived from the SLURM node list, whose first node is %s "+
				"(srun -m arbitrary, -m plane or a host file can place rank 0 elsewhere): start the job with srun --mpi=pmi2, which carries rank 0's address, "+
				"or export %s=host:port naming rank 0's node: %w", j.Node, j.Coord, j.Hosts[0], EnvCoord, ErrWrongNode)
		}
		return j.listenDerived()
	case j.CoordFrom == CoordJobID:
		return j.listenDerived()
	case j.Source == SourceKubernetes:
		_, port, _ := net.SplitHostPort(j.Coord)
		ln, err := net.Listen("tcp", net.JoinHostPort(j.Listen, port))
		if err != nil {
			return nil, fmt.Errorf("jobenv: rank 0 cannot listen on port %s for the job's pods: %w", port, err)
		}
		return ln, nil
	}
	return nil, nil
}

// listenOnInterface replaces a j.Listen that names a network interface of this host with
// the interface's address.
func (j *Job) listenOnInterface() error {
	if j.Listen == "" || net.ParseIP(j.Listen) != nil {
		return nil
	}
	ifc, err := net.InterfaceByName(j.Listen)
	if err != nil {
		return nil // a host name
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return fmt.Errorf("jobenv: %s=%s: the interface's addresses: %w", EnvListen, j.Listen, err)
	}
	var v6 string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			if n.IP.To4() != nil {
				j.Listen = n.IP.String()
				return nil
			}
			if v6 == "" {
				v6 = n.IP.String()
			}
		}
	}
	if v6 == "" {
		return fmt.Errorf("jobenv: %s=%s: the interface has no global address", EnvListen, j.Listen)
	}
	j.Listen = v6
	return nil
}

// weakWarned is set once rank 0 has warned about a derived secret in this process.
var weakWarned atomic.Bool

// listenDerived listens on rank 0's derived coordinator address.
func (j *Job) listenDerived() (net.Listener, error) {
	ln, err := net.Listen("tcp", j.Coord)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("jobenv: rank 0 cannot listen on %s, the coordinator port derived from the job id %q: the port is taken "+
			"(by another job that derived the same port, about one job in %d, or by another program); export %s=host:port with a free port "+
			"to every process, or start the job with a launcher that hands down a PMI connection (mpiexec.hydra, srun --mpi=pmi2): %w",
			j.Coord, j.JobID, PortRange, EnvCoord, ErrCoordTaken)
	case err != nil:
		return nil, fmt.Errorf("jobenv: rank 0 cannot listen on %s, the coordinator address derived from the job id %q (is rank 0 on that host?); "+
			"export %s=host:port naming rank 0's host, or start the job with a launcher that hands down a PMI connection: %w", j.Coord, j.JobID, EnvCoord, err)
	}
	return ln, nil
}

// exchanges holds the result of this process's PMI exchange, by endpoint: PMI lets a
// process initialise once, so a later Run reuses it. (A process has one endpoint; tests
// play several processes in one.)
var exchanges sync.Map // pmi.Endpoint -> *exchanged

type exchanged struct {
	sync.Mutex
	done   bool
	coord  string // the coordinator, as published
	listen string // rank 0: the address it listened on, host:port
	secret []byte
}

// exchange settles j's coordinator and secret through the launcher's PMI key-value space.
func (j *Job) exchange(ctx context.Context) (net.Listener, error) {
	v, _ := exchanges.LoadOrStore(*j.PMI, new(exchanged))
	x := v.(*exchanged)
	x.Lock()
	defer x.Unlock()
	if x.done {
		return j.reuse(x)
	}
	ctx, cancel := context.WithTimeout(ctx, ExchangeTimeout)
	defer cancel()
	c, err := pmi.Dial(ctx, *j.PMI)
	if err != nil {
		return nil, j.pmiFailed(err)
	}
	defer c.Close()
	if r, n := c.Rank(), c.Size(); r >= 0 && r != j.Rank || n > 0 && n != j.Size {
		return nil, j.pmiFailed(fmt.Errorf("the PMI server places this process as rank %d of %d, the environment as rank %d of %d (from %s)", r, n, j.Rank, j.Size, j.Source))
	}
	ln, err := j.exchangeRound(ctx, c)
	if err != nil {
		return nil, err
	}
	x.done, x.coord, x.secret = true, j.Coord, j.Secret
	if ln != nil {
		x.listen = ln.Addr().String()
	}
	return ln, nil
}

// exchangeRound is one round of the PMI exchange on c: rank 0 publishes what j lacks,
// every process waits at the launcher's fence, the others get what rank 0 published. It
// returns rank 0's coordinator listener when it opened one.
func (j *Job) exchangeRound(ctx context.Context, c *pmi.Client) (net.Listener, error) {
	needCoord, needSecret := j.Coord == "", j.Secret == nil
	var ln net.Listener
	if j.Rank == 0 {
		var err error
		if ln, err = j.publish(ctx, c, needCoord, needSecret); err != nil {
			return nil, err
		}
	}
	err := c.Fence(ctx)
	if err == nil && j.Rank != 0 {
		err = j.fetch(ctx, c, needCoord, needSecret)
	}
	if err == nil {
		err = c.Finalize(ctx)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, j.pmiFailed(err)
	}
	return ln, nil
}

// publish is rank 0's part of the exchange before the fence: when needCoord, it listens on
// a port the kernel chooses and puts its address; when needSecret, it draws a secret and
// puts it. It returns the listener (nil without needCoord).
func (j *Job) publish(ctx context.Context, c *pmi.Client, needCoord, needSecret bool) (net.Listener, error) {
	var ln net.Listener
	if needCoord {
		var err error
		if ln, err = j.listenPublished(ctx); err != nil {
			return nil, err
		}
		if err := c.Put(ctx, KeyCoord, j.Coord); err != nil {
			ln.Close()
			return nil, j.pmiFailed(err)
		}
	}
	if needSecret {
		var b [32]byte
		rand.Read(b[:])
		j.Secret = []byte(hex.EncodeToString(b[:]))
		if err := c.Put(ctx, KeySecret, string(j.Secret)); err != nil {
			if ln != nil {
				ln.Close()
			}
			return nil, j.pmiFailed(err)
		}
	}
	return ln, nil
}

// listenPublished opens rank 0's coordinator listener on j.Listen at a port the kernel
// chooses and sets j.Coord to the address it advertises.
func (j *Job) listenPublished(ctx context.Context) (net.Listener, error) {
	advertise, err := j.advertisedHost(ctx)
	if err != nil {
		return nil, err
	}
	host := j.Listen
	if ip := net.ParseIP(advertise); ip != nil && ip.To4() == nil && host == "0.0.0.0" {
		host = "::" // every interface, for an IPv6 address
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("jobenv: rank 0 cannot listen on %s for the job (set %s to an address of this host): %w", j.Listen, EnvListen, err)
	}
	j.Coord = net.JoinHostPort(advertise, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	return ln, nil
}

// fetch is the part of the exchange of a rank other than 0 after the fence: it gets what
// rank 0 published.
func (j *Job) fetch(ctx context.Context, c *pmi.Client, needCoord, needSecret bool) error {
	if needCoord {
		coord, err := c.Get(ctx, KeyCoord)
		if err != nil {
			return err
		}
		if _, _, err := net.SplitHostPort(coord); err != nil {
			return fmt.Errorf("rank 0 published the coordinator %q: %w", coord, err)
		}
		j.Coord = coord
	}
	if needSecret {
		s, err := c.Get(ctx, KeySecret)
		if err != nil {
			return err
		}
		j.Secret = []byte(s)
	}
	return nil
}

// pmiFailed wraps an error of the PMI exchange, saying how to do without it.
func (j *Job) pmiFailed(err error) error {
	why := ""
	if errors.Is(err, context.DeadlineExceeded) {
		why = " in time: did a process of the job fail, or start late?"
	}
	return fmt.Errorf("jobenv: rank %d: the PMI exchange with the launcher failed%s (export %s=host:port and %s to every process, "+
		"with %s=off, to do without it): %w", j.Rank, why, EnvCoord, EnvSecret, EnvPMI, err)
}

// reuse applies the result of this process's earlier exchange: rank 0 listens again where
// it did.
func (j *Job) reuse(x *exchanged) (net.Listener, error) {
	j.Coord, j.Secret = x.coord, x.secret
	if j.Rank != 0 || x.listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", x.listen)
	if err != nil {
		return nil, fmt.Errorf("jobenv: rank 0 cannot listen again on %s, the coordinator address it published through PMI for an earlier job in this process: %w", x.listen, err)
	}
	return ln, nil
}

// advertisedHost returns the host rank 0 publishes as the coordinator's: j.Listen when it
// names an address, else an address of this host that other hosts can reach.
func (j *Job) advertisedHost(ctx context.Context) (string, error) {
	if ip := net.ParseIP(j.Listen); ip == nil || !ip.IsUnspecified() {
		return j.Listen, nil
	}
	var names []string
	if j.Node != "" {
		names = append(names, j.Node)
	}
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	if a := reachableAddr(ctx, names); a != "" {
		return a, nil
	}
	return "", fmt.Errorf("jobenv: rank 0 found no address of this host that other hosts can reach (no interface with a global address is up); export %s=<address of this host on the network the job uses>", EnvListen)
}

// reachableAddr returns the first of these host names' addresses that belongs to a local
// interface and is not loopback, else the first global unicast address of an interface
// that is up (IPv4 before IPv6), else "".
func reachableAddr(ctx context.Context, names []string) string {
	local := map[string]bool{}
	var v4, v6 []string
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || !n.IP.IsGlobalUnicast() {
				continue
			}
			local[n.IP.String()] = true
			if n.IP.To4() != nil {
				v4 = append(v4, n.IP.String())
			} else {
				v6 = append(v6, n.IP.String())
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, name := range names {
		ips, _ := net.DefaultResolver.LookupIPAddr(ctx, name)
		for _, ip := range ips {
			if local[ip.IP.String()] {
				return ip.IP.String()
			}
		}
	}
	if all := append(v4, v6...); len(all) > 0 {
		return all[0]
	}
	return ""
}

// sameHost reports whether two host names name the same host, comparing short names when
// one of them is qualified.
func sameHost(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	short := func(s string) string { h, _, _ := strings.Cut(s, "."); return h }
	return net.ParseIP(a) == nil && net.ParseIP(b) == nil && strings.EqualFold(short(a), short(b))
}
