package provider

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs"
)

// The typed snapshot of a running stream: its RTFS map has the keys of its
// JSON form, and its JSON form decodes back into an equal snapshot.
func TestStreamInfoMatchesTheMap(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	f.Send(id, `{"n": 1}`)
	f.waitFor("a chunk", func() bool {
		in, _ := f.p.Info(id, InspectOptions{})
		return in.Stats.ProcessedChunks == 1
	})
	in, err := f.p.Info(id, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mapPaths(in.Value()), jsonPaths(t, in.JSON()); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("RTFS keys %v\nJSON keys %v", got, want)
	}
	var back StreamInfo
	if err := json.Unmarshal(in.JSON(), &back); err != nil {
		t.Fatal(err)
	}
	if !rtfs.Equal(back.Value(), in.Value()) {
		t.Errorf("through JSON:\n%v\nwant\n%v", back.Value(), in.Value())
	}
}

// fullInfo is a StreamInfo with every field set, so that its JSON form has
// every key of the inspect shape.
func fullInfo() StreamInfo {
	one, cursor, half := int64(1), "c1", 0.5
	state := JSONValue{V: rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(1))}
	queue := []QueuedInfo{{Chunk: JSONValue{V: rtfs.Int(2)}, Metadata: JSONValue{V: rtfs.Nil}, WaitingMs: 3}}
	return StreamInfo{
		StreamID: "s", Processor: "p", Endpoint: "e",
		Status:        StatusInfo{State: StateError, Message: "boom", EndReason: "error"},
		QueueCapacity: 8,
		Stats:         StatsInfo{ProcessedChunks: 1, LastLatencyMs: &one, LastEventEpochMs: &one, ChunksPerSecond: 1.5},
		Transport:     TransportInfo{Kind: "sse", AutoConnect: true, ServerURL: "http://127.0.0.1:2025/sse"},
		LastOutput:    JSONValue{V: rtfs.Int(1)}, Result: JSONValue{V: rtfs.Nil}, Cursor: &cursor,
		Programs:     []ProgramVersion{{Hash: "h1", File: "f.rtfs", Processor: "p", Compiler: "rtfs-compile-2", AtEpochMs: 1}},
		CurrentState: &state, InitialState: &state, Queue: &queue,
		Stale:    &Stale{Owner: "a", SinceEpochMs: &one},
		Progress: &ProgressInfo{Done: 1, Total: &half, Fraction: &half, EtaMs: &one, Message: "m", Milestone: "scan"},
		Failure:  &Failure{Kind: FailureProcessor, Seq: 3, Error: "boom", Attempts: 2, AtEpochMs: 1},
		DeadLetters: DeadLettersInfo{Count: 1, Last: []DeadLetter{{StreamID: "s", Seq: 2, Chunk: JSONValue{V: rtfs.Int(2)},
			Metadata: JSONValue{V: rtfs.Nil}, Kind: FailureProcessor, Error: "bad", Attempts: 1, AtEpochMs: 1}}},
	}
}

// The struct makes the RTFS map: keyword keys in field order, the fields
// tagged rtfs:"keyword" as keywords, omitempty fields left out when empty,
// nil pointers nil.
func TestStreamInfoValue(t *testing.T) {
	in := fullInfo()
	kw := func(name string) rtfs.Value { return rtfs.Keyword(name) }
	want := rtfs.MapOf(
		kw("stream-id"), rtfs.String("s"), kw("processor"), rtfs.String("p"), kw("endpoint"), rtfs.String("e"),
		kw("status"), rtfs.MapOf(kw("state"), kw("error"), kw("message"), rtfs.String("boom"), kw("end-reason"), kw("error")),
		kw("queue-capacity"), rtfs.Int(8),
		kw("stats"), rtfs.MapOf(kw("processed-chunks"), rtfs.Int(1), kw("queued-chunks"), rtfs.Int(0), kw("dropped-chunks"), rtfs.Int(0),
			kw("last-latency-ms"), rtfs.Int(1), kw("last-event-epoch-ms"), rtfs.Int(1), kw("chunks-per-second"), rtfs.Float(1.5),
			kw("reconnects"), rtfs.Int(0), kw("bytes-received"), rtfs.Int(0), kw("outputs"), rtfs.Int(0),
			kw("dropped-outputs"), rtfs.MapOf(kw("immediate"), rtfs.Int(0), kw("normal"), rtfs.Int(0), kw("low"), rtfs.Int(0))),
		kw("transport"), rtfs.MapOf(kw("kind"), kw("sse"), kw("auto-connect"), rtfs.True, kw("task-present"), rtfs.False,
			kw("task-active"), rtfs.False, kw("timeout-ms"), rtfs.Int(0), kw("retry-attempts"), rtfs.Int(0),
			kw("server-url"), rtfs.String("http://127.0.0.1:2025/sse")),
		kw("observed-at-epoch-ms"), rtfs.Int(0), kw("started-at-epoch-ms"), rtfs.Int(0), kw("ended-at-epoch-ms"), rtfs.Nil, kw("persistence-enabled"), rtfs.False,
		kw("last-output"), rtfs.Int(1), kw("result"), rtfs.Nil, kw("cursor"), rtfs.String("c1"),
		kw("dropped-chunks"), rtfs.Int(0), kw("reconnects"), rtfs.Int(0),
		kw("progress"), rtfs.MapOf(kw("done"), rtfs.Float(1), kw("total"), rtfs.Float(0.5), kw("fraction"), rtfs.Float(0.5),
			kw("eta-ms"), rtfs.Int(1), kw("message"), rtfs.String("m"), kw("milestone"), kw("scan")),
		kw("failure"), rtfs.MapOf(kw("kind"), kw("processor"), kw("seq"), rtfs.Int(3), kw("error"), rtfs.String("boom"),
			kw("attempts"), rtfs.Int(2), kw("at-epoch-ms"), rtfs.Int(1)),
		kw("dead-letters"), rtfs.MapOf(kw("count"), rtfs.Int(1), kw("last"), rtfs.NewVector(rtfs.MapOf(kw("stream-id"), rtfs.String("s"),
			kw("seq"), rtfs.Int(2), kw("chunk"), rtfs.Int(2), kw("metadata"), rtfs.Nil, kw("kind"), kw("processor"), kw("error"), rtfs.String("bad"),
			kw("attempts"), rtfs.Int(1), kw("at-epoch-ms"), rtfs.Int(1)))),
		kw("programs"), rtfs.NewVector(rtfs.MapOf(kw("hash"), rtfs.String("h1"), kw("file"), rtfs.String("f.rtfs"),
			kw("processor"), rtfs.String("p"), kw("compiler"), rtfs.String("rtfs-compile-2"), kw("at-epoch-ms"), rtfs.Int(1))),
		kw("current-state"), rtfs.MapOf(kw("count"), rtfs.Int(1)), kw("initial-state"), rtfs.MapOf(kw("count"), rtfs.Int(1)),
		kw("queue"), rtfs.NewVector(rtfs.MapOf(kw("chunk"), rtfs.Int(2), kw("metadata"), rtfs.Nil, kw("waiting-ms"), rtfs.Int(3))),
		kw("stale"), rtfs.MapOf(kw("owner"), rtfs.String("a"), kw("since-epoch-ms"), rtfs.Int(1)),
	)
	if got := in.Value(); !rtfs.Equal(got, want) {
		t.Errorf("Value:\n%v\nwant\n%v", got, want)
	}
	if got, _ := in.Value().(*rtfs.Map).Get(rtfs.Keyword("status")); got.String() != `{:state :error :message "boom" :end-reason :error}` {
		t.Errorf(":status = %s, want its keys in field order", got)
	}
	var bare StreamInfo
	m := bare.Value().(*rtfs.Map)
	for _, k := range []string{"current-state", "initial-state", "queue", "stale"} {
		if _, ok := m.Get(rtfs.Keyword(k)); ok {
			t.Errorf("a snapshot without :%s has the key", k)
		}
	}
	for _, k := range []string{"cursor", "last-output", "result", "progress", "failure"} {
		if v, ok := m.Get(rtfs.Keyword(k)); !ok || v != rtfs.Nil {
			t.Errorf(":%s of an empty snapshot = %v, %v; want nil", k, v, ok)
		}
	}
	if st, _ := m.Get(rtfs.Keyword("status")); st.(*rtfs.Map).Len() != 1 {
		t.Errorf(":status of an empty snapshot = %v, want :state alone", st)
	}
}

// docs/streams.md's Inspect table lists every key of the shape, a nested
// one in its parent's row, and no key the shape does not have (a nested
// one in the {...} of its parent's row).
func TestInspectDocsFollowTheShape(t *testing.T) {
	paths := InspectKeys()
	if full := jsonPaths(t, fullInfo().JSON()); strings.Join(full, " ") != strings.Join(slices.Sorted(slices.Values(paths)), " ") {
		t.Fatalf("InspectKeys\n  %v\nthe JSON of a full snapshot has\n  %v", paths, full)
	}
	doc, err := os.ReadFile("../docs/streams.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)[strings.Index(string(doc), "## Inspect"):]
	section = section[:strings.Index(section[1:], "\n## ")+1]
	rows := map[string]string{} // top-level key -> the value column of its row
	row := regexp.MustCompile("(?m)^\\| ((?:`:[a-z-]+` ?)+) \\| (.*) \\|$")
	token := regexp.MustCompile("`?:([a-z-]+)")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, k := range token.FindAllStringSubmatch(m[1], -1) {
			rows[k[1]] = m[2]
			documented = append(documented, k[1])
		}
	}
	var top []string
	children := map[string][]string{}
	for _, p := range paths {
		parent, child, nested := strings.Cut(p, ".")
		if !nested {
			top = append(top, p)
			continue
		}
		children[parent] = append(children[parent], child)
	}
	sort.Strings(documented)
	sort.Strings(top)
	if strings.Join(documented, " ") != strings.Join(top, " ") {
		t.Errorf("the table's keys\n  %v\nthe shape's\n  %v", documented, top)
	}
	values := map[string]bool{}
	for _, s := range []State{StateActive, StatePaused, StateFailed, StateCompleted, StateCancelled, StateError, StateUnrecoverable} {
		values[string(s)] = true
	}
	for parent, keys := range children {
		inRow, inBraces := map[string]bool{}, map[string]bool{}
		for _, k := range token.FindAllStringSubmatch(rows[parent], -1) {
			inRow[k[1]] = true
		}
		for _, braces := range regexp.MustCompile(`\{[^}]*\}`).FindAllString(rows[parent], -1) {
			for _, k := range token.FindAllStringSubmatch(braces, -1) {
				inBraces[k[1]] = true
			}
		}
		for _, k := range keys {
			// A key of a map within the map is listed by its own name,
			// in braces after its parent's.
			name := k[strings.LastIndex(k, ".")+1:]
			if !inRow[name] {
				t.Errorf("the row of :%s does not list :%s", parent, k)
			}
			delete(inBraces, name)
		}
		for k := range inBraces {
			if !values[k] {
				t.Errorf("the row of :%s lists :%s, which the shape does not have", parent, k)
			}
		}
	}
}

// jsonPaths returns the keys of a JSON object and of the objects in it (in
// arrays too), as dotted paths, sorted.
func jsonPaths(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				out = append(out, prefix+k)
				if prefix == "" && (k == "current-state" || k == "initial-state" || k == "last-output" || k == "result") {
					continue // values of the stream, not of the shape
				}
				walk(prefix+k+".", x)
			}
		case []any:
			for _, x := range v {
				walk(prefix, x)
			}
		}
	}
	walk("", v)
	sort.Strings(out)
	return slices.Compact(out)
}

// mapPaths is jsonPaths of an RTFS map.
func mapPaths(v rtfs.Value) []string {
	var out []string
	var walk func(prefix string, v rtfs.Value)
	walk = func(prefix string, v rtfs.Value) {
		switch v := v.(type) {
		case *rtfs.Map:
			v.Range(func(k, x rtfs.Value) bool {
				name := string(k.(rtfs.Keyword))
				out = append(out, prefix+name)
				if prefix == "" && (name == "current-state" || name == "initial-state" || name == "last-output" || name == "result") {
					return true
				}
				walk(prefix+name+".", x)
				return true
			})
		case *rtfs.Vector:
			for i := range v.Len() {
				walk(prefix, v.Index(i))
			}
		}
	}
	walk("", v)
	sort.Strings(out)
	return slices.Compact(out)
}
