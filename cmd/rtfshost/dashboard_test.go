package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rtfshost/rtfshost/internal/browser"
	"github.com/rtfshost/rtfshost/internal/localserver"
)

// TestDashboardInBrowser drives headless Chromium against `rtfshost serve`
// (a child process, with a bearer token) while three streams of the
// reference server run: the token is entered once in the page; the table
// lists the streams and their processed counts rise while they run; a
// stream's page shows its state and its outputs as they arrive; its Cancel
// button ends it (the MCP status says cancelled by request) and the table
// says so. It saves screenshots as test artifacts
// ($RTFSHOST_TEST_ARTIFACTS, else the test's temporary directory).
func TestDashboardInBrowser(t *testing.T) {
	exe, err := browser.Find()
	if err != nil {
		t.Fatal(err) // no browser fails the test, never skips it
	}
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const token = "dashboard-test-token-0123456789"
	mcpURL, stop := startServeChild(t, token, "serve", "--listen", "127.0.0.1:0", "--server-url", src.URL()+"/sse")
	defer stop()
	base := strings.TrimSuffix(mcpURL, "/mcp")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := mcpSession(ctx, t, mcpURL, token)
	// A stream given a total reports its progress (the list shows its bar,
	// percentage and ETA).
	program := `(defn step [state chunk meta]
  (let [n (:n (:chunk chunk))]
    (if (= n (:fail-at state)) (throw "sensor offline")
      (cond-> {:state (assoc state :count (inc (:count state)) :last (:chunk chunk)) :output {:n n :count (inc (:count state))}}
        (pos? (:total state)) (assoc :progress {:done n :total (:total state)})))))`
	for _, s := range []struct {
		id       string
		interval int
		limit    int
		failAt   int
		total    int
	}{
		{"alpha", 40, 1000000, 0, 20000}, {"beta", 40, 1000000, 0, 0}, {"gamma", 25, 1000000, 0, 0},
		{"short", 10, 30, 0, 30}, {"faulty", 30, 1000000, 25, 0},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp.stream.start", Arguments: map[string]any{
			"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse",
			"stream-id": s.id, "detach": true, "initial-state": map[string]any{"count": 0, "fail-at": s.failAt, "total": s.total},
			"config": map[string]any{"limit": s.limit, "interval_ms": s.interval},
		}})
		if err != nil || res.IsError {
			t.Fatalf("start %s: %v %+v", s.id, err, res)
		}
	}

	// /metrics on serve: behind the token, with the streams' counters.
	if code := httpStatus(t, base+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", code)
	}

	bctx, closeBrowser, err := browser.New(ctx, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBrowser()
	artifacts := os.Getenv("RTFSHOST_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return v
	}
	run("open the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token-input")))
	// Until the first snapshot arrives the page says it is loading, not
	// that there are no streams.
	if eval(`document.getElementById("empty").hidden && !document.getElementById("loading").hidden`) != true {
		t.Error(`the page says "No streams yet" (or not "Loading") before its first snapshot`)
	}
	run("enter the token",
		chromedp.SendKeys(chromedp.CSS("#token-input"), token),
		chromedp.Click(chromedp.CSS("#token-submit")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="alpha"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="beta"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="gamma"]`)),
	)
	first := processed(t, bctx, "alpha")
	waitUntil(t, bctx, "alpha's processed count to rise", func() bool { return processed(t, bctx, "alpha") > first })
	if conn := text("#conn-text"); conn != "live" {
		t.Errorf("connection state %q, want live", conn)
	}
	if eval(`sessionStorage.getItem("rtfshost.token")`) != token {
		t.Error("the token is not kept in the tab's session storage")
	}
	// Keyboard: "/" focuses the filter; typing filters the rows.
	run("filter with the keyboard", chromedp.KeyEvent("/"))
	if focused := eval(`document.activeElement.id`); focused != "filter" {
		t.Errorf(`"/" focused %q, want the filter`, focused)
	}
	run("type a filter", chromedp.SendKeys(chromedp.CSS("#filter"), "gam"), chromedp.WaitNotPresent(chromedp.CSS(`tr[data-id="alpha"]`)))
	eval(`(() => { const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input")); f.blur(); return true })()`)
	run("clear the filter", chromedp.WaitVisible(chromedp.CSS(`tr[data-id="alpha"]`)))
	if d, err := time.ParseDuration(os.Getenv("RTFSHOST_SCREENSHOT_DELAY")); err == nil {
		time.Sleep(d) // to regenerate docs/dashboard.png with longer sparklines
	}
	run("see the ended streams", chromedp.WaitVisible(chromedp.CSS(`tr[data-id="short"] .badge.st-completed`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="faulty"] .badge.st-failed`)))
	if eval(`document.getElementById("loading").hidden && document.getElementById("empty").hidden`) != true {
		t.Error("with streams shown, the page still says it is loading, or that there are none")
	}
	// A failed stream shows its error in the table, not only "error".
	if out := text(`tr[data-id="faulty"] .c-output`); !strings.Contains(out, "sensor offline") || !strings.Contains(out, "failed on chunk 25") {
		t.Errorf("faulty's row shows %q, want its error message", out)
	}
	// An ended stream shows its average rate, and its age stops at its end.
	if rate := text(`tr[data-id="short"] .c-rate`); !regexp.MustCompile(`^[1-9][0-9.,]*/s avg$`).MatchString(rate) {
		t.Errorf("short's rate after its end is %q, want its average", rate)
	}
	ageOf := func() string { return text(`tr[data-id="short"] .c-age`) }
	age := ageOf()
	time.Sleep(2200 * time.Millisecond)
	if later := ageOf(); later != age {
		t.Errorf("short's age went on after its end: %s, then %s", age, later)
	}
	// The sparklines stay in one column whatever width the rates' texts have.
	lefts, _ := eval(`[...document.querySelectorAll("#rows .c-trend svg")].map(s => Math.round(s.getBoundingClientRect().left * 10) / 10)`).([]any)
	if len(lefts) < 5 {
		t.Fatalf("%d sparklines", len(lefts))
	}
	for _, l := range lefts {
		if l != lefts[0] {
			t.Errorf("the sparklines do not line up: %v (rates %v)", lefts, eval(`[...document.querySelectorAll("#rows .c-rate")].map(v => v.textContent)`))
			break
		}
	}
	// The rate's number has a header of its own, and the trend its own.
	if heads := eval(`[...document.querySelectorAll("#streams th")].map(th => th.textContent).join("|")`); heads != "Stream|State|Rate|Trend|Processed|Queue|Reconn.|Last output|Age|End reason" {
		t.Errorf("the table's headers are %q", heads)
	}
	waitUntil(t, bctx, "alpha's ETA", func() bool {
		return strings.Contains(text(`tr[data-id="short"] .progress .pv`)+text(`tr[data-id="alpha"] .progress .pv`), "eta")
	})
	if pv := text(`tr[data-id="short"] .progress .pv`); pv != "100%" {
		t.Errorf("short ended at %q, want 100%% with no ETA", pv)
	}
	// At the sizes people use, no cell's text overflows its cell (the last
	// output is cut with an ellipsis, its whole text in the cell's title),
	// and the table fits its frame.
	for _, size := range [][2]int64{{1400, 900}, {1024, 768}} {
		run(fmt.Sprintf("resize to %dx%d", size[0], size[1]), chromedp.EmulateViewport(size[0], size[1]))
		time.Sleep(300 * time.Millisecond) // two of the page's refreshes
		over := eval(`[...document.querySelectorAll("#rows td")].filter(td => td.offsetParent !== null &&
			!td.classList.contains("c-output") && td.scrollWidth > td.clientWidth + 1)
			.map(td => td.closest("tr").dataset.id + " column " + (td.cellIndex + 1) + " (" + td.className + "): " + td.textContent.trim())`)
		if list, _ := over.([]any); len(list) > 0 {
			t.Errorf("at %dx%d these cells overflow: %v", size[0], size[1], list)
		}
		if wide := eval(`(() => { const t = document.getElementById("streams"); return t.scrollWidth > t.parentElement.clientWidth + 1 })()`); wide != false {
			t.Errorf("at %dx%d the table is wider than its frame", size[0], size[1])
		}
		if eta := text(`tr[data-id="alpha"] .progress .pv`); !strings.Contains(eta, "eta") {
			t.Errorf("at %dx%d alpha's progress reads %q, want its ETA", size[0], size[1], eta)
		}
		screenshot(t, bctx, filepath.Join(artifacts, fmt.Sprintf("dashboard-list-%dx%d.png", size[0], size[1])))
	}
	run("back to 1400x900", chromedp.EmulateViewport(1400, 900))
	screenshot(t, bctx, filepath.Join(artifacts, "dashboard-list.png"))
	updateDocScreenshot(t, bctx, "dashboard.png")

	// A stream's page: its state, outputs arriving, Cancel.
	run("open beta's page",
		chromedp.Click(chromedp.CSS(`tr[data-id="beta"] a.sid`)),
		chromedp.WaitVisible(chromedp.CSS("#view-detail")),
		chromedp.WaitVisible(chromedp.CSS(`#detail-state[data-state="active"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#state-tree .k`)),
		chromedp.WaitVisible(chromedp.CSS(`#outputs li`)),
	)
	stateText := text("#state-tree")
	if !strings.Contains(stateText, "count") || !strings.Contains(stateText, "last") {
		t.Errorf("the state tree shows %q, want the state's keys", stateText)
	}
	waitUntil(t, bctx, "more outputs to arrive", func() bool {
		n, _ := eval(`document.querySelectorAll("#outputs li").length`).(float64)
		return n >= 3
	})
	run("pause and resume beta",
		chromedp.Click(chromedp.CSS("#btn-pause")),
		chromedp.WaitVisible(chromedp.CSS(`#detail-state[data-state="paused"]`)),
		chromedp.Click(chromedp.CSS("#btn-resume")),
		chromedp.WaitVisible(chromedp.CSS(`#detail-state[data-state="active"]`)),
	)
	screenshot(t, bctx, filepath.Join(artifacts, "dashboard-stream.png"))
	updateDocScreenshot(t, bctx, "dashboard-stream.png")
	run("cancel beta",
		chromedp.Click(chromedp.CSS("#btn-cancel")),
		chromedp.WaitVisible(chromedp.CSS(`#detail-state[data-state="cancelled"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-kind="end"]`)),
	)
	// The stream's page has a timeline of its events, with their times.
	var events []string
	for _, li := range eval(`[...document.querySelectorAll("#timeline li")].reverse().map(li => li.dataset.kind + " " + li.querySelector(".what").textContent + " @" + li.querySelector(".at").textContent)`).([]any) {
		events = append(events, li.(string))
	}
	wantEvents := []string{"start ", "pause by request", "resume by request", "cancel by request", "end cancelled (request)"}
	if len(events) != len(wantEvents) {
		t.Errorf("beta's timeline %q, want %q", events, wantEvents)
	} else {
		for i, ev := range events {
			if !strings.HasPrefix(ev, wantEvents[i]+" @") || !regexp.MustCompile(`@\d\d:\d\d:\d\d\.\d{3}$`).MatchString(ev) {
				t.Errorf("timeline event %d is %q, want %q with its time", i, ev, wantEvents[i])
			}
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp.stream.status", Arguments: map[string]any{"stream-id": "beta"}})
	if err != nil || res.IsError {
		t.Fatalf("status: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"state":"cancelled"`) || !strings.Contains(text, `"end-reason":"request"`) {
		t.Errorf("beta after Cancel: %s", text)
	}
	run("back to the list",
		chromedp.Click(chromedp.CSS("#back")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="beta"] .badge.st-cancelled`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="alpha"] .badge.st-active`)),
	)

	// /metrics counts the directives applied: the buttons' three requests;
	// the processors, which name no action, none (no "none" series).
	directives := scrapeDirectives(t, base+"/metrics", token)
	if want := map[string]float64{"pause/request": 1, "resume/request": 1, "cancel/request": 1}; !maps.Equal(directives, want) {
		t.Errorf("rtfshost_directives_total %v, want %v", directives, want)
	}
	t.Logf("screenshots in %s", artifacts)
}

// scrapeDirectives reads rtfshost_directives_total from /metrics, by
// "action/source", leaving out series at zero.
func scrapeDirectives(t *testing.T, url, token string) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, m := range fams["rtfshost_directives_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := m.GetCounter().GetValue(); v != 0 {
			out[l["action"]+"/"+l["source"]] = v
		}
	}
	return out
}

// mcpSession connects a go-sdk client to serve with the bearer token.
func mcpSession(ctx context.Context, t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "dashboard-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func httpStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// processed reads a row's processed count from the table.
func processed(t *testing.T, ctx context.Context, id string) int {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-id="`+id+`"] .c-processed`)))
	if err != nil {
		t.Fatalf("read %s's processed count: %v", id, err)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatalf("%s's processed count %q: %v", id, s, err)
	}
	return n
}

// waitUntil polls cond (the test's side, not the page's) until it holds.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// updateDocScreenshot saves the viewport as docs/NAME when
// RTFSHOST_UPDATE_DOCS is set: the documentation's screenshots are this
// test's.
func updateDocScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("RTFSHOST_UPDATE_DOCS") != "" {
		screenshot(t, ctx, filepath.Join("..", "..", "docs", name))
	}
}

// screenshot saves the viewport as a PNG.
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
