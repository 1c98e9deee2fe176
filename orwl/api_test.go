package orwl_test

import (
	"context"
	"errors"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// TestAPINamesNoOtherPackage: the documentation of package orwl (what go doc shows: the
// exported declarations and their comments) names no other package of the module, so that
// a program needs nothing but orwl.
func TestAPINamesNoOtherPackage(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	ours := map[string]bool{} // the names under which files import packages of the module
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/orwl-go/orwl/") {
				name := path.Base(p)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				ours[name] = true
			}
		}
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/orwl-go/orwl/orwl")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range ours {
		names = append(names, regexp.QuoteMeta(name))
	}
	inDoc := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\.[A-Z]`)
	check := func(what, text string, decl ast.Node) {
		if m := inDoc.FindString(text); m != "" {
			t.Errorf("the documentation of %s names %s...", what, m)
		}
		if decl == nil {
			return
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && ours[id.Name] {
					var b strings.Builder
					printer.Fprint(&b, fset, sel)
					t.Errorf("%s, at %s, shows %s", what, fset.Position(sel.Pos()), b.String())
				}
			}
			return true
		})
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			check(strings.Join(v.Names, ", "), v.Doc, v.Decl)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			check(f.Name, f.Doc, f.Decl)
		}
	}
	check("the package", pkg.Doc, nil)
	values(pkg.Consts)
	values(pkg.Vars)
	funcs(pkg.Funcs)
	for _, typ := range pkg.Types {
		check(typ.Name, typ.Doc, typ.Decl)
		values(typ.Consts)
		values(typ.Vars)
		funcs(typ.Funcs)
		funcs(typ.Methods)
	}
}

// TestModeNames: the two modes name themselves as errors and traces do.
func TestModeNames(t *testing.T) {
	if orwl.Read.String() != "read" || orwl.Write.String() != "write" {
		t.Errorf("modes %q and %q, want read and write", orwl.Read, orwl.Write)
	}
}

// TestHandleErrorNamesTheHandle: every error of a handle is a *HandleError whose fields name
// the operation, the task, the location, the position and the mode, wrapping one of the Err
// values: a misuse, the use of a mistaken insert, and a misuse of data found by the task's
// recovery (Run's error).
func TestHandleErrorNamesTheHandle(t *testing.T) {
	want := func(err error, op string, task int, loc string, pos int, mode orwl.Mode, cause error) {
		t.Helper()
		he, ok := errors.AsType[*orwl.HandleError](err)
		if !ok {
			t.Errorf("%v: not a *HandleError", err)
			return
		}
		if he.Op != op || he.Task != task || he.Location != loc || he.Pos != pos || he.Mode != mode {
			t.Errorf("%v: HandleError{Op: %q, Task: %d, Location: %s, Pos: %d, Mode: %s}, want {%q, %d, %s, %d, %s}",
				err, he.Op, he.Task, he.Location, he.Pos, he.Mode, op, task, loc, pos, mode)
		}
		if cause != nil && !errors.Is(he.Err, cause) {
			t.Errorf("%v: Err %v, want %v", err, he.Err, cause)
		}
	}
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		block := task.WriteInsert(task.Loc(0, "block"), 1)
		nowhere := task.ReadInsert(task.Loc(0, "nowhere"), 0)
		if err := task.Schedule(ctx); err == nil {
			t.Error("Schedule accepted an insert on an unknown location")
		}
		if block.Mode() != orwl.Write || nowhere.Mode() != orwl.Read {
			t.Errorf("modes %s and %s, want write and read", block.Mode(), nowhere.Mode())
		}
		want(block.Release(), "release", 0, `task 0 "block"`, 1, orwl.Write, orwl.ErrNotHeld)
		want(nowhere.Acquire(ctx), "acquire", 0, `task 0 "nowhere"`, 0, orwl.Read, nil)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := orwl.Config{Tasks: 1, Locations: []string{"x"}, Checked: orwl.CheckedOn}
	err = orwl.Run(context.Background(), cfg, func(ctx context.Context, task *orwl.Task) error {
		task.Scale("x", 8)
		r := task.ReadInsertOnce(task.Loc(0, "x"), 2)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if err := r.Acquire(ctx); err != nil {
			return err
		}
		r.Map()[0] = 1 // outside a Section: the task's recovery reports it
		return nil
	})
	want(err, "use of the data", 0, `task 0 "x"`, 2, orwl.Read, orwl.ErrReadOnlyData)
}
