package provider

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/mock"
	"github.com/rtfshost/rtfshost/transport/replay"
)

// TestRecordAndReplayFiles: a stream started with :record writes each
// chunk it receives, numbered, to its file; a policy that allows no files
// (serve's) refuses both a :record file and a :replay recording, naming
// the key; a policy that allows the directory accepts them.
func TestRecordAndReplayFiles(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "r.ndjson")
	g := compileGlobals(t, `(defn p [s c] {:state (inc s) :output c})`)
	f := newFixture(t, Options{ManualConnect: true, Transports: transport.NewCatalog(replay.Kind())})
	id, err := f.p.Start(StartRequest{Endpoint: "e", Transport: "replay", Processor: rtfs.Symbol("p"), Globals: g,
		InitialState: rtfs.Int(0), Record: rec, TransportKeys: map[string]json.RawMessage{"file": json.RawMessage(`"unused.ndjson"`)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{`{"a":1}`, "text"} {
		if err := f.p.Deliver(t.Context(), id, transport.Chunk{Data: []byte(data), ID: data}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor("two chunks processed", func() bool { return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(2) })
	if _, err := f.p.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := replay.Read(rec, strings.NewReader(string(b)))
	if err != nil || len(recs) != 2 || recs[0].Seq != 1 || string(recs[0].Chunk.Data) != `{"a":1}` || recs[1].Seq != 2 || string(recs[1].Chunk.Data) != "text" {
		t.Fatalf("recording %q: %v", b, err)
	}

	none, _ := egress.New(egress.Options{})
	f = newFixture(t, Options{ManualConnect: true, Transports: transport.NewCatalog(replay.Kind(), mock.Kind(&mock.Transport{})), Egress: none})
	_, err = f.p.Start(StartRequest{Endpoint: "e", Transport: "replay", Processor: rtfs.Symbol("p"), Globals: g,
		TransportKeys: map[string]json.RawMessage{"file": json.RawMessage(`"` + rec + `"`)}})
	if !errors.Is(err, egress.ErrDenied) || !strings.Contains(err.Error(), "file") {
		t.Errorf(":replay under a policy without files: %v", err)
	}
	_, err = f.p.Start(StartRequest{Endpoint: "e", Transport: "mock", Processor: rtfs.Symbol("p"), Globals: g, Record: filepath.Join(dir, "x.ndjson")})
	var ke *stream.KeyError
	if !errors.Is(err, egress.ErrDenied) || !errors.As(err, &ke) || ke.Key != "record" {
		t.Errorf(":record under a policy without files: %v", err)
	}
	allowed, _ := egress.New(egress.Options{FileDirs: []string{dir}})
	f = newFixture(t, Options{ManualConnect: true, Transports: transport.NewCatalog(replay.Kind()), Egress: allowed})
	if _, err := f.p.Start(StartRequest{Endpoint: "e", Transport: "replay", Processor: rtfs.Symbol("p"), Globals: g, Record: filepath.Join(dir, "y.ndjson"),
		TransportKeys: map[string]json.RawMessage{"file": json.RawMessage(`"` + rec + `"`)}}); err != nil {
		t.Errorf("files in an allowed directory: %v", err)
	}
}
