//go:build unix

package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
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
	if !regexp.MustCompile(`^later: tally of fixed.rtfs \(\w+\) replaces tally of \S+later.rtfs \(\w+\); state kept, stream interrupted\n$`).MatchString(r.stdout) {
		t.Errorf("upgrade through the socket:\n%s", r)
	}
	// --json through the socket: the result's fields and the same sentence.
	r = c.runIn(t, dir, "upgrade", "other", "--program", "fixed.rtfs", "--processor", "tally", "--json")
	wantCode(t, r, exitOK)
	if up := upgradedLine(t, r.stdout, "other"); up.From == nil || up.From.Processor != "tally2" || up.To.Processor != "tally" || up.To.File != "fixed.rtfs" ||
		!regexp.MustCompile(`^tally of fixed.rtfs \(\w{12}\) replaces tally2 of \S+later.rtfs \(\w{12}\); state kept, stream interrupted$`).MatchString(up.Message) ||
		up.State != "interrupted" || r.stderr != "" {
		t.Errorf("upgrade --json through the socket:\n%s", r)
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

// deadLetterJSON is a line of dead-letters --json.
type deadLetterJSON struct {
	Type     string `json:"type"`
	StreamID string `json:"stream-id"`
	Seq      int64  `json:"seq"`
	Chunk    struct {
		Chunk struct{ N int } `json:"chunk"`
	} `json:"chunk"`
	Metadata struct {
		Seq int64  `json:"seq"`
		ID  string `json:"id"`
	} `json:"metadata"`
	Kind      string `json:"kind"`
	Error     string `json:"error"`
	Attempts  int64  `json:"attempts"`
	AtEpochMs int64  `json:"at-epoch-ms"`
}

// inspectedStream is what streams --json shows of a stream's failure and
// dead letters.
type inspectedStream struct {
	StreamID string `json:"stream-id"`
	Status   struct {
		State string `json:"state"`
	} `json:"status"`
	Failure *struct {
		Kind     string `json:"kind"`
		Seq      int64  `json:"seq"`
		Error    string `json:"error"`
		Attempts int64  `json:"attempts"`
	} `json:"failure"`
	DeadLetters struct {
		Count int64 `json:"count"`
	} `json:"dead-letters"`
}

// inspected returns stream id as streams --json shows it.
func (c *cli) inspected(t *testing.T, dir, data, id string) inspectedStream {
	t.Helper()
	r := c.runIn(t, dir, "streams", "--json", "--data", data)
	wantCode(t, r, exitOK)
	var sum struct {
		Streams []inspectedStream `json:"streams"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("streams --json: %v\n%s", err, r)
	}
	for _, s := range sum.Streams {
		if s.StreamID == id {
			return s
		}
	}
	t.Fatalf("streams --json lists no %s:\n%s", id, r)
	return inspectedStream{}
}

// testRecoverySkip: a stream whose processor fails on chunk 3 is held as
// failed, and the commands tell so: run names resume --skip and
// dead-letters, streams shows the failure (kind, chunk, error) and the
// dead letters, in the table and in --json. dead-letters of a stream with
// none says so (exit 0), of an unknown one is an error (exit 1); resume
// --skip without ids is refused; resume ID retries chunk 3 (it fails
// again, the attempts add up); resume ID --skip sets chunk 3 aside and
// the stream goes on to its end with every other chunk; dead-letters then
// lists it (a table, and --json with the chunk); --skip on a stream that is
// not failed names its state.
func (c *cli) testRecoverySkip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	r := c.runIn(t, dir, "run", "--data", data, "--server-url", c.serverURL, writeProgram(t, dir, "sk.rtfs", throwingProgram("sk", 6, 3)))
	wantCode(t, r, exitStreamFailed)
	for _, want := range []string{
		`"rtfshost resume --data ` + data + ` sk" retries chunk 3`,
		`"rtfshost resume --data ` + data + ` sk --skip" sets it aside as a dead letter and goes on`,
		`"rtfshost dead-letters --data ` + data + ` sk" lists them`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run's hint lacks %s:\n%s", want, r)
		}
	}
	st := c.runIn(t, dir, "streams", "--data", data)
	wantCode(t, st, exitOK)
	if !regexp.MustCompile(`(?m)^sk\s+failed\s+2\s+0\s.*\s0\s+processor failed on chunk 3 \(1 attempt\): `).MatchString(st.stdout) ||
		!strings.Contains(st.stdout, "sk has failed: processor failed on chunk 3 (1 attempt): ") ||
		!strings.Contains(st.stdout, "set it aside: rtfshost resume sk --skip") {
		t.Errorf("streams of a failed stream:\n%s", st)
	}
	if s := c.inspected(t, dir, data, "sk"); s.Status.State != "failed" || s.Failure == nil || s.Failure.Kind != "processor" || s.Failure.Seq != 3 ||
		!strings.Contains(s.Failure.Error, "boom on purpose") || s.DeadLetters.Count != 0 {
		t.Errorf("streams --json of a failed stream: %+v", s)
	}

	in := c.runIn(t, dir, "inspect", "--data", data, "--stream", "sk")
	wantCode(t, in, exitOK)
	if !strings.Contains(in.stdout, "\n(sk has failed: retry the chunk: rtfshost resume sk; ") || strings.Contains(in.stdout, "dead letter") {
		t.Errorf("inspect --stream of a failed stream:\n%s", in)
	}
	// resume without ids leaves it failed, and says what repairs it.
	r = c.runIn(t, dir, "resume", "--data", data, "--server-url", c.serverURL)
	wantCode(t, r, exitOK)
	if !regexp.MustCompile(`^stream sk has failed \(processor p failed on chunk 3: \S+ boom on purpose\), and stays so until it is repaired: "rtfshost resume --data \S+ sk" retries chunk 3, .*"rtfshost resume --data \S+ sk --skip" sets it aside as a dead letter and goes on \("rtfshost dead-letters --data \S+ sk" lists them\), "rtfshost cancel --data \S+ sk" ends it\nnothing to resume in \S+: no stream was interrupted \(1 failed; rtfshost streams lists them\)\n$`).MatchString(r.stdout) {
		t.Errorf("resume without ids, a failed stream in the directory:\n%s", r)
	}

	r = c.runIn(t, dir, "dead-letters", "--data", data, "sk")
	wantCode(t, r, exitOK)
	if r.stdout != "stream sk has no dead letters: it set no chunk aside\n" {
		t.Errorf("dead-letters of a stream with none:\n%s", r)
	}
	r = c.runIn(t, dir, "dead-letters", "--data", data, "nope")
	wantCode(t, r, exitStreamFailed)
	if r.stdout != "" || r.stderr != `rtfshost: stream "nope": no such stream in the data directory `+data+" (rtfshost streams lists them)\n" {
		t.Errorf("dead-letters of an unknown stream:\n%s", r)
	}
	r = c.runIn(t, dir, "resume", "--data", data, "--skip")
	wantCode(t, r, exitProgramError)
	if !strings.Contains(r.stderr, "resume --skip needs the ids of the failed streams") {
		t.Errorf("resume --skip without ids:\n%s", r)
	}

	// resume ID retries the chunk, which fails again: the attempts add up.
	r = c.runIn(t, dir, "resume", "--data", data, "--server-url", c.serverURL, "sk")
	wantCode(t, r, exitStreamFailed)
	if !strings.HasPrefix(r.stdout, "sk: active (was failed)\n") || !strings.Contains(r.stderr, "sk: failed on chunk 3") {
		t.Errorf("resume of a failed stream whose chunk fails again:\n%s", r)
	}
	if s := c.inspected(t, dir, data, "sk"); s.Status.State != "failed" || s.Failure == nil || s.Failure.Seq != 3 || s.Failure.Attempts != 2 {
		t.Errorf("after a resume that failed again: %+v", s)
	}

	r = c.runIn(t, dir, "resume", "--json", "--data", data, "--server-url", c.serverURL, "sk", "--skip")
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	if l := lines[0]; l.Type != "status" || l.Stream != "sk" || l.State != "active" || l.Was != "failed" || l.Seq == nil || *l.Seq != 3 ||
		l.Message != "chunk 3 is set aside as a dead letter" {
		t.Errorf("resume --skip's first line: %+v\n%s", l, r)
	}
	if got := outputSeqs(lines, "sk"); !reflect.DeepEqual(got, []int64{4, 5, 6}) {
		t.Errorf("after the skip sk processed chunks %v, want [4 5 6]\n%s", got, r)
	}
	if end, ok := statusOf(lines[1:], "sk"); !ok || end.State != "completed" {
		t.Errorf("sk did not complete:\n%s", r)
	}

	r = c.runIn(t, dir, "dead-letters", "--data", data, "sk")
	wantCode(t, r, exitOK)
	if !regexp.MustCompile(`^SEQ\s+ID\s+ATTEMPTS\s+SET ASIDE\s+ERROR\n3\s+3\s+2\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+\S+sk.rtfs:1:\d+: boom on purpose\n1 dead letter; --json shows each chunk whole\n$`).MatchString(r.stdout) {
		t.Errorf("dead-letters:\n%s", r)
	}
	r = c.runIn(t, dir, "dead-letters", "--json", "--data", data, "sk")
	wantCode(t, r, exitOK)
	var dl deadLetterJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&dl); err != nil || dec.More() {
		t.Fatalf("dead-letters --json: %v\n%s", err, r)
	}
	if dl.Type != "dead-letter" || dl.StreamID != "sk" || dl.Seq != 3 || dl.Chunk.Chunk.N != 3 || dl.Metadata.Seq != 3 || dl.Metadata.ID != "3" ||
		dl.Kind != "processor" || !strings.Contains(dl.Error, "boom on purpose") || dl.Attempts != 2 || dl.AtEpochMs <= 0 {
		t.Errorf("dead-letters --json: %+v\n%s", dl, r)
	}
	if s := c.inspected(t, dir, data, "sk"); s.Status.State != "completed" || s.Failure != nil || s.DeadLetters.Count != 1 {
		t.Errorf("streams --json after the skip: %+v", s)
	}
	if in := c.runIn(t, dir, "inspect", "--data", data, "--stream", "sk"); !strings.HasSuffix(in.stdout, "\n(1 dead letter: rtfshost dead-letters sk)\n") {
		t.Errorf("inspect --stream after the skip:\n%s", in)
	}
	st = c.runIn(t, dir, "streams", "--data", data)
	if !regexp.MustCompile(`(?m)^sk\s+completed\s+5\s+0\s.*source-ended\s+1\s+5$`).MatchString(st.stdout) ||
		!strings.Contains(st.stdout, "(the chunks a stream set aside, DEAD: rtfshost dead-letters ID)") {
		t.Errorf("streams after the skip:\n%s", st)
	}
	r = c.runIn(t, dir, "resume", "--data", data, "sk", "--skip")
	wantCode(t, r, exitStreamFailed)
	if r.stderr != `rtfshost: stream "sk" is completed, not failed: --skip sets aside the chunk a failed stream is held on, and it is held on none`+"\n" {
		t.Errorf("resume --skip of a completed stream:\n%s", r)
	}
}

// execThrower streams a program's 6 lines; the processor throws on "3".
const execThrower = `(defn p [s chunk meta]
  (if (= "3" (:line chunk)) (throw "boom on purpose") {:state (inc s) :output (:line chunk)}))
(call :mcp.stream.start {:transport :exec :command "sh" :args ["-c" "for i in 1 2 3 4 5 6; do echo $i; sleep 0.05; done"]
                         :stream-id "ex" :processor p :initial-state 0})
`

// testRecoverySkipHeld: while a run holds the data directory and keeps a
// failed stream whose source is a program, dead-letters and resume ID
// --skip reach it through its control socket: the held chunk is set aside,
// the run carries the stream on to its end with every other line, and the
// dead letter is there after the run. --skip on a stream that is not
// failed names its state, and changes nothing.
func (c *cli) testRecoverySkipHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := c.start(t, dir, "run", "--json", writeProgram(t, dir, "ex.rtfs", execThrower))
	var seen []string
	for s.lines.Scan() {
		seen = append(seen, s.lines.Text())
		if strings.HasPrefix(s.lines.Text(), `{"type":"log","message":"waiting: stream ex is failed on chunk 3`) {
			break
		}
	}
	if want := `\"rtfshost resume --data .rtfshost ex --skip\" sets it aside as a dead letter`; !strings.Contains(strings.Join(seen, "\n"), want) {
		t.Fatalf("the run does not name resume --skip:\n%s\n%s", strings.Join(seen, "\n"), s.stderr)
	}
	if st := c.runIn(t, dir, "streams"); !regexp.MustCompile(`(?m)^ex\s+failed\s+2\s`).MatchString(st.stdout) || !strings.Contains(st.stdout, "ex has failed: processor failed on chunk 3") {
		t.Errorf("streams through the socket:\n%s", st)
	}
	r := c.runIn(t, dir, "dead-letters", "ex")
	wantCode(t, r, exitOK)
	if r.stdout != "stream ex has no dead letters: it set no chunk aside\n" {
		t.Errorf("dead-letters through the socket:\n%s", r)
	}
	if r := c.runIn(t, dir, "dead-letters", "nope"); r.code != exitStreamFailed || !strings.Contains(r.stderr, `stream "nope": no such stream in the data directory .rtfshost (held by process `) {
		t.Errorf("dead-letters of an unknown stream through the socket:\n%s", r)
	}
	r = c.runIn(t, dir, "resume", "ex", "--skip")
	wantCode(t, r, exitOK)
	if r.stdout != "ex: active (was failed); chunk 3 is set aside as a dead letter\n" {
		t.Errorf("resume --skip through the socket:\n%s", r)
	}
	rr := s.wait(t)
	wantCode(t, rr, exitOK)
	rr.stdout = strings.Join(seen, "\n") + "\n" + rr.stdout
	lines := parseJSONLines(t, rr)
	if got := outputSeqs(lines, "ex"); !reflect.DeepEqual(got, []int64{1, 2, 4, 5, 6}) {
		t.Errorf("outputs of ex: seqs %v, want all but 3\n%s", got, rr)
	}
	if end, ok := statusOf(lines, "ex"); !ok || end.State != "completed" {
		t.Errorf("ex did not complete:\n%s", rr)
	}
	r = c.runIn(t, dir, "dead-letters", "--json", "ex")
	wantCode(t, r, exitOK)
	var dl deadLetterJSON
	if err := json.Unmarshal([]byte(r.stdout), &dl); err != nil || dl.Seq != 3 || !strings.Contains(dl.Error, "boom on purpose") {
		t.Errorf("dead-letters after the run: %+v %v\n%s", dl, err, r)
	}

	// --skip on a live stream that is not failed: its state, nothing done.
	hold := c.start(t, dir, "run", "--json", "--server-url", c.serverURL, writeProgram(t, dir, "keeper.rtfs", counterProgram("keeper", 1000000, 50)))
	hold.waitForOutput(t)
	r = c.runIn(t, dir, "resume", "keeper", "--skip")
	wantCode(t, r, exitStreamFailed)
	if r.stderr != `rtfshost: stream "keeper" is active, not failed: --skip sets aside the chunk a failed stream is held on, and it is held on none`+"\n" {
		t.Errorf("resume --skip of an active stream:\n%s", r)
	}
	if r := c.runIn(t, dir, "cancel", "keeper"); r.code != exitOK {
		t.Errorf("cancel keeper:\n%s", r)
	}
	wantCode(t, hold.wait(t), exitOK)
}
