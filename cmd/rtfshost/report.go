package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A reporter prints what a run produces: processor outputs, stream ends, log
// lines from the program and the program's result. Its methods are safe for
// concurrent use. The three implementations are the JSON-lines format of
// DESIGN §7 (--json), plain lines (a pipe) and live lines (a terminal).
type reporter interface {
	output(stream string, seq int64, v rtfs.Value)
	end(st provider.Status)
	log(line string)
	result(v rtfs.Value)
	// close stops any live display; nothing is printed after it.
	close()
}

// jsonLine is one line of the --json format.
type jsonLine struct {
	Type      string          `json:"type"`
	Stream    string          `json:"stream,omitempty"`
	Seq       *int64          `json:"seq,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	State     string          `json:"state,omitempty"`
	EndReason string          `json:"end-reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	File      string          `json:"file,omitempty"`
	Line      int             `json:"line,omitempty"`
	Col       int             `json:"col,omitempty"`
}

// jsonReporter writes one JSON object per line:
//
//	{"type":"output","stream":ID,"seq":N,"output":V}
//	{"type":"status","stream":ID,"state":"completed","end-reason":R,"message":M,"result":V}
//	{"type":"log","message":TEXT}
//	{"type":"result","value":V}
//	{"type":"error","file":F,"line":L,"col":C,"message":M}  (the error that ended the run)
//
// Values map to JSON as rtfs.ToJSON does (DESIGN §7), each within max
// bytes (the output limit of the run's budgets, rtfs.Limits.OutputLimit;
// 0: none): a value past it is an object {"error": ...} that says so.
type jsonReporter struct {
	mu  sync.Mutex
	enc *json.Encoder
	max int64
}

func newJSONReporter(w io.Writer) *jsonReporter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonReporter{enc: enc}
}

func (r *jsonReporter) write(l jsonLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(l) // a closed stdout has nowhere to report to
}

func (r *jsonReporter) output(stream string, seq int64, v rtfs.Value) {
	r.write(jsonLine{Type: "output", Stream: stream, Seq: &seq, Output: valueJSON(v, r.max, "the output")})
}

func (r *jsonReporter) end(st provider.Status) {
	l := jsonLine{Type: "status", Stream: st.StreamID, State: string(st.State), EndReason: st.EndReason, Message: st.Message}
	if st.State == provider.StateCompleted {
		l.Result = valueJSON(orNil(st.Result), r.max, "the stream's result")
	}
	r.write(l)
}

func (r *jsonReporter) log(line string) { r.write(jsonLine{Type: "log", Message: line}) }

func (r *jsonReporter) result(v rtfs.Value) {
	r.write(jsonLine{Type: "result", Value: valueJSON(orNil(v), r.max, "the program's value")})
}

func (r *jsonReporter) close() {}

// valueJSON converts v for a JSON line with rtfs.OutputJSON: NaN is null,
// a function its printed form, the rest of the value kept. Past max bytes
// (0: none) it is {"error": "<what> not printed: output limit ..."}: a
// value that shares structure is written in full, however little memory it
// takes.
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

// textReporter writes plain lines, for a pipe or a file; a value is cut
// past max bytes (see jsonReporter).
type textReporter struct {
	mu   sync.Mutex
	w    io.Writer
	max  int64
	last map[string]rtfs.Value // each stream's last output printed
}

func (r *textReporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, format, args...)
}

func (r *textReporter) output(stream string, seq int64, v rtfs.Value) {
	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]rtfs.Value{}
	}
	r.last[stream] = v
	r.mu.Unlock()
	r.printf("%s #%d: %s\n", stream, seq, printed(v, r.max))
}

// end prints the stream's status line; a result that is the output just
// printed is not printed again.
func (r *textReporter) end(st provider.Status) {
	r.mu.Lock()
	last, seen := r.last[st.StreamID]
	r.mu.Unlock()
	line := statusLine(st, r.max)
	if seen && st.Result != nil && last == st.Result {
		line = statusLine(provider.Status{StreamID: st.StreamID, State: st.State, EndReason: st.EndReason, Message: st.Message}, r.max) + " (result: its last output)"
	}
	r.printf("%s\n", line)
}

func (r *textReporter) log(line string) { r.printf("%s\n", line) }

func (r *textReporter) result(v rtfs.Value) { r.printf("result: %s\n", printed(orNil(v), r.max)) }

func (r *textReporter) close() {}

// statusLine describes how a stream ended, in one line, its result cut past
// max bytes.
func statusLine(st provider.Status, max int64) string {
	s := fmt.Sprintf("%s %s", st.StreamID, st.State)
	if st.EndReason != "" {
		s += " (" + st.EndReason + ")"
	}
	if st.Message != "" {
		s += ": " + st.Message
	}
	if st.State == provider.StateCompleted && st.Result != nil {
		s += " result " + printed(st.Result, max)
	}
	return s
}
