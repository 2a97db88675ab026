package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A reporter prints what a run (or a resume) produces: processor outputs,
// stream ends, the lines the program and its processors print, the
// program's value and the errors that end it, each told once. Its methods
// are safe for concurrent use. The implementations are the JSON lines of
// --json, plain lines (a pipe), live lines (a terminal), and, in the
// process that holds a data directory, the wire to a run that joined it
// (holder.go), which replays the lines into its own reporter.
type reporter interface {
	// output prints an output as the job's Outbox delivered it
	// (docs/streams.md, "Delivery"): v.Count > 1 when it stands for
	// outputs of its :kind coalesced.
	output(stream string, seq int64, v shown)
	// dropped reports n low-priority outputs of stream left out.
	dropped(stream string, n int64)
	// progress reports stream's :progress after the batch that changed it
	// (docs/streams.md, "Progress"); only the JSON lines show each change
	// (the live line draws it from stats).
	progress(stream string, p provider.ProgressInfo)
	end(e ending)
	// log prints a line of the program (stream "") or of a stream's
	// processor.
	log(stream, line string)
	result(v shown)
	// stats gives the live numbers of the run's streams; only the live
	// reporter shows them.
	stats(list []streamStats)
	fail(f failure)
	// close stops any live display; nothing is printed after it.
	close()
}

// shown is a value as the reporters print it: its RTFS form for the text
// and live lines, its JSON form for --json (rtfs.ToOutputJSON). A value
// crosses from a holder to a run that joined it in this form.
type shown struct {
	Text string          `json:"text"`
	JSON json.RawMessage `json:"json"`
	// Count and Kind say that the value stands for Count outputs of the
	// :kind Kind, coalesced as they were delivered (an output's; 0 and ""
	// otherwise).
	Count int64  `json:"count,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// show makes v's two forms, each within max bytes (the output limit of the
// run's budgets, rtfs.Limits.OutputLimit; 0: none): past it, the text is
// cut with "..." and the JSON is an object {"error": ...} that says what
// was not printed. A value that shares structure is written in full,
// however little memory it takes, so the bound is on the bytes written.
func show(v rtfs.Value, max int64, what string) shown {
	v = orNil(v)
	return shown{Text: printed(v, max), JSON: valueJSON(v, max, what)}
}

// valueJSON converts v for a JSON line with rtfs.OutputJSON: NaN is null,
// a function its printed form, the rest of the value kept. Past max bytes
// (0: none) it is {"error": "<what> not printed: output limit ..."}.
func valueJSON(v rtfs.Value, max int64, what string) json.RawMessage {
	b, err := rtfs.OutputJSON(v, max)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": what + " not printed: " + err.Error()})
	}
	return b
}

// printed is v's printed form for a plain line, cut past max bytes (0: no
// bound) with "...".
func printed(v rtfs.Value, max int64) string {
	if max <= 0 || max > 1<<40 {
		max = 1 << 40
	}
	return rtfs.Excerpt(v, int(max))
}

func orNil(v rtfs.Value) rtfs.Value {
	if v == nil {
		return rtfs.Nil
	}
	return v
}

// ending is how a stream ended: provider.Status in the reporters' terms.
type ending struct {
	Stream    string `json:"stream"`
	State     string `json:"state"`
	EndReason string `json:"end-reason,omitempty"`
	Message   string `json:"message,omitempty"`
	Result    *shown `json:"result,omitempty"` // a completed stream's
	// Progress is the stream's :progress when it ended (docs/streams.md).
	Progress *provider.ProgressInfo `json:"progress,omitempty"`
}

func endingOf(st provider.Status, max int64) ending {
	e := ending{Stream: st.StreamID, State: string(st.State), EndReason: st.EndReason, Message: st.Message}
	if st.State == provider.StateCompleted {
		r := show(st.Result, max, "the stream's result")
		e.Result = &r
	}
	return e
}

// streamStats are the numbers a live line shows of one stream.
type streamStats struct {
	Stream    string `json:"stream"`
	State     string `json:"state"`
	Processed int64  `json:"processed"`
	Queued    int64  `json:"queued"`
	Capacity  int64  `json:"capacity"`
	// Progress is the stream's :progress (docs/streams.md), nil without.
	Progress *provider.ProgressInfo `json:"progress,omitempty"`
}

// The kinds of failure: what ended a run that did not succeed.
const (
	failProgram     = "program"     // the program's own error (exit 2)
	failStream      = "stream"      // a stream failed (exit 1)
	failStuck       = "stuck"       // every live stream is paused for good (exit 1)
	failTimeout     = "timeout"     // --timeout ran out (exit 1)
	failInterrupted = "interrupted" // Ctrl-C, SIGTERM (exit 130)
	failOther       = "other"       // anything else (exit 1)
)

// A failure is one error that ends a run, as data: what failed, where, and
// what to say. The reporters tell it: --json as an error line, the others
// as text on stderr, each with the source line of its position when the
// program's file has one.
type failure struct {
	Kind    string `json:"kind"`
	Stream  string `json:"stream,omitempty"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"` // without the position
	// Processor and Chunk name where a stream's processor failed.
	Processor string `json:"processor,omitempty"`
	Chunk     int64  `json:"chunk,omitempty"`
	// AwaitedAt is the position of the await through which the program
	// saw a stream fail (it then failed too).
	AwaitedAt string `json:"awaited-at,omitempty"`
	// Stuck lists the streams of a failStuck.
	Stuck []provider.StuckStream `json:"stuck,omitempty"`
	// SourceEnds lists, for a failTimeout or failInterrupted, the streams
	// stopped whose source ended with the run (a program's output): a
	// resume gets only the chunks their journals kept.
	SourceEnds []string `json:"source-ends,omitempty"`
}

// exitCode is the exit code a run that ends with f has.
func (f failure) exitCode() int {
	switch f.Kind {
	case failProgram:
		return exitProgramError
	case failInterrupted:
		return exitInterrupted
	}
	return exitStreamFailed
}

// hints is what the reporters add to a failure about the data directory.
type hints struct{ dataDir string }

func (h hints) resume() string {
	return fmt.Sprintf("the streams' progress is kept in %s; run \"rtfshost resume --data %s\" to carry on", h.dataDir, h.dataDir)
}

func (h hints) stuck() string {
	return fmt.Sprintf("they stay paused in %s; resume them with \"rtfshost resume --data %s ID...\", cancel them with \"rtfshost cancel --data %s ID...\", or run with --wait-paused to wait for another client to resume them",
		h.dataDir, h.dataDir, h.dataDir)
}

// jsonLine is one line of the --json format.
type jsonLine struct {
	Type      string          `json:"type"`
	Stream    string          `json:"stream,omitempty"`
	File      string          `json:"file,omitempty"`
	Seq       *int64          `json:"seq,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Count     int64           `json:"count,omitempty"`
	Kind      string          `json:"kind,omitempty"`
	State     string          `json:"state,omitempty"`
	Was       string          `json:"was,omitempty"`
	EndReason string          `json:"end-reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	// Progress is a progress line's :progress.
	Progress *provider.ProgressInfo `json:"progress,omitempty"`
	Value    json.RawMessage        `json:"value,omitempty"`
	Line     int                    `json:"line,omitempty"`
	Col      int                    `json:"col,omitempty"`
	// From and To are an upgraded line's programs (provider.UpgradeResult).
	From *provider.ProgramVersion `json:"from,omitempty"`
	To   *provider.ProgramVersion `json:"to,omitempty"`
}

// jsonReporter writes one JSON object per line:
//
//	{"type":"output","stream":ID,"seq":N,"output":V}   (+ "count":C,"kind":K when C outputs of kind K were coalesced)
//	{"type":"dropped","stream":ID,"count":N}           (low-priority outputs left out)
//	{"type":"progress","stream":ID,"progress":{"done":D,"total":T,"fraction":F,"eta-ms":E,...}}
//	{"type":"status","stream":ID,"state":"completed","end-reason":R,"message":M,"result":V,"progress":P}
//	{"type":"log","stream":ID,"message":TEXT}  (stream only for a processor's line)
//	{"type":"result","value":V}
//	{"type":"error","stream":ID,"file":F,"line":L,"col":C,"message":M}  (an error that ended the run)
//
// Values map to JSON as rtfs.ToOutputJSON does (docs/cli.md).
type jsonReporter struct {
	mu    sync.Mutex
	enc   *json.Encoder
	hints hints
}

func newJSONReporter(w io.Writer, h hints) *jsonReporter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonReporter{enc: enc, hints: h}
}

func (r *jsonReporter) write(l jsonLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(l) // a closed stdout has nowhere to report to
}

func (r *jsonReporter) output(stream string, seq int64, v shown) {
	l := jsonLine{Type: "output", Stream: stream, Seq: &seq, Output: v.JSON}
	if v.Count > 1 {
		l.Count, l.Kind = v.Count, v.Kind
	}
	r.write(l)
}

func (r *jsonReporter) dropped(stream string, n int64) {
	r.write(jsonLine{Type: "dropped", Stream: stream, Count: n})
}

func (r *jsonReporter) progress(stream string, p provider.ProgressInfo) {
	r.write(jsonLine{Type: "progress", Stream: stream, Progress: &p})
}

func (r *jsonReporter) end(e ending) {
	l := jsonLine{Type: "status", Stream: e.Stream, State: e.State, EndReason: e.EndReason, Message: e.Message, Progress: e.Progress}
	if e.Result != nil {
		l.Result = e.Result.JSON
	}
	r.write(l)
}

func (r *jsonReporter) log(stream, line string) {
	r.write(jsonLine{Type: "log", Stream: stream, Message: line})
}

func (r *jsonReporter) result(v shown) { r.write(jsonLine{Type: "result", Value: v.JSON}) }

func (r *jsonReporter) stats([]streamStats) {}

// fail writes the error line. A stream that failed without the program
// seeing it has said so in its status line already: no second line.
func (r *jsonReporter) fail(f failure) {
	l := jsonLine{Type: "error", Stream: f.Stream, File: f.File, Line: f.Line, Col: f.Col, Message: f.Message}
	switch f.Kind {
	case failStream:
		if f.AwaitedAt == "" {
			return
		}
		if f.Processor != "" {
			l.Message = fmt.Sprintf("processor %s failed on chunk %d: %s", f.Processor, f.Chunk, f.Message)
		}
	case failStuck:
		for _, s := range f.Stuck {
			msg := "stuck: " + s.Reason
			if s.Failure != nil {
				msg += "; " + r.hints.repairs(s.StreamID, s.Failure)
			}
			r.write(jsonLine{Type: "error", Stream: s.StreamID, Message: msg})
		}
		return
	case failTimeout, failInterrupted:
		l.Message = f.Message + "; " + r.hints.resume()
		if len(f.SourceEnds) > 0 {
			l.Message += "; " + r.hints.sourceEnds(f.SourceEnds)
		}
	}
	r.write(l)
}

func (r *jsonReporter) close() {}

// writeJSONLine writes one line of the --json format on w: what the
// commands that are not runs print under --json.
func writeJSONLine(w io.Writer, l jsonLine) { newJSONReporter(w, hints{}).write(l) }

// listeningLine is what serve, localserver and natsd print with --json
// once they listen, in place of their sentences: one object, then nothing
// until they stop (their errors are error lines).
type listeningLine struct {
	Type      string `json:"type"`                // "listening"
	URL       string `json:"url"`                 // serve: the MCP endpoint; localserver: its base URL; natsd: the client URL
	SSE       string `json:"sse,omitempty"`       // serve: the legacy HTTP+SSE endpoint
	Dashboard string `json:"dashboard,omitempty"` // serve, unless --no-ui
	Metrics   string `json:"metrics,omitempty"`   // serve
	Live      string `json:"live,omitempty"`      // serve: the liveness probe
	Ready     string `json:"ready,omitempty"`     // serve: the readiness probe
	// OAuthIssuer and OAuthMetadata are serve's with --oauth-issuer.
	OAuthIssuer   string `json:"oauth-issuer,omitempty"`
	OAuthMetadata string `json:"oauth-metadata,omitempty"`
	Data          string `json:"data,omitempty"` // natsd: where JetStream keeps its files
}

func writeListening(w io.Writer, l listeningLine) {
	l.Type = "listening"
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(l)
}

// textReporter writes plain lines on out, for a pipe or a file, and tells
// failures on errw: each once, headed by its position with the source line
// of the program (sources).
type textReporter struct {
	mu      sync.Mutex
	out     io.Writer
	errw    io.Writer
	hints   hints
	sources map[string][]byte // file -> source, for the lines failures point at
	last    map[string]string // each stream's last output printed
}

func (r *textReporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, format, args...)
}

func (r *textReporter) output(stream string, seq int64, v shown) {
	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]string{}
	}
	r.last[stream] = v.Text
	r.mu.Unlock()
	if v.Count > 1 {
		r.printf("%s #%d: %s  (×%d %s)\n", stream, seq, v.Text, v.Count, v.Kind)
		return
	}
	r.printf("%s #%d: %s\n", stream, seq, v.Text)
}

func (r *textReporter) dropped(stream string, n int64) {
	r.printf("%s: %d low-priority outputs left out\n", stream, n)
}

// end prints the stream's status line; a result that is the output just
// printed is not printed again.
func (r *textReporter) end(e ending) {
	r.mu.Lock()
	last, printed := r.last[e.Stream]
	r.mu.Unlock()
	line := e.Stream + " " + endText(e)
	if e.Result != nil {
		if printed && last == e.Result.Text {
			line += " (result: its last output)"
		} else {
			line += " result " + e.Result.Text
		}
	}
	r.printf("%s\n", line)
}

// endText is how a stream ended, in words: its state, why when that says
// more than the state, and the message, except a failure's, which the
// failure tells below in full.
func endText(e ending) string {
	s := e.State
	if e.EndReason != "" && e.EndReason != e.State {
		s += " (" + e.EndReason + ")"
	}
	if e.Message != "" && e.State != string(provider.StateError) {
		s += ": " + e.Message
	}
	return s
}

// log prints a line of the program as it is, a processor's after its
// stream's id.
func (r *textReporter) log(stream, line string) {
	if stream != "" {
		r.printf("%s | %s\n", stream, line)
		return
	}
	r.printf("%s\n", line)
}

func (r *textReporter) result(v shown) { r.printf("result: %s\n", v.Text) }

func (r *textReporter) stats([]streamStats) {}

func (r *textReporter) progress(string, provider.ProgressInfo) {}

func (r *textReporter) fail(f failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tellFailure(r.errw, f, r.sources, r.hints)
}

func (r *textReporter) close() {}

// tellFailure writes f as text: a position and its source line first when
// it has one, then what else there is to know.
func tellFailure(w io.Writer, f failure, sources map[string][]byte, h hints) {
	var b strings.Builder
	switch f.Kind {
	case failStuck:
		paused := 0
		for _, s := range f.Stuck {
			if s.Failure == nil {
				paused++
			}
		}
		if paused == len(f.Stuck) {
			b.WriteString("rtfshost: stopped waiting: every live stream is paused, and nothing can resume it:\n")
		} else {
			b.WriteString("rtfshost: stopped waiting: every live stream is paused or failed, and nothing here can move it on:\n")
		}
		for _, s := range f.Stuck {
			fmt.Fprintf(&b, "  %s: %s\n", s.StreamID, s.Reason)
		}
		for _, s := range f.Stuck {
			if s.Failure != nil {
				fmt.Fprintf(&b, "rtfshost: %s stays failed in %s: %s.\n", s.StreamID, h.dataDir, h.repairs(s.StreamID, s.Failure))
			}
		}
		if paused > 0 {
			fmt.Fprintf(&b, "rtfshost: %s.\n", h.stuck())
		}
	case failTimeout, failInterrupted:
		fmt.Fprintf(&b, "rtfshost: %s.\nrtfshost: %s.\n", f.Message, h.resume())
		if len(f.SourceEnds) > 0 {
			fmt.Fprintf(&b, "rtfshost: %s.\n", h.sourceEnds(f.SourceEnds))
		}
	default:
		if f.File != "" && f.Line > 0 {
			fmt.Fprintf(&b, "%s:%d:%d: %s\n", f.File, f.Line, f.Col, f.Message)
			if text, ok := sourceLine(sources[f.File], f.Line); ok {
				fmt.Fprintf(&b, "%5d | %s\n", f.Line, excerpt(text, f.Col, excerptWidth))
			}
		} else if f.Kind == failStream && f.Processor == "" {
			fmt.Fprintf(&b, "rtfshost: stream %q failed: %s\n", f.Stream, f.Message)
		} else if f.Kind == failProgram {
			fmt.Fprintf(&b, "%s\n", f.Message)
		} else {
			fmt.Fprintf(&b, "rtfshost: %s\n", f.Message)
		}
		if f.Processor != "" {
			if f.File == "" {
				fmt.Fprintf(&b, "%s\n", f.Message)
			}
			fmt.Fprintf(&b, "  in processor %s, on chunk %d of stream %s", f.Processor, f.Chunk, f.Stream)
			if f.AwaitedAt != "" {
				fmt.Fprintf(&b, " (awaited at %s)", f.AwaitedAt)
			}
			b.WriteString("\n")
		} else if f.AwaitedAt != "" {
			fmt.Fprintf(&b, "  (awaited at %s)\n", f.AwaitedAt)
		}
	}
	io.WriteString(w, b.String())
}
