package rtfs

import (
	"os"
	"strings"
	"testing"
)

// functionTable is the Markdown table of the index.
func functionTable(u []FuncDoc) string {
	var b strings.Builder
	b.WriteString("| function | usage | what it does |\n| --- | --- | --- |\n")
	for _, d := range u {
		if d.AliasOf != "" && strings.Contains(d.Name, "/") {
			continue // the namespaced names are one rule, stated above the table
		}
		where := ""
		if d.Prelude {
			where = " (prelude)"
		}
		b.WriteString("| `" + d.Name + "`" + where + " | `" + d.Usage + "` | " + strings.ReplaceAll(d.Doc, "|", "\\|") + " |\n")
	}
	return b.String()
}

// The index lists every function there is, each with a usage and a doc,
// and docs/rtfs-values.md names every one that is not another name for
// another.
func TestUniverse(t *testing.T) {
	u := Universe()
	if len(u) < 250 {
		t.Fatalf("Universe has %d functions, want every builtin and prelude function", len(u))
	}
	seen := map[string]bool{}
	for _, d := range u {
		if d.Usage == "" || d.Doc == "" {
			t.Errorf("%s has no usage or doc in funcDocs", d.Name)
		}
		if d.AliasOf != "" && !strings.Contains(d.Usage, d.Name) {
			t.Errorf("alias %s: usage %q", d.Name, d.Usage)
		}
		seen[d.Name] = true
	}
	for name := range funcDocs {
		if !seen[name] {
			t.Errorf("funcDocs documents %s, which is no function", name)
		}
	}
	// The function table of docs/rtfs-values.md is generated from the
	// index: RTFS_UPDATE_DOCS=1 go test -run TestUniverse ./rtfs rewrites it.
	const path = "../docs/rtfs-values.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- BEGIN FUNCTIONS (generated from rtfs.Universe) -->\n", "<!-- END FUNCTIONS -->"
	text := string(doc)
	bi, ei := strings.Index(text, begin), strings.Index(text, end)
	if bi < 0 || ei < bi {
		t.Fatalf("%s has no generated function table between %q and %q", path, begin, end)
	}
	want := functionTable(u)
	if got := text[bi+len(begin) : ei]; got != want {
		if os.Getenv("RTFS_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(text[:bi+len(begin)]+want+text[ei:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the function table of %s is out of date: RTFS_UPDATE_DOCS=1 go test -run TestUniverse ./rtfs", path)
	}
	if d, ok := LookupDoc("str/join"); !ok || d.AliasOf != "join" || !strings.HasPrefix(d.Usage, "(str/join") {
		t.Errorf("LookupDoc(str/join) = %+v", d)
	}
}

// Every special form and macro has a usage and a doc, and no doc names a
// form that is not one.
func TestForms(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Forms() {
		if d.Usage == "" || d.Doc == "" {
			t.Errorf("form %s has no usage or doc in formDocs", d.Name)
		}
		seen[d.Name] = true
	}
	for name := range formDocs {
		if !seen[name] {
			t.Errorf("formDocs documents %s, which is no form", name)
		}
	}
	if d, ok := LookupForm("->>"); !ok || d.Usage != "(->> x (f a) g ...)" {
		t.Errorf("LookupForm(->>) = %+v, %v", d, ok)
	}
}
