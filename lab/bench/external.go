//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orwl-go/orwl/external"
	"github.com/orwl-go/orwl/orwl"
)

// external: the cost of one call of an unmodified program through package external (a
// location's data as a sealed memfd input, a memfd output that becomes another location's
// data) against the same program on plain files, which the caller writes before the call
// and reads back after it, in a directory on tmpfs and in one on a disk file system: the
// seed's comparison of its virtual files with plain ones. The disk files are not synced
// during a series of calls, as a program's files usually are not (large ones may be written
// back while they are used); after it they are, so that their write-back does not slow the
// next method down. Every size is measured -rounds times per method, after one untimed call
// of each; a round calls the program for -time (at least once) with each method, the
// methods taking every place of the order in turn. The best round's time per call is kept,
// with the median beside it. The program is cp by default (-cmd gives another); its outputs
// through the three methods must be identical. The table goes to standard output (with
// -json, one JSON object per row) and, as external.txt beside external.json and the chart
// external.svg (time per call against size), into -out.
//
// On a virtual machine whose host backs guest memory when the guest first touches it, a
// call that needs memory the guest never used before is several times slower: large sizes
// then show medians far above the best round, for whichever method met fresh memory.

func init() {
	register(command{
		name:    "external",
		summary: "external programs on memfd files against the same program on tmpfs and disk files",
		files:   tableFiles("external", "external.svg"),
		setup:   benchExternal,
	})
}

// extRow is one row of the external table.
type extRow struct {
	Size    int     `json:"size"`           // bytes of the input location
	Method  string  `json:"method"`         // "memfd", "tmpfs" or "disk"
	Seconds float64 `json:"seconds"`        // per call, best round
	Median  float64 `json:"median_seconds"` // per call, median round
	Calls   int     `json:"calls"`          // in all rounds
	MBps    float64 `json:"mb_per_s"`       // size / seconds
	VsTmpfs float64 `json:"vs_tmpfs"`       // seconds / the tmpfs row's seconds
	VsDisk  float64 `json:"vs_disk"`        // seconds / the disk row's seconds
}

func benchExternal(fs *flag.FlagSet) func(rep *report) error {
	sizeList := fs.String("sizes", "4K,16K,64K,256K,1M,4M,16M,64M,256M", "location sizes, in bytes or with a K, M or G suffix")
	command := fs.String("cmd", "cp {in} {out}", "the program and its arguments; {in} and {out} are its input and output files")
	tmpfsDir := fs.String("tmpfs", "/dev/shm", "a directory on tmpfs, for the tmpfs method")
	diskDir := fs.String("disk", os.TempDir(), "a directory on a disk file system, for the disk method")
	perRound := fs.Duration("time", 40*time.Millisecond, "time of one round of calls (at least one call)")
	rounds := fs.Int("rounds", 3, "rounds per method and size, interleaved; the best is kept")
	return func(rep *report) error {
		if *rounds < 1 || *perRound <= 0 {
			return errors.New("need -rounds >= 1 and -time > 0")
		}
		sizes, err := parseSizes(*sizeList)
		if err != nil {
			return err
		}
		argv := strings.Fields(*command)
		if len(argv) == 0 || !strings.Contains(*command, "{in}") || !strings.Contains(*command, "{out}") {
			return fmt.Errorf("-cmd %q: want a program with {in} and {out} among its arguments", *command)
		}
		if argv[0], err = exec.LookPath(argv[0]); err != nil {
			return fmt.Errorf("-cmd: %w", err)
		}
		tmpfsType, err := fsType(*tmpfsDir)
		if err != nil {
			return err
		}
		diskType, err := fsType(*diskDir)
		if err != nil {
			return err
		}
		if tmpfsType != "tmpfs" {
			return fmt.Errorf("-tmpfs %s is on %s, not tmpfs", *tmpfsDir, tmpfsType)
		}
		if diskType == "tmpfs" || diskType == "ramfs" {
			return fmt.Errorf("-disk %s is on %s: give a directory on a disk file system", *diskDir, diskType)
		}
		var files []*fileMethod
		for _, dir := range []string{*tmpfsDir, *diskDir} {
			m, err := newFileMethod(dir, argv)
			if err != nil {
				return err
			}
			defer os.RemoveAll(m.dir)
			files = append(files, m)
		}
		fmt.Fprintf(os.Stderr, "external: %s; tmpfs %s, disk %s (%s); %d rounds of %v per method and size\n",
			*command, *tmpfsDir, *diskDir, diskType, *rounds, *perRound)
		var rows []extRow
		for _, size := range sizes {
			r, err := measureExternal(size, argv, files, *rounds, *perRound)
			if err != nil {
				return fmt.Errorf("size %s: %w", formatSize(size), err)
			}
			rows = append(rows, r...)
		}

		rep.header("program %q; tmpfs %s, disk %s (%s, not synced); best of %d rounds of %v; %d cores",
			*command, *tmpfsDir, *diskDir, diskType, *rounds, *perRound, runtime.NumCPU())
		rep.line("%-7s %-6s %10s %10s %6s %8s %9s %8s\n", "size", "method", "ms/call", "median", "calls", "MB/s", "vs-tmpfs", "vs-disk")
		for _, r := range rows {
			rep.line("%-7s %-6s %10.3f %10.3f %6d %8.1f %9.2f %8.2f\n", formatSize(r.Size), r.Method,
				r.Seconds*1e3, r.Median*1e3, r.Calls, r.MBps, r.VsTmpfs, r.VsDisk)
			rep.row(r)
		}
		if err := rep.write(rows); err != nil {
			return err
		}
		var c lineChart
		for _, r := range rows {
			c.add(r.Method, float64(r.Size), r.Seconds*1e3)
		}
		title := fmt.Sprintf("%s: time per call vs location size (memfd: package external)", *command)
		if err := c.save(filepath.Join(rep.out, "external.svg"), chartStyle{title: title, xlabel: "location size (bytes)", ylabel: "ms per call", logX: true, logY: true}); err != nil {
			return err
		}
		return nil
	}
}

// measureExternal measures the three methods for an input of size bytes and returns their
// rows, memfd first.
func measureExternal(size int, argv []string, files []*fileMethod, rounds int, perRound time.Duration) ([]extRow, error) {
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{}).Read(data)
	var rows []extRow
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 1, Locations: []string{"in", "out"}},
		func(ctx context.Context, t *orwl.Task) error {
			t.Scale("in", size)
			fill := t.WriteInsertOnce(t.Loc(0, "in"), 0)
			in, out := t.ReadInsert(t.Loc(0, "in"), 1), t.WriteInsert(t.Loc(0, "out"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if err := fill.Section(ctx, func(b []byte) error { copy(b, data); return nil }); err != nil {
				return err
			}
			c := external.Command(argv[0], argv[1:]...)
			c.Input("in", in)
			c.Output("out", out)
			// A method's call runs the program once; its settle, after each series of
			// calls, writes its files back, so that the write-back of disk files does not
			// slow the next method down.
			type method struct{ call, settle func() error }
			methods := []method{{call: func() error { return c.Run(ctx) }, settle: func() error { return nil }}}
			for _, m := range files {
				m.data = data
				methods = append(methods, method{m.call, m.sync})
			}
			series := func(i int, d time.Duration) (float64, int, error) {
				s, k, err := timeCalls(d, methods[i].call)
				if err == nil {
					err = methods[i].settle()
				}
				return s, k, err
			}
			for i := range methods { // the first calls allocate the output buffers: not timed
				if _, _, err := series(i, 0); err != nil {
					return err
				}
			}
			perCall := make([][]float64, len(methods))
			n := make([]int, len(methods))
			for r := range rounds {
				for j := range methods {
					i := (r + j) % len(methods) // every method takes every place in the order in turn
					s, k, err := series(i, perRound)
					if err != nil {
						return err
					}
					perCall[i] = append(perCall[i], s)
					n[i] += k
				}
			}
			// The three methods ran the same program on the same input.
			if err := out.Section(ctx, func(b []byte) error {
				for _, m := range files {
					if !bytes.Equal(b, m.got) {
						return fmt.Errorf("the output on %s files differs from the output through memfd", m.fs)
					}
				}
				return nil
			}); err != nil {
				return err
			}
			for i, method := range []string{"memfd", "tmpfs", "disk"} {
				slices.Sort(perCall[i])
				rows = append(rows, extRow{Size: size, Method: method, Seconds: perCall[i][0],
					Median: perCall[i][len(perCall[i])/2], Calls: n[i], MBps: float64(size) / perCall[i][0] / 1e6})
			}
			for i := range rows {
				rows[i].VsTmpfs, rows[i].VsDisk = rows[i].Seconds/rows[1].Seconds, rows[i].Seconds/rows[2].Seconds
			}
			return nil
		})
	return rows, err
}

// timeCalls calls call until d has passed, at least once, and returns the time per call in
// seconds and the number of calls.
func timeCalls(d time.Duration, call func() error) (float64, int, error) {
	start := time.Now()
	n := 0
	for n == 0 || time.Since(start) < d {
		if err := call(); err != nil {
			return 0, n, err
		}
		n++
	}
	return time.Since(start).Seconds() / float64(n), n, nil
}

// fileMethod runs the program on plain files in a directory: a call writes the input file,
// runs the program, and reads the output file back into got.
type fileMethod struct {
	dir, fs string
	in, out string
	args    []string // the program's, with the paths of in and out
	data    []byte   // the input
	got     []byte   // the last output
}

// newFileMethod makes a fresh directory for the files in dir.
func newFileMethod(dir string, argv []string) (*fileMethod, error) {
	fs, err := fsType(dir)
	if err != nil {
		return nil, err
	}
	sub, err := os.MkdirTemp(dir, "orwl-bench-external-")
	if err != nil {
		return nil, err
	}
	m := &fileMethod{dir: sub, fs: fs, in: filepath.Join(sub, "in"), out: filepath.Join(sub, "out")}
	r := strings.NewReplacer("{in}", m.in, "{out}", m.out)
	for _, a := range argv {
		m.args = append(m.args, r.Replace(a))
	}
	return m, nil
}

func (m *fileMethod) call() error {
	if err := os.WriteFile(m.in, m.data, 0o600); err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s on %s files: %w: %s", m.args[0], m.fs, err, bytes.TrimSpace(stderr.Bytes()))
	}
	f, err := os.Open(m.out)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	m.got = slices.Grow(m.got[:0], int(st.Size()))[:st.Size()]
	_, err = io.ReadFull(f, m.got)
	return err
}

// sync writes the files of m's file system back to its device.
func (m *fileMethod) sync() error {
	d, err := os.Open(m.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// fsType names the file system of dir: tmpfs, ramfs, ext4, xfs, btrfs, overlay, or its
// magic number.
func fsType(dir string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", fmt.Errorf("directory %s: %w", dir, err)
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs", nil
	case unix.RAMFS_MAGIC:
		return "ramfs", nil
	case unix.EXT4_SUPER_MAGIC:
		return "ext4", nil
	case unix.XFS_SUPER_MAGIC:
		return "xfs", nil
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs", nil
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay", nil
	}
	return fmt.Sprintf("file system 0x%x", st.Type), nil
}

// parseSizes parses a comma-separated list of positive sizes in bytes, each with an
// optional K, M or G suffix (powers of 1024).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		unit := 1
		if i := strings.IndexAny(f, "KMGkmg"); i >= 0 && i == len(f)-1 {
			unit = 1 << (10 * (strings.IndexByte("KMG", f[i]&^0x20) + 1))
			f = f[:i]
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-sizes %q: want positive sizes such as 4096, 4K or 256M", s)
		}
		out = append(out, v*unit)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-sizes %q: no size", s)
	}
	return out, nil
}

// formatSize writes n bytes with the largest binary unit that divides it.
func formatSize(n int) string {
	for _, u := range []struct {
		shift int
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.Itoa(n>>u.shift) + u.name
		}
	}
	return strconv.Itoa(n) + "B"
}
