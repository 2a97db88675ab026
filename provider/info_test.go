package provider

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs"
)

// The typed snapshot, its RTFS map and docs/streams.md name the same keys
// (issue 14), and its JSON form decodes back into an equal snapshot.
func TestStreamInfoMatchesTheMapAndTheDocs(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	f.send(id, `{"n": 1}`)
	f.waitFor("a chunk", func() bool {
		in, _ := f.p.Info(id, InspectOptions{})
		return in.Stats.ProcessedChunks == 1
	})
	in, err := f.p.Info(id, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := in.Value().(*rtfs.Map)
	var mapKeys []string
	m.Range(func(k, _ rtfs.Value) bool { mapKeys = append(mapKeys, string(k.(rtfs.Keyword))); return true })
	var asJSON map[string]json.RawMessage
	if err := json.Unmarshal(in.JSON(), &asJSON); err != nil {
		t.Fatal(err)
	}
	var jsonKeys []string
	for k := range asJSON {
		jsonKeys = append(jsonKeys, k)
	}
	sort.Strings(mapKeys)
	sort.Strings(jsonKeys)
	if strings.Join(mapKeys, " ") != strings.Join(jsonKeys, " ") {
		t.Errorf("RTFS keys %v\nJSON keys %v", mapKeys, jsonKeys)
	}
	doc, err := os.ReadFile("../docs/streams.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)[strings.Index(string(doc), "## Inspect"):]
	for _, k := range mapKeys {
		if !regexp.MustCompile("`:" + regexp.QuoteMeta(k) + "`").MatchString(section) {
			t.Errorf("docs/streams.md's Inspect section does not list :%s", k)
		}
	}
	var back StreamInfo
	if err := json.Unmarshal(in.JSON(), &back); err != nil {
		t.Fatal(err)
	}
	if !rtfs.Equal(back.Value(), in.Value()) {
		t.Errorf("through JSON:\n%v\nwant\n%v", back.Value(), in.Value())
	}
}
