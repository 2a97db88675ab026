package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/host/dashboard"
	"github.com/rtfshost/rtfshost/internal/browser"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a host whose streams take their chunks from Provider.Deliver
// (manual connect), and a dashboard on it served without a token.
type rig struct {
	h  *host.Host
	d  *dashboard.Dashboard
	ts *httptest.Server
}

func newRig(t *testing.T, streams int) *rig {
	t.Helper()
	h, err := host.New(host.Options{
		Streams: provider.Options{ManualConnect: true, LookupEnv: func(string) (string, bool) { return "", false }},
		Stdout:  io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Options{Provider: h.Provider(), Interval: 200 * time.Millisecond, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(dashboard.Prefix, d.StaticHandler())
	mux.Handle(dashboard.PathAPI, d.APIHandler())
	r := &rig{h: h, d: d, ts: httptest.NewServer(mux)}
	t.Cleanup(func() {
		r.d.Close()
		r.ts.Close()
		r.h.Close()
	})
	var src strings.Builder
	src.WriteString("(defn step [state chunk meta] {:state (inc state) :output {:n (inc state)}})\n")
	for i := range streams {
		fmt.Fprintf(&src, "(call :mcp.stream.start {:endpoint \"ep%d.v1\" :stream-id \"s%04d\" :processor step :initial-state 0})\n", i%7, i)
	}
	prog, err := rtfs.Compile("many.rtfs", []byte(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.Run(ctx, prog); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) deliver(t *testing.T, id string, n int) {
	t.Helper()
	for i := range n {
		if err := r.h.Provider().Deliver(context.Background(), id, transport.Chunk{Data: []byte(`{"i":1}`), ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestThousandStreamsInBrowser opens the dashboard on 1,000 live streams:
// the page keeps 100 rows in the DOM (paged), pages with "]" and the
// filter, and keeps answering while every stream's counts change.
func TestThousandStreamsInBrowser(t *testing.T) {
	exe, err := browser.Find()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bctx, closeBrowser, err := browser.New(ctx, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBrowser()
	eval := func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	start := time.Now()
	if err := chromedp.Do(bctx,
		chromedp.Navigate(r.ts.URL+dashboard.Prefix),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="s0099"]`)),
	); err != nil {
		t.Fatal(err)
	}
	t.Logf("first 100 of 1,000 rows shown %v after navigating", time.Since(start))
	if n := eval(`document.querySelectorAll("#rows tr").length`); n != float64(100) {
		t.Errorf("%v rows in the DOM, want one page of 100", n)
	}
	if got := eval(`document.getElementById("page-info").textContent`); got != "1–100 of 1000" {
		t.Errorf("page info %q", got)
	}
	// Every stream moves while the page is open.
	for range 3 {
		for i := range 1000 {
			r.deliver(t, fmt.Sprintf("s%04d", i), 1)
		}
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="s0000"] .c-processed`)),
		chromedp.KeyEvent("]"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="s0150"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-id="s0000"]`)),
	); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`tr[data-id="s0150"] .c-processed`)))
		if v == "3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("s0150 shows %q processed, want 3", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := eval(`document.querySelectorAll("#rows tr").length`); n != float64(100) {
		t.Errorf("%v rows in the DOM on page 2, want 100", n)
	}
	// The page answers at once: one evaluation's round trip.
	t0 := time.Now()
	eval(`1`)
	t.Logf("a round trip to the page with 1,000 live streams took %v", time.Since(t0))
}

// TestAPI checks the JSON API: the session's CSRF token, the inspect map,
// the buttons' POST refused without the token and applied with it, and the
// event stream's first snapshot.
func TestAPI(t *testing.T) {
	r := newRig(t, 2)
	r.deliver(t, "s0000", 2)
	var sess struct{ CSRF, Version string }
	getJSON(t, r.ts.URL+dashboard.PathSession, &sess)
	if len(sess.CSRF) != 32 || sess.Version != "test" {
		t.Fatalf("session %+v", sess)
	}
	var info provider.StreamInfo
	getJSON(t, r.ts.URL+dashboard.PathStreams+"s0000", &info)
	if info.StreamID != "s0000" || info.CurrentState == nil || info.Queue != nil {
		t.Errorf("inspect %+v: want the state, not the queue", info)
	}
	post := func(op, csrf string) int {
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+dashboard.PathStreams+"s0001/"+op, strings.NewReader("{}"))
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("cancel", ""); code != http.StatusForbidden {
		t.Errorf("cancel without the CSRF token: %d, want 403", code)
	}
	if code := post("cancel", strings.Repeat("0", 32)); code != http.StatusForbidden {
		t.Errorf("cancel with a wrong CSRF token: %d, want 403", code)
	}
	if st, _ := r.h.Provider().Status(t.Context(), "s0001"); st.State != provider.StateActive {
		t.Fatalf("a refused cancel changed the stream: %+v", st)
	}
	for _, c := range []struct {
		op    string
		code  int
		state provider.State
	}{{"pause", 200, provider.StatePaused}, {"resume", 200, provider.StateActive}, {"cancel", 200, provider.StateCancelled}, {"pause", 409, provider.StateCancelled}, {"explode", 404, provider.StateCancelled}} {
		if code := post(c.op, sess.CSRF); code != c.code {
			t.Errorf("%s: %d, want %d", c.op, code, c.code)
		}
		if st, _ := r.h.Provider().Status(t.Context(), "s0001"); st.State != c.state {
			t.Errorf("after %s: %s, want %s", c.op, st.State, c.state)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.ts.URL+dashboard.PathEvents+"?stream=s0000", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events Content-Type %q", ct)
	}
	buf := make([]byte, 0, 1<<16)
	tmp := make([]byte, 4096)
	for !strings.Contains(string(buf), "event: detail\n") {
		n, err := resp.Body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			t.Fatalf("events: %v after %q", err, buf)
		}
	}
	first, _, _ := strings.Cut(string(buf), "\n\n")
	name, data, _ := strings.Cut(first, "\n")
	if name != "event: snapshot" {
		t.Fatalf("first event %q", name)
	}
	var snap struct {
		Rows []struct {
			ID        string
			State     string
			Processed int64
		}
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Rows) != 2 || snap.Rows[0].ID != "s0000" || snap.Rows[0].Processed != 2 || snap.Rows[1].State != "cancelled" {
		t.Errorf("snapshot rows %+v", snap.Rows)
	}
	// An output of the watched stream arrives as it is published.
	r.deliver(t, "s0000", 1)
	for !strings.Contains(string(buf), "event: output\n") {
		n, err := resp.Body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			t.Fatalf("events: %v, no output event in %q", err, buf)
		}
	}
	if !strings.Contains(string(buf), `"output":{"n":3}`) {
		t.Errorf("output event lacks the output: %s", buf)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestUnrecoverableRow: a stored stream that recovery could not rebuild is
// a row in state "unrecoverable" whose message says why, beside the
// others; the page offers the state as a filter.
func TestUnrecoverableRow(t *testing.T) {
	store := persistence.NewMemStore()
	opts := host.Options{Store: store, Stdout: io.Discard,
		Streams: provider.Options{ManualConnect: true, LookupEnv: func(string) (string, bool) { return "", false }}}
	h1, err := host.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := rtfs.Compile("two.rtfs", []byte(`(defn step [s c m] {:state s})
(call :mcp.stream.start {:endpoint "e" :stream-id "fine" :processor step :initial-state 0})`))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := rtfs.Compile("lost.rtfs", []byte(`(defn step2 [s c m] {:state s})
(call :mcp.stream.start {:endpoint "e" :stream-id "lost" :processor step2 :initial-state 0})`))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*rtfs.Program{prog, lost} {
		if _, err := h1.Run(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}
	var b persistence.Batch
	b.Delete([]byte("prog/" + lost.Hash()))
	if err := store.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	h2, err := host.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if err := h2.Recover(context.Background()); err == nil {
		t.Fatal("Recover reported nothing")
	}
	d, err := dashboard.New(dashboard.Options{Provider: h2.Provider(), Interval: 200 * time.Millisecond, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mux := http.NewServeMux()
	mux.Handle(dashboard.Prefix, d.StaticHandler())
	mux.Handle(dashboard.PathAPI, d.APIHandler())
	ts := httptest.NewServer(mux)
	defer ts.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+dashboard.PathEvents, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf []byte
	tmp := make([]byte, 4096)
	for !strings.Contains(string(buf), "\n\n") {
		n, err := resp.Body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			t.Fatalf("events: %v after %q", err, buf)
		}
	}
	first, _, _ := strings.Cut(string(buf), "\n\n")
	_, data, _ := strings.Cut(first, "\n")
	var snap struct {
		Rows []struct{ ID, State, Message string }
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Rows) != 2 || snap.Rows[0].ID != "fine" || snap.Rows[0].State != "active" ||
		snap.Rows[1].ID != "lost" || snap.Rows[1].State != "unrecoverable" || !strings.Contains(snap.Rows[1].Message, "load program "+lost.Hash()) {
		t.Fatalf("snapshot rows %+v", snap.Rows)
	}
	page, err := http.Get(ts.URL + dashboard.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(html), `<option value="unrecoverable">`) {
		t.Error("the page offers no unrecoverable filter")
	}
}

// TestDetailReadsInspectKeys: every field of a stream's inspect JSON that
// the page's detail view reads (renderDetail in app.js: info, its status
// st, its stats s, its transport) is a key of the inspect shape.
func TestDetailReadsInspectKeys(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("static", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	js := string(src)
	start := strings.Index(js, "function renderDetail(info)")
	if start < 0 {
		t.Fatal("app.js has no renderDetail(info)")
	}
	body := js[start:]
	body = body[:strings.Index(body, "\n  }\n")]
	keys := map[string]bool{}
	for _, k := range provider.InspectKeys() {
		keys[k] = true
	}
	parents := map[string]string{"info": "", "info.transport": "transport.", "st": "status.", "s": "stats."}
	read := regexp.MustCompile(`\b(info\.transport|info|st|s)(?:\.([a-z]+)|\["([a-z-]+)"\])`)
	n := 0
	for _, m := range read.FindAllStringSubmatch(body, -1) {
		key := parents[m[1]] + m[2] + m[3]
		n++
		if !keys[key] {
			t.Errorf("renderDetail reads %s, which is not a key of the inspect shape (provider.StreamInfo)", key)
		}
	}
	if n < 20 {
		t.Errorf("found %d fields read in renderDetail; the pattern no longer matches app.js", n)
	}
}

// TestDeliveryAndProgress: a tab that shows a stream gets its outputs as
// the delivery policy says (the immediate one alone and at once, the low
// ones coalesced by :kind, with their priority and count), and the rows
// carry a stream's progress (fraction, ETA and milestone) and the host's
// circuit breakers.
func TestDeliveryAndProgress(t *testing.T) {
	h, err := host.New(host.Options{
		Streams: provider.Options{ManualConnect: true, LookupEnv: func(string) (string, bool) { return "", false }},
		Stdout:  io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Options{Provider: h.Provider(), Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(d.APIHandler())
	defer func() { d.Close(); ts.Close(); h.Close() }()
	prog, err := rtfs.Compile("p.rtfs", []byte(`
(defn step [state chunk meta]
  (if (:alert chunk)
    {:state state :output {:alert (:alert chunk)} :priority :immediate :milestone :scan}
    {:state state :output {:read (:i chunk)} :priority :low :kind :read}))
(call :mcp.stream.start {:endpoint "p.v1" :stream-id "p" :processor step
                         :milestones [{:id :scan :weight 1 :estimated-ms 60000} {:id :report :weight 3}]})`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := h.Run(ctx, prog); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+dashboard.PathEvents+"?stream=p", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan [2]string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		name := ""
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				name = n
			} else if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- [2]string{name, data}
			}
		}
	}()
	next := func(want string) string {
		t.Helper()
		for ev := range events {
			if ev[0] == want {
				return ev[1]
			}
		}
		t.Fatalf("the events ended before a %q event", want)
		return ""
	}
	next("snapshot")
	deliver := func(data string) {
		if err := h.Provider().Deliver(ctx, "p", transport.Chunk{Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	deliver(`{"i":0}`) // the first low output goes at once; those after it wait a second
	if got := next("output"); !strings.Contains(got, `"output":{"read":0}`) || !strings.Contains(got, `"priority":"low"`) {
		t.Fatalf("first output %s", got)
	}
	for i := 1; i <= 3; i++ {
		deliver(fmt.Sprintf(`{"i":%d}`, i))
	}
	deliver(`{"alert":"x"}`)
	// The alert takes the held reads along, coalesced, then goes alone.
	if got := next("output"); !strings.Contains(got, `"output":{"read":3}`) || !strings.Contains(got, `"count":3`) || !strings.Contains(got, `"kind":"read"`) {
		t.Errorf("the coalesced reads: %s", got)
	}
	if got := next("output"); !strings.Contains(got, `"output":{"alert":"x"}`) || !strings.Contains(got, `"priority":"immediate"`) {
		t.Errorf("the alert: %s", got)
	}
	for {
		var rows struct {
			Rows []struct {
				ID       string
				Progress *float64
				EtaMs    *int64
				Step     string
			}
			Breakers []any
		}
		if err := json.Unmarshal([]byte(next("rows")), &rows); err != nil {
			t.Fatal(err)
		}
		if rows.Breakers == nil {
			t.Fatal("the rows event has no breakers list")
		}
		if len(rows.Rows) == 1 && rows.Rows[0].Progress != nil && *rows.Rows[0].Progress == 0.25 {
			if r := rows.Rows[0]; r.EtaMs == nil || r.Step != "scan" {
				t.Errorf("row %+v", r)
			}
			break
		}
	}
}

// TestFailedStreamPage: a failed stream's page shows its failure (the
// error with the form's position and the held chunk) and Retry and Skip
// buttons; Skip sets the chunk aside, and the page then lists the dead
// letter while the stream goes on.
func TestFailedStreamPage(t *testing.T) {
	exe, err := browser.Find()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 0)
	prog, err := rtfs.Compile("bad.rtfs", []byte(`(defn step [s c m]
  (if (:bad c) (throw "cannot handle this chunk") {:state (inc s) :output {:n (inc s)}}))
(call :mcp.stream.start {:endpoint "e" :stream-id "bad" :processor step :initial-state 0})`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.h.Run(context.Background(), prog); err != nil {
		t.Fatal(err)
	}
	p := r.h.Provider()
	for _, c := range []string{`{"i":1}`, `{"bad":true}`, `{"i":3}`} {
		if err := p.Deliver(context.Background(), "bad", transport.Chunk{Data: []byte(c)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bctx, closeBrowser, err := browser.New(ctx, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBrowser()
	if err := chromedp.Do(bctx,
		chromedp.Navigate(r.ts.URL+dashboard.Prefix+"#/streams/bad"),
		chromedp.WaitVisible(chromedp.CSS(`#detail-failure`)),
	); err != nil {
		t.Fatal(err)
	}
	str := func(a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(bctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	failure := str(chromedp.Text(chromedp.CSS(`#failure-kv`)))
	if !strings.Contains(failure, "processor step failed on chunk 2") || !strings.Contains(failure, "bad.rtfs:2:") ||
		!strings.Contains(failure, "cannot handle this chunk") || !strings.Contains(failure, "#2") {
		t.Fatalf("the failure card says %q", failure)
	}
	skipDisabled := str(chromedp.Evaluate[string](`String(document.getElementById("btn-skip").disabled)`))
	retryHidden := str(chromedp.Evaluate[string](`String(document.getElementById("btn-retry").hidden)`))
	if skipDisabled != "false" || retryHidden != "false" {
		t.Fatalf("skip disabled %s, retry hidden %s", skipDisabled, retryHidden)
	}
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#btn-skip`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail-dead`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#detail-failure`)),
	); err != nil {
		t.Fatal(err)
	}
	if count := str(chromedp.Text(chromedp.CSS(`#dead-count`))); !strings.HasPrefix(count, "1 ") {
		t.Fatalf("dead letters count %q", count)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		in, err := p.Info("bad", provider.InspectOptions{})
		if err == nil && in.Status.State == provider.StateActive && in.Stats.ProcessedChunks == 2 && in.DeadLetters.Count == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Skip: %+v, %v", in.Status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
