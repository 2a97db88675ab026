package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The processors of the upgrade tests: both log which of them handled each
// chunk of counter.v1 ({:chunk {:n n}}); the old one adds n, the new one
// 10 × n, and both complete the stream at chunk limit.
const (
	oldLogged = `
(def limit 60)
(defn step [state chunk meta]
  (let [n (get-in chunk [:chunk :n])
        st {:sum (+ (:sum state) n) :log (conj (:log state) [:old n])}]
    {:state st :action (if (= n limit) :complete :continue)}))
`
	newLogged = `
(def limit 60)
(defn step [state chunk meta]
  (let [n (get-in chunk [:chunk :n])
        st {:sum (+ (:sum state) (* 10 n)) :log (conj (:log state) [:new n])}]
    {:state st :action (if (= n limit) :complete :continue)}))
`
)

// startLogged runs, on a durable host in dir, a program that starts stream
// id (counter.v1 of server, chunk every interval ms) with oldLogged's
// processor, waits until it has processed after chunks, and returns the host.
func startLogged(t *testing.T, dir, server, id string, after int) *host.Host {
	t.Helper()
	h, err := host.Open(host.OpenOptions{DataDir: dir, Options: host.Options{Stdout: &bytes.Buffer{},
		Streams: provider.Options{ServerURL: server, LookupEnv: func(string) (string, bool) { return "", false }}}})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := rtfs.Compile("old.rtfs", []byte(oldLogged+fmt.Sprintf(`
(call :mcp.stream.start {:endpoint "counter.v1" :stream-id %q :config {:limit limit :interval_ms 5}
                         :processor step :initial-state {:sum 0 :log []}})`, id)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(context.Background(), prog); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, h.Provider(), id, after)
	return h
}

func waitProcessed(t *testing.T, p *provider.Provider, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		in, err := p.Info(id, provider.InspectOptions{})
		if err == nil && in.Stats.ProcessedChunks >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s did not process %d chunks: %+v %v", id, n, in, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cliRun runs the command line in this process.
func cliRun(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = newApp(strings.NewReader(""), &out, &errOut).execute(context.Background(), args)
	return code, out.String(), errOut.String()
}

// wantLog checks a logged state: chunks 1..k by the old processor,
// k+1..last by the new one, each once, in order.
func wantLog(t *testing.T, state any, k, last int) {
	t.Helper()
	var log []any
	sum := 0
	for n := 1; n <= last; n++ {
		who := "old"
		if n > k {
			who, sum = "new", sum+10*n
		} else {
			sum += n
		}
		log = append(log, []any{who, float64(n)})
	}
	want, _ := json.Marshal(map[string]any{"sum": sum, "log": log})
	got, _ := json.Marshal(state)
	var a, b any
	_ = json.Unmarshal(want, &a)
	_ = json.Unmarshal(got, &b)
	if !jsonEqual(a, b) {
		t.Fatalf("state %s\nwant  %s", got, want)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// inspectStream returns one stream's inspect map from the data directory.
func inspectStream(t *testing.T, data, id string) map[string]any {
	t.Helper()
	code, out, errOut := cliRun("inspect", "--data", data, "--stream", id, "--json")
	if code != exitOK {
		t.Fatalf("inspect: exit %d\n%s", code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// upgrade on a data directory: a paused stream gets the new processor; the
// chunks it processed keep the old one's effect, resume gives the next ones
// the new one's; inspect lists both programs; a swap that fails changes
// nothing.
func TestUpgradeOnDataDirectory(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	h := startLogged(t, data, srv.URL()+"/sse", "up", 10)
	if _, err := h.Provider().Pause(t.Context(), "up"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a chunk being processed when the pause came
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	mid := inspectStream(t, data, "up")
	k := int(mid["stats"].(map[string]any)["processed-chunks"].(float64))

	bad := filepath.Join(dir, "bad.rtfs")
	must(t, os.WriteFile(bad, []byte("(defn other [s c] {:state s})"), 0o600))
	before := dumpDir(t, data)
	code, _, errOut := cliRun("upgrade", "up", "--program", bad, "--data", data)
	if code != exitStreamFailed || !strings.Contains(errOut, `no function named "step" is defined in `+bad) {
		t.Fatalf("upgrade to a program without the processor: exit %d\n%s", code, errOut)
	}
	code, out, errOut := cliRun("upgrade", "up", "--program", bad, "--data", data, "--json")
	if code != exitStreamFailed || errOut != "" || !strings.HasPrefix(out, `{"type":"error","stream":"up","message":"`) ||
		!strings.Contains(out, `no function named \"step\" is defined in `) || strings.Count(out, "\n") != 1 {
		t.Fatalf("upgrade --json to a program without the processor: exit %d\n%s%s", code, out, errOut)
	}
	if dumpDir(t, data) != before {
		t.Fatal("a refused upgrade changed the data directory")
	}

	good := filepath.Join(dir, "new.rtfs")
	must(t, os.WriteFile(good, []byte(newLogged), 0o600))
	code, out, errOut = cliRun("upgrade", "up", "--program", good, "--data", data)
	if code != exitOK || !strings.Contains(out, "up: step of "+good) || !strings.Contains(out, "replaces step of old.rtfs") ||
		!strings.Contains(out, "state kept, stream paused") {
		t.Fatalf("upgrade: exit %d\n%s%s", code, out, errOut)
	}
	progs := inspectStream(t, data, "up")["programs"].([]any)
	if len(progs) != 2 || progs[0].(map[string]any)["file"] != "old.rtfs" || progs[1].(map[string]any)["file"] != good {
		t.Fatalf(":programs = %v", progs)
	}
	code, out, errOut = cliRun("resume", "up", "--data", data, "--json")
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	end := inspectStream(t, data, "up")
	if end["status"].(map[string]any)["state"] != "completed" {
		t.Fatalf("after resume: %v", end["status"])
	}
	wantLog(t, end["current-state"], k, 60)
}

// dumpDir is what the store in dir holds, for comparisons.
func dumpDir(t *testing.T, dir string) string {
	t.Helper()
	st, err := persistence.OpenBadger(dir, persistence.Options{GCInterval: -1, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b strings.Builder
	must(t, st.Scan(context.Background(), nil, func(k, v []byte) error {
		fmt.Fprintf(&b, "%q=%q\n", k, v)
		return nil
	}))
	return b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A stream that cannot be recovered does not hold the others back: inspect
// and streams list it as unrecoverable with the reason; resume runs the
// others to their end, then names it and exits 1.
func TestUnrecoverableStreamListed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	data := filepath.Join(t.TempDir(), "data")
	h := startLogged(t, data, srv.URL()+"/sse", "good", 3)
	prog, err := rtfs.Compile("lost.rtfs", []byte(`(defn p [s c m] {:state s})
(call :mcp.stream.start {:endpoint "counter.v1" :stream-id "lost" :config {:limit 1000 :interval_ms 50} :processor p :initial-state 0})`))
	must(t, err)
	if _, err := h.Run(context.Background(), prog); err != nil {
		t.Fatal(err)
	}
	must(t, h.Close())
	// The program of "lost" disappears from the store.
	st, err := persistence.OpenBadger(data, persistence.Options{GCInterval: -1, MinFreeBytes: -1})
	must(t, err)
	var b persistence.Batch
	must(t, st.Scan(context.Background(), []byte("prog/"+prog.Hash()), func(k, _ []byte) error {
		b.Delete(append([]byte(nil), k...))
		return nil
	}))
	must(t, st.Commit(context.Background(), &b))
	must(t, st.Close())

	code, out, errOut := cliRun("streams", "--data", data)
	if code != exitStreamFailed || !strings.Contains(out, "good  ") || !regexp.MustCompile(`lost\s+unrecoverable\s.*load program`).MatchString(out) ||
		!strings.Contains(out, "lost is unrecoverable: load program "+prog.Hash()+": ") || !strings.Contains(out, "rtfshost upgrade lost --program FILE") {
		t.Fatalf("streams: exit %d\n%s%s", code, out, errOut)
	}
	lost := inspectStream2(t, data, "lost")
	if st := lost["status"].(map[string]any); st["state"] != "unrecoverable" || !strings.Contains(st["message"].(string), "load program") {
		t.Fatalf("inspect of the lost stream: %v", st)
	}
	code, out, errOut = cliRun("resume", "--data", data, "--json")
	if code != exitStreamFailed || !strings.Contains(out, `{"type":"error","message":"not recovered (the others ran): `) || !strings.Contains(out, `recover stream \"lost\"`) {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	if st := inspectStream2(t, data, "good")["status"].(map[string]any); st["state"] != "completed" {
		t.Fatalf("the good stream after resume: %v", st)
	}
	// A new processor makes it recoverable again, its state kept.
	fixed := filepath.Join(t.TempDir(), "fixed.rtfs")
	must(t, os.WriteFile(fixed, []byte(`(defn p [s c m] {:state (inc s)})`), 0o600))
	code, out, errOut = cliRun("upgrade", "lost", "--program", fixed, "--data", data, "--json")
	if code != exitOK {
		t.Fatalf("upgrade of the unrecoverable stream: exit %d\n%s%s", code, out, errOut)
	}
	up := upgradedLine(t, out, "lost")
	if up.State != "interrupted" || up.To.File != fixed || up.To.Processor != "p" || up.From == nil || up.From.File != "lost.rtfs" ||
		up.From.Hash != prog.Hash() || up.To.Hash == "" || up.To.Compiler != rtfs.CompileVersion() ||
		up.Message != "p of "+fixed+" ("+up.To.Hash[:12]+") replaces p of lost.rtfs ("+prog.Hash()[:12]+"); state kept, stream interrupted" {
		t.Fatalf("upgrade --json: %s", out)
	}
	// Unfinished in a directory nothing runs: interrupted, which resume carries on.
	if st := inspectStream(t, data, "lost")["status"].(map[string]any); st["state"] != "interrupted" {
		t.Fatalf("the upgraded stream: %v", st)
	}
}

// upgradedLine decodes upgrade --json's output, one "upgraded" line for
// stream id.
func upgradedLine(t *testing.T, out, id string) jsonLine {
	t.Helper()
	var l jsonLine
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil || strings.Count(out, "\n") != 1 || l.Type != "upgraded" || l.Stream != id || l.To == nil {
		t.Fatalf("upgrade --json printed %q (%v), not one upgraded line for %s", out, err, id)
	}
	return l
}

// inspectStream2 is inspectStream for a data directory with an
// unrecoverable stream (inspect exits 1 and shows the rest).
func inspectStream2(t *testing.T, data, id string) map[string]any {
	t.Helper()
	code, out, errOut := cliRun("inspect", "--data", data, "--stream", id, "--json")
	// The stream's inspect map, then (--json) an error line on stdout.
	first, rest, _ := strings.Cut(out, "\n")
	if code != exitStreamFailed || !strings.Contains(rest, `{"type":"error","message":"some streams could not be loaded`) {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(first), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return m
}

// upgrade --server: a running serve swaps its live stream's processor
// between two chunks (mcp.stream.upgrade); the stream goes on in the state
// it had, with the new processor; a failing swap changes nothing.
func TestUpgradeLiveServer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after liveServe's cleanup
	ctx, h, source, base := liveServe(t, persistence.NewMemStore())
	send := func(n int) {
		t.Helper()
		src := source.Source("live-1")
		<-src.Started()
		for i := 0; i < n; i++ {
			must(t, src.SendJSON(ctx, "chunk", map[string]int{"i": i}))
		}
	}
	state := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			in, err := h.Provider().Info("live-1", provider.InspectOptions{})
			if err == nil && in.CurrentState.V == rtfs.Int(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("state %v, want %d (%v)", in.CurrentState, want, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	send(3)
	state(3)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "by-ten.rtfs"), filepath.Join(dir, "bad.rtfs")
	must(t, os.WriteFile(good, []byte(`(defn count-chunks [n chunk meta] {:state (+ n 10)})`), 0o600))
	must(t, os.WriteFile(bad, []byte(`(call :ccos.io.log "no") (defn count-chunks [n c m] {:state n})`), 0o600))
	code, out, errOut := cliRun("upgrade", "--server", base, "live-1", "--program", bad)
	if code != exitStreamFailed || !strings.Contains(errOut, "may only define it") {
		t.Fatalf("upgrade to a program with a host call: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cliRun("upgrade", "--server", base, "live-1", "--program", good)
	if code != exitOK || !regexp.MustCompile(`^live-1: count-chunks of by-ten.rtfs \(\w{12}\) replaces count-chunks of \S+ \(\w{12}\); state kept, stream active\n$`).MatchString(out) {
		t.Fatalf("upgrade --server: exit %d\n%s%s", code, out, errOut)
	}
	send(2)
	state(23)
	in, err := h.Provider().Info("live-1", provider.InspectOptions{})
	must(t, err)
	if len(in.Programs) != 2 || in.Programs[1].File != "by-ten.rtfs" || in.Processor != "count-chunks" {
		t.Fatalf("programs %+v, processor %s", in.Programs, in.Processor)
	}
	// --json: the result's fields and the same sentence; an error line.
	code, out, errOut = cliRun("upgrade", "--server", base, "live-1", "--program", good, "--json")
	if code != exitOK || errOut != "" {
		t.Fatalf("upgrade --server --json: exit %d\n%s%s", code, out, errOut)
	}
	up := upgradedLine(t, out, "live-1")
	if up.State != "active" || up.From == nil || up.From.Hash != in.Programs[1].Hash || up.From.File != "by-ten.rtfs" || up.To.File != "by-ten.rtfs" || up.To.Hash != in.Programs[1].Hash ||
		up.Message != upgradeOutcome(provider.UpgradeResult{StreamID: "live-1", From: *up.From, To: *up.To, State: provider.StateActive}) {
		t.Fatalf("upgrade --server --json: %s (programs before: %+v)", out, in.Programs)
	}
	code, out, errOut = cliRun("upgrade", "--server", base, "nope", "--program", good, "--json")
	if code != exitStreamFailed || errOut != "" || !strings.HasPrefix(out, `{"type":"error","stream":"nope","message":"`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("upgrade --server --json of an unknown stream: exit %d\n%s%s", code, out, errOut)
	}
}
