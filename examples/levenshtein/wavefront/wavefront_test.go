package wavefront

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// plain is the textbook dynamic program over the whole matrix, with no trick of the
// package: the reference of the tests.
func plain(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			sub := d[i-1][j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, sub)
		}
	}
	return d[len(a)][len(b)]
}

// randomString returns up to max characters of an alphabet of k letters.
func randomString(r *rand.Rand, max, k int) string {
	s := make([]byte, r.IntN(max+1))
	for i := range s {
		s[i] = byte('a' + r.IntN(k))
	}
	return string(s)
}

func TestPlain(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2},
		{"intention", "execution", 5}, {"abc", "abc", 0}, {"ab", "ba", 2},
	} {
		if got := plain(c.a, c.b); got != c.want {
			t.Errorf("plain(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestSequential: the inner loop (three rows per pass, then one) against the plain program on
// random strings of every small length, including empty and unequal ones, and on strings
// that share long runs.
func TestSequential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a, b := randomString(r, 40, 1+r.IntN(4)), randomString(r, 40, 1+r.IntN(4))
		if got, want := Sequential([]byte(a), []byte(b)), plain(a, b); got != want {
			t.Fatalf("Sequential(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
	for range 300 { // every byte value, whose costs the kernel looks up in a table
		a, b := randomString(r, 40, 256), randomString(r, 40, 256)
		if got, want := Sequential([]byte(a), []byte(b)), plain(a, b); got != want {
			t.Fatalf("Sequential(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
	a, b := strings.Repeat("ab", 300)+"x", "y"+strings.Repeat("ba", 250)
	if got, want := Sequential([]byte(a), []byte(b)), plain(a, b); got != want {
		t.Fatalf("long runs: %d, want %d", got, want)
	}
}

// TestRunMatchesPlain runs the job over many random pairs of strings (empty ones and
// unequal lengths included) with several numbers of tasks, some with more tasks than
// columns, and block sizes from one row to more than A.
func TestRunMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pairs := [][2]string{{"", ""}, {"", "abc"}, {"abcd", ""}, {"kitten", "sitting"}, {"a", "b"}}
	for range 25 {
		pairs = append(pairs, [2]string{randomString(r, 60, 3), randomString(r, 60, 3)})
	}
	for _, ab := range pairs {
		want := plain(ab[0], ab[1])
		for _, tasks := range []int{1, 2, 3, 7} {
			for _, block := range []int{1, 2, 5, 64} {
				p := Params{A: []byte(ab[0]), B: []byte(ab[1]), Tasks: tasks, Block: block}
				res, err := Run(context.Background(), p)
				if err != nil || res == nil || res.Distance != want {
					t.Fatalf("%q, %q with %d tasks, blocks of %d: %+v, %v; want distance %d", ab[0], ab[1], tasks, block, res, err, want)
				}
			}
		}
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{{Tasks: 0, Block: 1}, {Tasks: MaxTasks + 1, Block: 1}, {Tasks: 1, Block: 0}} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
		if _, err := Run(context.Background(), p); err == nil {
			t.Errorf("Run(%+v) accepted", p)
		}
	}
}

func TestBand(t *testing.T) {
	for _, c := range []struct{ n, tasks int }{{10, 3}, {2, 5}, {0, 4}, {100000, 7}} {
		next := 0
		for k := range c.tasks {
			lo, hi := Band(c.n, c.tasks, k)
			if lo != next || hi < lo {
				t.Fatalf("Band(%d, %d, %d) = [%d, %d), want to start at %d", c.n, c.tasks, k, lo, hi, next)
			}
			next = hi
		}
		if next != c.n {
			t.Fatalf("bands of %d over %d end at %d", c.n, c.tasks, next)
		}
	}
}

func TestGenerate(t *testing.T) {
	a, b := Generate(1000, 1), Generate(1000, 1)
	if string(a) != string(b) || string(a) == string(Generate(1000, 2)) || len(Generate(0, 1)) != 0 {
		t.Fatal("Generate is not a function of n and seed")
	}
	if strings.Trim(string(a), Alphabet) != "" {
		t.Fatalf("characters outside %s: %q", Alphabet, a)
	}
}

func ExampleRun() {
	res, err := Run(context.Background(), Params{A: []byte("kitten"), B: []byte("sitting"), Tasks: 3, Block: 2})
	fmt.Println(res.Distance, err)
	// Output: 3 <nil>
}

// BenchmarkKernel measures the inner loop on two 4000-character strings, one row at a time
// (oneRow) and three rows per pass (tile); cells per second are reported as MB/s (one byte
// per cell).
func BenchmarkKernel(b *testing.B) {
	x, y := Generate(4000, 1), Generate(4000, 2)
	row := make([]uint32, len(y))
	in, out := make([]uint32, len(x)+1), make([]uint32, len(x)+1)
	for i := range in {
		in[i] = uint32(i)
	}
	var m costs
	for c := range m {
		m[c] = mismatch
	}
	for _, name := range []string{"oneRow", "tile"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(x) * len(y)))
			for b.Loop() {
				for j := range row {
					row[j] = uint32(j + 1)
				}
				if name == "tile" {
					tile(x, y, row, in, out)
					continue
				}
				for i, c := range x {
					m[c] = match
					oneRow(&m, y, row, i+1, i+1)
					m[c] = mismatch
				}
			}
		})
	}
}
