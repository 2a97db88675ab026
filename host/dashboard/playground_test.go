package dashboard_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rtfshost/rtfshost/host/dashboard"
	"github.com/rtfshost/rtfshost/internal/browser"
)

const playgroundProgram = `(defn count-words [state chunk]
  (let [n (+ (:words state) (count (:text chunk)))]
    (if (>= n 3)
      {:state {:words n} :action :complete :output {:words n}}
      {:state {:words n} :action :continue :output {:words n}})))

(call :mcp.stream.start {:endpoint "x" :processor count-words :initial-state {:words 0}})
`

// playgroundLink is a playground link whose fragment holds in.
func playgroundLink(base string, in map[string]string) string {
	b, _ := json.Marshal(in)
	return base + dashboard.PathPlaygroundPage + "#v1:" + base64.RawURLEncoding.EncodeToString(b)
}

// TestPlaygroundInBrowser: a shared playground link, opened in headless
// Chromium, runs its program on the server and shows each step's chunk,
// state before and after, action and output, and the stream's end; Step
// shows one step at a time; a failing form is named by line and column and
// highlighted. RTFSHOST_UPDATE_DOCS=1 saves docs/dashboard-playground.png.
func TestPlaygroundInBrowser(t *testing.T) {
	exe, err := browser.Find()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bctx, closeBrowser, err := browser.New(ctx, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBrowser()
	link := playgroundLink(r.ts.URL, map[string]string{
		"program": playgroundProgram, "state": "{:words 0}",
		"chunks": "{\"text\": \"a\"}\n{\"text\": \"bc\"}\n{\"text\": \"never\"}\n",
	})
	if err := chromedp.Do(bctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`#pg-rows tr:nth-child(2)`)),
	); err != nil {
		t.Fatal(err)
	}
	texts := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("`+sel+`")).map(e => e.textContent).join("|")`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := texts("#pg-rows .c-action"); got != "continue|complete" {
		t.Errorf("actions %q", got)
	}
	if got := texts("#pg-rows .c-before"); got != `{"words":0}|{"words":1}` {
		t.Errorf("states before %q", got)
	}
	if got := texts("#pg-rows .c-output"); got != `{"words":1}|{"words":3}` {
		t.Errorf("outputs %q", got)
	}
	if got := texts("#pg-end"); got != `status completed (processor) result {"words":3}` {
		t.Errorf("end %q", got)
	}
	if os.Getenv("RTFSHOST_UPDATE_DOCS") != "" {
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "dashboard-playground.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Step: one row per click.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("pg-chunks").dispatchEvent(new Event("input"))`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#pg-step")), chromedp.WaitVisible(chromedp.CSS(`#pg-rows tr:nth-child(1)`))); err != nil {
		t.Fatal(err)
	}
	if got := texts("#pg-end"); got != "1 of 2 steps" {
		t.Errorf("after one step: %q", got)
	}
	// A processor that fails: its form's line and column, highlighted.
	link = playgroundLink(r.ts.URL, map[string]string{
		"program": "(defn p [s c]\n  (/ 1 (:n c)))", "processor": "p", "chunks": `{"n": 0}`,
	})
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank"), chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`#pg-hl`))); err != nil {
		t.Fatal(err)
	}
	if got := texts("#pg-error"); !strings.HasPrefix(got, "2:3: processor p failed on chunk 1: playground.rtfs:2:3: /: divide by zero") {
		t.Errorf("error %q", got)
	}
	if got := texts("#pg-hl"); !strings.Contains(got, "2 |   (/ 1 (:n c)))") {
		t.Errorf("highlighted %q", got)
	}
}

// TestPlaygroundAPI: a run needs the CSRF token; a program that does not
// compile answers its error at its line and column; a run past the
// budgets stops with a message naming the budget.
func TestPlaygroundAPI(t *testing.T) {
	r := newRig(t, 0)
	post := func(csrf string, body map[string]string) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+dashboard.PathPlayground, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, out
	}
	if code, _ := post("wrong", map[string]string{"program": "1"}); code != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d", code)
	}
	res, err := http.Get(r.ts.URL + dashboard.PathSession)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]string
	json.NewDecoder(res.Body).Decode(&s)
	res.Body.Close()
	code, out := post(s["csrf"], map[string]string{"program": "(defn p [s c]\n  (undefined-thing c))", "processor": "p"})
	if code != http.StatusOK || out["line"] != 2.0 || out["col"] != 4.0 || !strings.Contains(out["error"].(string), "undefined symbol undefined-thing") {
		t.Errorf("compile error: %d %v", code, out)
	}
	code, out = post(s["csrf"], map[string]string{"program": "(defn p [s c] (loop [] (recur)))", "processor": "p", "chunks": "1"})
	steps, _ := out["steps"].([]any)
	if code != http.StatusOK || out["status"] != "failed" || len(steps) != 1 || !strings.Contains(out["message"].(string), "steps") {
		t.Errorf("a processor past its budget: %d %v", code, out)
	}
}

// TestPlaygroundRecordings: the playground lists the recordings of its
// directory and runs a processor over one, decoded as a stream decodes
// it (an MCP progress chunk's :message included); a name that leaves the
// directory is refused.
func TestPlaygroundRecordings(t *testing.T) {
	dir := t.TempDir()
	rec := `{"seq":1,"id":"a","event":"progress","received-at-ms":5,"data":{"progress":1,"message":"{\"n\":7}"}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "p.ndjson"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Options{Provider: newRig(t, 0).h.Provider(), RecordingsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ts := httptest.NewServer(d.APIHandler())
	defer ts.Close()
	res, err := http.Get(ts.URL + dashboard.PathRecordings)
	if err != nil {
		t.Fatal(err)
	}
	var list map[string][]string
	json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if len(list["recordings"]) != 1 || list["recordings"][0] != "p.ndjson" {
		t.Fatalf("recordings %v", list)
	}
	res, _ = http.Get(ts.URL + dashboard.PathSession)
	var s map[string]string
	json.NewDecoder(res.Body).Decode(&s)
	res.Body.Close()
	run := func(name string) map[string]any {
		b, _ := json.Marshal(map[string]string{"program": "(defn p [s c m] {:state [(:event m) (get-in c [:message :n])]})", "processor": "p", "recording": name})
		req, _ := http.NewRequest(http.MethodPost, ts.URL+dashboard.PathPlayground, bytes.NewReader(b))
		req.Header.Set("X-CSRF-Token", s["csrf"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return out
	}
	out := run("p.ndjson")
	steps, _ := out["steps"].([]any)
	if len(steps) != 1 || fmt.Sprint(steps[0].(map[string]any)["state"]) != "[progress 7]" {
		t.Errorf("run over p.ndjson: %v", out)
	}
	if out := run("../p.ndjson"); !strings.Contains(fmt.Sprint(out["error"]), "give the name of a .ndjson file") {
		t.Errorf("a name outside the directory: %v", out)
	}
}
