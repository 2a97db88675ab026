package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/replay"
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

// testReplayResume: a :replay stream killed in the middle resumes exactly:
// rtfshost resume goes on after the last committed chunk, so every chunk
// of the recording is summed once.
func (c *cli) testReplayResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 200
	var b bytes.Buffer
	w := replay.NewWriter(&b)
	for i := 1; i <= n; i++ {
		if err := w.Write(int64(i), transport.Chunk{Data: []byte(fmt.Sprintf(`{"chunk":{"n":%d}}`, i)), ID: strconv.Itoa(i), ReceivedAt: time.UnixMilli(int64(i))}); err != nil {
			t.Fatal(err)
		}
	}
	rec := filepath.Join(dir, "sum.ndjson")
	if err := os.WriteFile(rec, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(c.testdata, "slow_sum.rtfs"))
	if err != nil {
		t.Fatal(err)
	}
	const live = `{:endpoint "counter.v1"
     :config {:limit limit :interval_ms 10}`
	if !strings.Contains(string(src), live) {
		t.Fatalf("slow_sum.rtfs no longer starts its stream with %q", live)
	}
	prog := filepath.Join(dir, "replay_sum.rtfs")
	replayed := strings.Replace(string(src), live, fmt.Sprintf(`{:transport :replay :file %q :interval-ms 10`, rec), 1)
	if err := os.WriteFile(prog, []byte(replayed), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	s := c.start(t, dir, "run", "--json", "--data", data, prog)
	for {
		var o outLine
		if err := json.Unmarshal([]byte(s.waitForOutput(t)), &o); err != nil {
			t.Fatal(err)
		}
		if *o.Seq >= 30 {
			break
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := s.wait(t)
	checkSums(t, killed, parseJSONLines(t, killed))
	r := c.run(t, "resume", "--json", "--data", data)
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	checkSums(t, r, lines)
	if !strings.Contains(r.stdout, `"state":"completed","end-reason":"processor","result":{"sum":20100,"chunks":200}`) {
		t.Errorf("the resumed replay does not end with every chunk summed once\n%s", r)
	}
}
