package grid

import "testing"

func TestSquare(t *testing.T) {
	for tasks, want := range map[int]Grid{1: {1, 1}, 2: {2, 1}, 3: {3, 1}, 4: {2, 2}, 6: {3, 2}, 12: {4, 3}} {
		if g := Square(tasks); g != want {
			t.Errorf("Square(%d) = %s, want %s", tasks, g, want)
		}
	}
}

func TestFit(t *testing.T) {
	for _, c := range []struct {
		tasks, nx, ny int
		want          Grid
	}{
		{4, 100, 100, Grid{2, 2}}, {2, 100, 100, Grid{1, 2}}, {2, 200, 100, Grid{2, 1}}, {6, 300, 200, Grid{3, 2}}, {7, 10, 10, Grid{1, 7}},
	} {
		if g := Fit(c.tasks, c.nx, c.ny); g != c.want {
			t.Errorf("Fit(%d, %d, %d) = %s, want %s", c.tasks, c.nx, c.ny, g, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, bad := range []string{"", "3", "0x2", "2x", "2x2x2", "axb", "-1x2", "2x2 ", "5x5"} {
		if _, err := Parse(bad, 24); err == nil {
			t.Errorf("Parse(%q, 24) accepted", bad)
		}
	}
	if g, err := Parse("3x2", 24); err != nil || g != (Grid{3, 2}) || g.String() != "3x2" || g.Tasks() != 6 {
		t.Errorf("Parse(3x2) = %v, %v", g, err)
	}
	if g := (Grid{3, 2}); g.ID(g.Coords(5)) != 5 || g.Transpose() != (Grid{2, 3}) {
		t.Errorf("Coords, ID or Transpose of %s", g)
	}
}
