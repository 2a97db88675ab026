package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testRecordReplay: for each kind of transport, a run with --record
// writes the chunks its stream received, and a :replay of that recording
// through the same processor gives the same outputs, in the same order,
// and the same result; so does rtfshost test's run-processor over it.
// The processor puts each chunk and its metadata's event and fd in its
// output, so equal outputs mean equal chunks as the processor got them.
func (c *cli) testRecordReplay(t *testing.T) {
	t.Parallel()
	mcpURL := strings.TrimSuffix(c.serverURL, "/sse") + "/mcp"
	kinds := []struct{ name, keys string }{
		{"sse", `:endpoint "counter.v1" :config {:limit 6 :interval_ms 0}`},
		{"mcp", fmt.Sprintf(`:endpoint "news.digest.v1" :transport :mcp :server-url %q :config {:limit 3 :interval_ms 0}`, mcpURL)},
		{"mcp-sse", fmt.Sprintf(`:endpoint "news.digest.v1" :transport :mcp-sse :server-url %q :config {:limit 3 :interval_ms 0}`, strings.TrimSuffix(c.serverURL, "/sse")+"/mcp-sse")},
		{"stdio", fmt.Sprintf(`:endpoint "news.digest.v1" :transport :stdio :command %q :args ["localserver" "--stdio"] :config {:limit 3 :interval_ms 0}`, c.bin)},
		{"exec", `:transport :exec :command "sh" :args ["-c" "printf '{\"n\":1}\nplain\n{\"n\":3}\n'; echo oops >&2"]`},
	}
	const processor = `
(defn keep [state chunk meta]
  {:state (inc state)
   :output {:n state :event (:event meta) :fd (:fd meta) :chunk chunk}})
`
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			live := filepath.Join(dir, "live.rtfs")
			src := processor + fmt.Sprintf("(def s (call :mcp.stream.start {%s :stream-id \"rec\" :processor keep :initial-state 0}))\n(call :mcp.stream.await {:stream-id \"rec\"})\n", k.keys)
			if err := os.WriteFile(live, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			rec := filepath.Join(dir, "rec")
			r := c.runIn(t, dir, "run", "--json", "--server-url", c.serverURL, "--data", filepath.Join(dir, "d1"), "--record", rec, live)
			wantCode(t, r, exitOK)
			liveOut, liveResult := outputsOf(t, r)
			recording := filepath.Join(rec, "rec.ndjson")
			if len(liveOut) == 0 {
				t.Fatalf("the live run made no output\n%s", r)
			}
			replayed := filepath.Join(dir, "replay.rtfs")
			src = processor + fmt.Sprintf("(def s (call :mcp.stream.start {:transport :replay :file %q :stream-id \"rec\" :processor keep :initial-state 0}))\n(call :mcp.stream.await {:stream-id \"rec\"})\n", recording)
			if err := os.WriteFile(replayed, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			r = c.runIn(t, dir, "run", "--json", "--data", filepath.Join(dir, "d2"), replayed)
			wantCode(t, r, exitOK)
			replayOut, replayResult := outputsOf(t, r)
			if strings.Join(replayOut, "\n") != strings.Join(liveOut, "\n") || replayResult != liveResult {
				t.Errorf("the replay differs from the live run\nlive:\n%s\nresult %s\nreplay:\n%s\nresult %s",
					strings.Join(liveOut, "\n"), liveResult, strings.Join(replayOut, "\n"), replayResult)
			}
			// The same recording through run-processor: the same
			// outputs (compared as JSON, as the run printed them).
			test := filepath.Join(dir, "rec_test.rtfs")
			src = processor + fmt.Sprintf(`(deftest same
  (let [run (run-processor keep 0 %q)]
    (is (= :completed (:status run)))
    (is (= (parse-json %q) (parse-json (to-json (vec (map :output (:steps run)))))))))
`, recording, "["+strings.Join(liveOut, ",")+"]")
			if err := os.WriteFile(test, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			r = c.runIn(t, dir, "test", test)
			if r.code != exitOK || r.stdout != "1 passed, 0 failed\n" {
				t.Errorf("run-processor over the recording:\n%s", r)
			}
		})
	}
}

// outputsOf returns the outputs of a run --json, as JSON, and its result.
func outputsOf(t *testing.T, r result) ([]string, string) {
	t.Helper()
	var outs []string
	var res string
	for _, l := range parseJSONLines(t, r) {
		switch l.Type {
		case "output":
			outs = append(outs, string(l.Output))
		case "result":
			var v any
			if err := json.Unmarshal(l.Value, &v); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(v)
			res = string(b)
		}
	}
	return outs, res
}
