//go:build unix

package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// throwingProgram starts stream id on counter.v1 (limit chunks), whose
// processor throws on chunk n.
func throwingProgram(id string, limit, n int) string {
	return `(defn p [s chunk meta] (if (= ` + itoa(n) + ` (get-in chunk [:chunk :n])) (throw "boom on purpose") {:state (inc s) :output (inc s)}))
(call :mcp.stream.start {:endpoint "counter.v1" :stream-id "` + id + `" :config {:limit ` + itoa(limit) + ` :interval_ms 10} :processor p :initial-state 0})
`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// outputSeqs returns the seqs of stream's output lines, in order.
func outputSeqs(lines []outLine, stream string) []int64 {
	var seqs []int64
	for _, l := range lines {
		if l.Type == "output" && l.Stream == stream {
			seqs = append(seqs, *l.Seq)
		}
	}
	return seqs
}

// statusOf returns stream's status line.
func statusOf(lines []outLine, stream string) (outLine, bool) {
	for _, l := range lines {
		if l.Type == "status" && l.Stream == stream {
			return l, true
		}
	}
	return outLine{}, false
}

// testResumeTruth: resume tells the truth. With ids it resumes exactly
// those (another interrupted stream stays interrupted); without ids it says
// which interrupted streams it resumes, and reports none of the failures of
// streams that ended before; when nothing needed resuming it says so and
// exits 0; resuming an ended stream is an error told once.
func (c *cli) testResumeTruth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// bad ends in error (:on-error {:then :end}): an old failure, which
	// resume does not tell again.
	badProgram := strings.Replace(throwingProgram("bad", 10, 3), ":initial-state 0}", ":initial-state 0 :on-error {:then :end}}", 1)
	bad := c.runIn(t, dir, "run", "--data", data, "--server-url", c.serverURL, writeProgram(t, dir, "bad.rtfs", badProgram))
	wantCode(t, bad, exitStreamFailed)
	two := counterProgram("ra", 40, 40) + strings.ReplaceAll(counterProgram("rb", 40, 40), "tally", "tally2")
	r := c.runIn(t, dir, "run", "--timeout", "500ms", "--data", data, "--server-url", c.serverURL, writeProgram(t, dir, "two.rtfs", two))
	wantCode(t, r, exitStreamFailed)
	st := c.runIn(t, dir, "streams", "--data", data)
	if !regexp.MustCompile(`(?m)^ra\s+interrupted`).MatchString(st.stdout) || !regexp.MustCompile(`(?m)^rb\s+interrupted`).MatchString(st.stdout) {
		t.Fatalf("after the timeout ra and rb are not interrupted:\n%s", st)
	}

	// resume ra: ra alone, to its end.
	r = c.runIn(t, dir, "resume", "--json", "--data", data, "--server-url", c.serverURL, "ra")
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	if l := lines[0]; l.Type != "status" || l.Stream != "ra" || l.State != "active" || l.Was != "interrupted" {
		t.Errorf("resume ra's first line: %+v\n%s", l, r)
	}
	if end, ok := statusOf(lines[1:], "ra"); !ok || end.State != "completed" {
		t.Errorf("ra did not complete:\n%s", r)
	}
	if len(outputSeqs(lines, "rb")) > 0 || strings.Contains(r.stdout, "bad") {
		t.Errorf("resume ra ran or reported other streams:\n%s", r)
	}
	if st := c.runIn(t, dir, "streams", "--data", data); !regexp.MustCompile(`(?m)^rb\s+interrupted`).MatchString(st.stdout) {
		t.Errorf("after resume ra, rb is not interrupted:\n%s", st)
	}

	// resume: rb, said so; the old failure of bad is not told again.
	r = c.runIn(t, dir, "resume", "--json", "--data", data, "--server-url", c.serverURL)
	wantCode(t, r, exitOK)
	lines = parseJSONLines(t, r)
	if l := lines[0]; l.Type != "log" || l.Message != "resuming 1 interrupted stream: rb" {
		t.Errorf("resume's first line: %+v\n%s", l, r)
	}
	if end, ok := statusOf(lines, "rb"); !ok || end.State != "completed" {
		t.Errorf("rb did not complete:\n%s", r)
	}
	for _, l := range lines {
		if l.Type == "error" || l.Stream == "bad" || l.Stream == "ra" || strings.Contains(l.Message, "boom") {
			t.Errorf("resume reports what it did not resume: %+v\n%s", l, r)
		}
	}

	// Nothing left: said once, exit 0.
	r = c.runIn(t, dir, "resume", "--data", data, "--server-url", c.serverURL)
	wantCode(t, r, exitOK)
	if r.stdout != "nothing to resume in "+data+": no stream was interrupted (3 ended; rtfshost streams lists them)\n" || r.stderr != "" {
		t.Errorf("resume with nothing to resume:\n%s", r)
	}
	// An ended stream named: one error, told once.
	r = c.runIn(t, dir, "resume", "--data", data, "--server-url", c.serverURL, "bad")
	wantCode(t, r, exitStreamFailed)
	if r.stdout != "" || r.stderr != "rtfshost: stream \"bad\" has ended (error): it cannot be resumed; rtfshost rm removes it\n" {
		t.Errorf("resume of an ended stream:\n%s", r)
	}
}

// testRecoveryHeld: while a run holds the data directory, upgrade and
// resume ID reach it through its control socket: a stream the directory
// stores as interrupted gets a new processor, and resume ID runs it in
// that run to its end (the holder reports it), where before it only
// printed "interrupted"; resume without ids resumes the interrupted
// streams there and says so.
func (c *cli) testRecoveryHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Two interrupted streams.
	two := counterProgram("later", 30, 40) + strings.ReplaceAll(counterProgram("other", 30, 40), "tally", "tally2")
	r := c.runIn(t, dir, "run", "--timeout", "400ms", "--server-url", c.serverURL, writeProgram(t, dir, "later.rtfs", two))
	wantCode(t, r, exitStreamFailed)
	// A run holds the directory.
	hold := c.start(t, dir, "run", "--json", "--server-url", c.serverURL, writeProgram(t, dir, "keeper.rtfs", counterProgram("keeper", 1000000, 50)))
	hold.waitForOutput(t)
	writeProgram(t, dir, "fixed.rtfs", `(defn tally [n chunk meta] {:state (+ n 1000) :output {:n (+ n 1000)}})`)
	r = c.runIn(t, dir, "upgrade", "later", "--program", "fixed.rtfs")
	wantCode(t, r, exitOK)
	if !regexp.MustCompile(`^later: tally of fixed.rtfs \(\w+\) replaces tally of \S+later.rtfs \(\w+\); state kept, stream active\n$`).MatchString(r.stdout) {
		t.Errorf("upgrade through the socket:\n%s", r)
	}
	r = c.runIn(t, dir, "resume", "later")
	wantCode(t, r, exitOK)
	if r.stdout != "later: active (was interrupted)\n" {
		t.Errorf("resume later through the socket:\n%s", r)
	}
	// later runs in the holder, to its end.
	ended := func(id string) bool {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			st := c.runIn(t, dir, "streams")
			if regexp.MustCompile(`(?m)^` + id + `\s+completed`).MatchString(st.stdout) {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	if !ended("later") {
		t.Fatalf("later did not complete in the run that holds the directory")
	}
	r = c.runIn(t, dir, "resume")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "resuming 1 interrupted stream: other\n") || !strings.Contains(r.stdout, "they run in process ") {
		t.Errorf("resume through the socket:\n%s", r)
	}
	if !ended("other") {
		t.Fatalf("other did not complete in the run that holds the directory")
	}
	if r := c.runIn(t, dir, "cancel", "keeper"); r.code != exitOK {
		t.Errorf("cancel keeper:\n%s", r)
	}
	hr := hold.wait(t)
	wantCode(t, hr, exitOK)
	lines := parseJSONLines(t, hr)
	// The holder reported later's chunks from where it was, by the new
	// processor: each output is 1000 more than the one before.
	var prev float64
	for i, l := range lines {
		if l.Type != "output" || l.Stream != "later" {
			continue
		}
		var o struct{ N float64 }
		if err := json.Unmarshal(l.Output, &o); err != nil {
			t.Fatal(err)
		}
		if prev != 0 && o.N != prev+1000 {
			t.Errorf("line %d: later's output %v after %v, want the new processor's\n%s", i, o.N, prev, hr)
		}
		prev = o.N
	}
	if end, ok := statusOf(lines, "later"); !ok || end.State != "completed" || prev < 1000 {
		t.Errorf("the holder did not report later to its end by the new processor:\n%s", hr)
	}
}

// execPauser streams a program's 8 lines; the processor pauses the stream
// for good on the third.
const execPauser = `(defn p [s chunk meta]
  (if (= s 2) {:state (inc s) :action :pause :output (:line chunk)} {:state (inc s) :output (:line chunk)}))
(call :mcp.stream.start {:transport :exec :command "sh" :args ["-c" "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.05; done"]
                         :stream-id "ex" :processor p :initial-state 0})
`

// testRecoveryExec: a run whose stream is paused for good while its source
// is a program does not exit with a hint to resume later (the program
// would die with the run, and its lines not yet printed with it): it keeps
// the program and waits, saying so and naming the commands; a resume from
// another shell, through the control socket, carries the stream on to its
// end with every line processed once. A --timeout that stops such a
// stream says that its source ended with the run.
func (c *cli) testRecoveryExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := c.start(t, dir, "run", "--json", writeProgram(t, dir, "ex.rtfs", execPauser))
	var seen []string
	for s.lines.Scan() {
		seen = append(seen, s.lines.Text())
		if strings.HasPrefix(s.lines.Text(), `{"type":"log","message":"waiting: stream ex is paused`) {
			break
		}
	}
	if want := `its source (:exec) would end with this run, so the run keeps it and waits (Ctrl-C stops it). From another shell: \"rtfshost resume --data .rtfshost ex\" resumes it`; !strings.Contains(strings.Join(seen, "\n"), want) {
		t.Fatalf("the run does not say it waits:\n%s\n%s", strings.Join(seen, "\n"), s.stderr)
	}
	r := c.runIn(t, dir, "resume", "ex")
	wantCode(t, r, exitOK)
	if r.stdout != "ex: active (was paused)\n" {
		t.Errorf("resume ex:\n%s", r)
	}
	rr := s.wait(t)
	wantCode(t, rr, exitOK)
	rr.stdout = strings.Join(seen, "\n") + "\n" + rr.stdout
	lines := parseJSONLines(t, rr)
	if got := outputSeqs(lines, "ex"); len(got) != 8 || got[0] != 1 || got[7] != 8 {
		t.Errorf("outputs of ex: seqs %v, want 1..8\n%s", got, rr)
	}
	if end, ok := statusOf(lines, "ex"); !ok || end.State != "completed" {
		t.Errorf("ex did not complete:\n%s", rr)
	}

	// Stopped by --timeout: the hint says what resume will do.
	slow := strings.NewReplacer(`"ex"`, `"ex2"`, "sleep 0.05", "sleep 0.5", "(= s 2)", "(= s 100)").Replace(execPauser)
	r = c.runIn(t, dir, "run", "--timeout", "700ms", writeProgram(t, dir, "ex2.rtfs", slow))
	wantCode(t, r, exitStreamFailed)
	if !strings.Contains(r.stderr, "rtfshost: the source of ex2 was a program that ended with this run: resuming processes the chunks it had sent (kept in .rtfshost) and then ends with source-lost") {
		t.Errorf("the timeout's hint:\n%s", r)
	}
}
