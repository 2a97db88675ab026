package host_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

const (
	catalogBegin = "<!-- transport catalog: generated from host.DefaultTransports by TestTransportsDoc; do not edit -->"
	catalogEnd   = "<!-- end of the transport catalog -->"
)

// TestTransportsDoc: the transport table of docs/transports.md is the
// catalog's (RTFSHOST_UPDATE_DOCS=1 rewrites it).
func TestTransportsDoc(t *testing.T) {
	cat := transport.NewCatalog(append(host.DefaultTransports().Kinds(), mock.Kind(nil))...)
	want := catalogBegin + "\n" + renderCatalog(cat) + catalogEnd
	const path = "../docs/transports.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, catalogBegin), strings.Index(doc, catalogEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated catalog section (%q ... %q)", path, catalogBegin, catalogEnd)
	}
	got := doc[i : j+len(catalogEnd)]
	if got == want {
		return
	}
	if os.Getenv("RTFSHOST_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j+len(catalogEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s's transport table is not the catalog's; run RTFSHOST_UPDATE_DOCS=1 go test -run TestTransportsDoc ./host\nwant:\n%s", path, want)
}

func renderCatalog(cat *transport.Catalog) string {
	var b strings.Builder
	b.WriteString("| `:transport` | reads | `:endpoint` | chosen without `:transport` for | served by `rtfshost` |\n| --- | --- | --- | --- | --- |\n")
	for _, k := range cat.Kinds() {
		ep, det, served := k.Endpoint, k.Detects, "yes"
		if ep == "" {
			ep = "none"
		}
		if det == "" {
			det = "never: name it"
		}
		if k.Local {
			served = "no (tests and embedders)"
		}
		fmt.Fprintf(&b, "| `:%s` | %s | %s | %s | %s |\n", k.Name, k.Doc, ep, det, served)
	}
	b.WriteString("\nStart keys that only some transports read (beside `:endpoint`, `:processor`, `:config`, ... which every stream has):\n\n")
	b.WriteString("| key | type | transports | meaning |\n| --- | --- | --- | --- |\n")
	for _, u := range cat.Keys() {
		fmt.Fprintf(&b, "| `:%s` | %s | %s | %s |\n", u.Name, strings.ReplaceAll(u.Type, "|", " or "), ":"+strings.Join(u.Transports, ", :"), u.Doc)
	}
	return b.String()
}
