package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	program := `(defn step [state chunk meta]
  (let [n (:n (:chunk chunk))]
    (if (= n (:fail-at state)) (throw "sensor offline")
      {:state (assoc state :count (inc (:count state)) :last (:chunk chunk)) :output {:n n :count (inc (:count state))}})))`
	for _, s := range []struct {
		id       string
		interval int
		limit    int
		failAt   int
	}{
		{"alpha", 40, 1000000, 0}, {"beta", 40, 1000000, 0}, {"gamma", 25, 1000000, 0},
		{"short", 10, 30, 0}, {"faulty", 30, 1000000, 25},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp.stream.start", Arguments: map[string]any{
			"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse",
			"stream-id": s.id, "detach": true, "initial-state": map[string]any{"count": 0, "fail-at": s.failAt},
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
	run("open the dashboard and enter the token",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token-input")),
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
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="faulty"] .badge.st-error`)))
	screenshot(t, bctx, filepath.Join(artifacts, "dashboard-list.png"))

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
	screenshot(t, bctx, filepath.Join(artifacts, "dashboard-stream.png"))
	run("cancel beta",
		chromedp.Click(chromedp.CSS("#btn-cancel")),
		chromedp.WaitVisible(chromedp.CSS(`#detail-state[data-state="cancelled"]`)),
	)
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
	t.Logf("screenshots in %s", artifacts)
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
