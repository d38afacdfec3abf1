package redistest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every test that skips itself under the race detector (WithoutRace, directly or through a function of its package
// that calls it) is one the Makefile's NORACE_TESTS runs without it: otherwise make test would run it nowhere.
func TestNoRaceTestsAllRun(t *testing.T) {
	root := moduleRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NORACE_TESTS := '(.*)'$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no NORACE_TESTS line in the Makefile")
	}
	pattern := regexp.MustCompile(strings.ReplaceAll(string(m[1]), "$$", "$"))
	skipped := withoutRaceTests(t, root)
	if len(skipped) == 0 {
		t.Fatal("found no test that calls WithoutRace")
	}
	for _, name := range skipped {
		if !pattern.MatchString(name) {
			t.Errorf("%s skips itself under -race, and NORACE_TESTS does not name it: make test runs it nowhere", name)
		}
	}
}

// withoutRaceTests returns the tests of the module that call WithoutRace, directly or through a function of their
// own package that does.
func withoutRaceTests(t *testing.T, root string) []string {
	var out []string
	byDir := map[string][]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range byDir {
		callers := map[string]bool{} // the package's functions that call WithoutRace
		var funcs []*ast.FuncDecl
		for _, f := range files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && fd.Recv == nil {
					funcs = append(funcs, fd)
					if calls(fd, func(name string) bool { return name == "WithoutRace" }) {
						callers[fd.Name.Name] = true
					}
				}
			}
		}
		for _, fd := range funcs {
			if strings.HasPrefix(fd.Name.Name, "Test") &&
				calls(fd, func(name string) bool { return callers[name] || name == "WithoutRace" }) {
				out = append(out, fd.Name.Name)
			}
		}
	}
	return out
}

// calls reports whether fd's body calls a function (or a package's function) whose name match accepts.
func calls(fd *ast.FuncDecl, match func(string) bool) bool {
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		switch fn := c.Fun.(type) {
		case *ast.Ident:
			found = found || match(fn.Name)
		case *ast.SelectorExpr:
			found = found || match(fn.Sel.Name)
		}
		return !found
	})
	return found
}

// moduleRoot is the directory of the module's go.mod, above the test's working directory.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}
