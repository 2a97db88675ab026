package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/txtar"
)

// The wire tests: testdata/wire/*.txtar each hold a sequence of HTTP
// exchanges with /mcp and the responses expected, compared after the parts
// that change from run to run are normalised. Run with -update to rewrite
// the expected responses from what the server answers (then read the diff).
//
// A file's comment says what it shows. Its files, in order:
//
//	-- N --        a request: a method line (POST, GET or DELETE, an optional
//	               path, default /mcp), header lines, a blank line, the body.
//	               A POST gets Content-Type: application/json and Accept:
//	               application/json, text/event-stream unless it sets them.
//	-- N.want --   the response: the status code, the headers
//	               Content-Type (media type only) and Mcp-Session-Id, a
//	               blank line, the body: JSON indented with sorted keys; an
//	               SSE body event by event (its event and retry lines, "id:
//	               <event>" for an id, the data as JSON), a blank line
//	               between events; any other body as text.
//	-- N --        FEED <stream-id> and a JSON chunk per line: the chunks
//	               are sent to the mock stream, on a goroutine of their
//	               own, while the exchanges go on (no want).
//
// Normalised: an Mcp-Session-Id, and a taskId that no request named, are
// bound to $SESSION, $TASK1, ... where they first appear, and written so in
// every later response; requests name them so too. createdAt and
// lastUpdatedAt are "<time>".

var updateWire = flag.Bool("update", false, "rewrite the expected responses of testdata/wire")

func TestWire(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "wire", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no wire tests in testdata/wire (%v)", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			runWire(t, path)
		})
	}
}

// wireRun is the state of one wire test.
type wireRun struct {
	t        *testing.T
	f        *fixture
	vars     map[string]string // $NAME -> value
	order    []string          // the names, longest value first when substituting
	requests strings.Builder   // every request so far: a taskId named here is not bound
	feeds    sync.WaitGroup
}

func runWire(t *testing.T, path string) {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &wireRun{t: t, f: newFixture(t, Options{}), vars: map[string]string{}}
	defer w.feeds.Wait()
	changed := false
	for i := 0; i < len(ar.Files); i++ {
		file := ar.Files[i]
		if strings.HasSuffix(file.Name, ".want") {
			t.Fatalf("%s: %s follows no request", path, file.Name)
		}
		if rest, ok := strings.CutPrefix(string(file.Data), "FEED "); ok {
			w.feed(file.Name, rest)
			continue
		}
		got := w.exchange(file.Name, string(file.Data))
		if i+1 >= len(ar.Files) || ar.Files[i+1].Name != file.Name+".want" {
			t.Fatalf("%s: request %s has no %s.want", path, file.Name, file.Name)
		}
		i++
		want := string(ar.Files[i].Data)
		if *updateWire {
			if got != want {
				ar.Files[i].Data = []byte(got)
				changed = true
			}
			continue
		}
		if got != want {
			t.Errorf("%s: response %s:\n--- got\n%s--- want\n%s", path, file.Name, got, want)
		}
	}
	if changed {
		if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// feed sends the chunks of a FEED file to its mock stream.
func (w *wireRun) feed(name, spec string) {
	id, lines, _ := strings.Cut(spec, "\n")
	var chunks []any
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		var c any
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			w.t.Fatalf("%s: chunk %q: %v", name, l, err)
		}
		chunks = append(chunks, c)
	}
	w.feeds.Add(1)
	go func() {
		defer w.feeds.Done()
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		w.f.feed(ctx, strings.TrimSpace(id), chunks...)
	}()
}

// exchange sends the request text and returns its normalised response.
func (w *wireRun) exchange(name, text string) string {
	t := w.t
	text = w.expand(text)
	w.requests.WriteString(text)
	head, body, _ := strings.Cut(text, "\n\n")
	lines := strings.Split(head, "\n")
	method, path, _ := strings.Cut(strings.TrimSpace(lines[0]), " ")
	if path == "" {
		path = PathStreamable
	}
	req, err := http.NewRequest(method, w.f.ts.URL+path, strings.NewReader(strings.TrimSpace(body)))
	if err != nil {
		t.Fatalf("request %s: %v", name, err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("request %s: header line %q", name, l)
		}
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("request %s: %v", name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("request %s: reading the response: %v", name, err)
	}
	return w.response(resp, data)
}

// expand replaces the bound $NAMEs in a request by their values.
func (w *wireRun) expand(text string) string {
	names := append([]string(nil), w.order...)
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) > len(names[j]) }) // $TASK10 before $TASK1
	for _, name := range names {
		text = strings.ReplaceAll(text, "$"+name, w.vars[name])
	}
	return text
}

// bind names value $SESSION, $SESSION2, ... or $TASK1, $TASK2, ... after
// prefix, unless it has a name already.
func (w *wireRun) bind(prefix, value string) {
	n := 0
	for name, v := range w.vars {
		if v == value {
			return
		}
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	name := prefix + strconv.Itoa(n+1)
	if prefix == "SESSION" && n == 0 {
		name = prefix
	}
	w.vars[name] = value
	w.order = append(w.order, name)
	// Longest value first, so that a value holding another is named whole.
	sort.SliceStable(w.order, func(i, j int) bool { return len(w.vars[w.order[i]]) > len(w.vars[w.order[j]]) })
}

// response writes resp normalised.
func (w *wireRun) response(resp *http.Response, data []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", resp.StatusCode)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "" {
		fmt.Fprintf(&b, "Content-Type: %s\n", mt)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		w.bind("SESSION", sid)
		fmt.Fprintf(&b, "Mcp-Session-Id: %s\n", w.substitute(sid))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	switch mt {
	case "text/event-stream":
		w.writeEvents(&b, data)
	case "application/json":
		b.WriteString(w.jsonText(data))
	default:
		b.WriteString(w.substitute(strings.TrimSpace(string(data))) + "\n")
	}
	return b.String()
}

// writeEvents writes an SSE body event by event.
func (w *wireRun) writeEvents(b *strings.Builder, data []byte) {
	sc := bufio.NewScanner(bytes.NewReader(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))))
	sc.Buffer(nil, 1<<20)
	var lines []string
	var payload []string
	first := true
	flush := func() {
		if lines == nil && payload == nil {
			return
		}
		if !first {
			b.WriteString("\n")
		}
		first = false
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		if p := strings.Join(payload, "\n"); strings.TrimSpace(p) != "" {
			b.WriteString(w.jsonText([]byte(p)))
		}
		lines, payload = nil, nil
	}
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, "data:"):
			payload = append(payload, strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " "))
		case strings.HasPrefix(l, "id:"):
			lines = append(lines, "id: <event>")
		default:
			lines = append(lines, l)
		}
	}
	flush()
}

// jsonText is data's JSON values indented, normalised; data itself when it
// is not JSON.
func (w *wireRun) jsonText(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b strings.Builder
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return w.substitute(strings.TrimSpace(string(data))) + "\n"
		}
		w.bindTasks(v)
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "\t")
		if err := enc.Encode(w.normalise(v)); err != nil {
			w.t.Fatal(err)
		}
		b.Write(out.Bytes())
	}
	return b.String()
}

// bindTasks binds every taskId in v that no request named.
func (w *wireRun) bindTasks(v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if id, ok := v[k].(string); ok && k == "taskId" && !strings.Contains(w.requests.String(), `"`+id+`"`) {
				w.bind("TASK", id)
			}
			w.bindTasks(v[k])
		}
	case []any:
		for _, x := range v {
			w.bindTasks(x)
		}
	}
}

var wireTimes = map[string]bool{"createdAt": true, "lastUpdatedAt": true}

// normalise returns v with its times replaced and its bound values named.
func (w *wireRun) normalise(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if _, ok := x.(string); ok && wireTimes[k] {
				v[k] = "<time>"
				continue
			}
			v[k] = w.normalise(x)
		}
	case []any:
		for i, x := range v {
			v[i] = w.normalise(x)
		}
	case string:
		return w.substitute(v)
	}
	return v
}

// substitute names the bound values in s.
func (w *wireRun) substitute(s string) string {
	for _, name := range w.order {
		s = strings.ReplaceAll(s, w.vars[name], "$"+name)
	}
	return s
}

// TestWireNormalise: the normalisation of the wire tests names a session
// and an unnamed task, keeps a task id a request named, and writes times
// and event ids as placeholders.
func TestWireNormalise(t *testing.T) {
	w := &wireRun{t: t, vars: map[string]string{}}
	w.requests.WriteString(`{"params":{"taskId":"mine"}}`)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}, "Mcp-Session-Id": {"S1"}}}
	got := w.response(resp, []byte("event: message\nid: x_0\ndata: {\"b\":\"eval-7 S1\",\"a\":{\"taskId\":\"eval-7\",\"createdAt\":\"2026\"},\"c\":{\"taskId\":\"mine\"}}\n\n"))
	want := "200\nContent-Type: text/event-stream\nMcp-Session-Id: $SESSION\n\nevent: message\nid: <event>\n{\n\t\"a\": {\n\t\t\"createdAt\": \"<time>\",\n\t\t\"taskId\": \"$TASK1\"\n\t},\n\t\"b\": \"$TASK1 $SESSION\",\n\t\"c\": {\n\t\t\"taskId\": \"mine\"\n\t}\n}\n"
	if got != want {
		t.Errorf("normalised:\n%s\nwant:\n%s", got, want)
	}
	if got := w.expand("$SESSION/$TASK1"); got != "S1/eval-7" {
		t.Errorf("expand: %q", got)
	}
}
