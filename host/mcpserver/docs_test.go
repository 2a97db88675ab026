package mcpserver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsFollowTheCode: docs/mcp-server.md lists the layers of /mcp in
// the order and with the eras mcpLayers has, and the package doc names
// every tool and every file of the package.
func TestDocsFollowTheCode(t *testing.T) {
	f := newFixture(t, Options{})
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp-server.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (both|sessions|sessionless) \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(md), -1) {
		documented = append(documented, m[1]+" "+m[2])
	}
	eraName := map[era]string{eraAny: "both", eraSessions: "sessions", eraSessionless: "sessionless"}
	var layers []string
	for _, l := range f.srv.mcpLayers() {
		layers = append(layers, l.name+" "+eraName[l.only])
	}
	if strings.Join(documented, ", ") != strings.Join(layers, ", ") {
		t.Errorf("docs/mcp-server.md lists the layers\n  %s\nthe code has\n  %s", strings.Join(documented, ", "), strings.Join(layers, ", "))
	}

	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range f.srv.tools {
		if !strings.Contains(string(doc), tool.name) {
			t.Errorf("doc.go does not name the tool %s", tool.name)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if !strings.HasSuffix(name, "_test.go") && name != "doc.go" && !strings.Contains(string(doc), "//\t"+name+" ") {
			t.Errorf("doc.go's file map lacks %s", name)
		}
	}
}
