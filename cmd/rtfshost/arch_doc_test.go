package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestArchitectureTable holds docs/architecture.md's package table against
// the module's packages as go list sees them: every package has a row (a
// row's package covers its subpackages unless they have a row of their
// own), and a package imports only packages of its own row or of rows
// above it.
func TestArchitectureTable(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The rows: the backticked paths of the first cell of each row of the
	// table under "## Packages".
	section := string(doc[bytes.Index(doc, []byte("## Packages")):])
	section = section[:strings.Index(section[3:], "\n## ")+3]
	paths := regexp.MustCompile("`([a-z0-9/]+)`")
	rowOf := map[string]int{}
	rows := 0
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range paths.FindAllStringSubmatch(first, -1) {
			if _, dup := rowOf[m[1]]; dup {
				t.Errorf("%s has two rows", m[1])
			}
			rowOf[m[1]] = rows
		}
		rows++
	}
	if rows < 10 {
		t.Fatalf("found %d rows in the package table", rows)
	}
	// row returns the row of package p: its own, else its closest parent's.
	row := func(p string) (int, bool) {
		for q := p; ; {
			if r, ok := rowOf[q]; ok {
				return r, true
			}
			i := strings.LastIndex(q, "/")
			if i < 0 {
				return 0, false
			}
			q = q[:i]
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const module = "github.com/rtfshost/rtfshost/"
	cmd := exec.CommandContext(ctx, goTool(), "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		if strings.HasPrefix(pkg, "bench/") {
			continue // benchmark programs, not part of rtfshost
		}
		n++
		r, ok := row(pkg)
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md's package table", pkg)
			continue
		}
		for _, imp := range f[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if dr, ok := row(dep); ok && dr > r {
				t.Errorf("%s imports %s, from a row below its own in docs/architecture.md", pkg, dep)
			}
		}
	}
	t.Logf("%d packages in %d rows", n, rows)
}
