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
	// output prints an output as delivered (docs/streams.md, "Delivery"):
	// o.Count > 1 when it stands for outputs of its :kind coalesced.
	output(stream string, o provider.Output)
	// dropped reports n low-priority outputs of stream left out.
	dropped(stream string, n int64)
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
	Count     int64           `json:"count,omitempty"`
	Kind      string          `json:"kind,omitempty"`
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
//	{"type":"output","stream":ID,"seq":N,"output":V}   (+ "count":C,"kind":K when C outputs of kind K were coalesced)
//	{"type":"dropped","stream":ID,"count":N}           (low-priority outputs left out)
//	{"type":"status","stream":ID,"state":"completed","end-reason":R,"message":M,"result":V}
//	{"type":"log","message":TEXT}
//	{"type":"result","value":V}
//	{"type":"error","file":F,"line":L,"col":C,"message":M}  (the error that ended the run)
//
// Values map to JSON as rtfs.ToJSON does (DESIGN §7).
type jsonReporter struct {
	mu  sync.Mutex
	enc *json.Encoder
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

func (r *jsonReporter) output(stream string, o provider.Output) {
	l := jsonLine{Type: "output", Stream: stream, Seq: &o.Seq, Output: valueJSON(o.Value)}
	if o.Count > 1 {
		l.Count, l.Kind = o.Count, o.Kind
	}
	r.write(l)
}

func (r *jsonReporter) dropped(stream string, n int64) {
	r.write(jsonLine{Type: "dropped", Stream: stream, Count: n})
}

func (r *jsonReporter) end(st provider.Status) {
	l := jsonLine{Type: "status", Stream: st.StreamID, State: string(st.State), EndReason: st.EndReason, Message: st.Message}
	if st.State == provider.StateCompleted {
		l.Result = valueJSON(orNil(st.Result))
	}
	r.write(l)
}

func (r *jsonReporter) log(line string) { r.write(jsonLine{Type: "log", Message: line}) }

func (r *jsonReporter) result(v rtfs.Value) {
	r.write(jsonLine{Type: "result", Value: valueJSON(orNil(v))})
}

func (r *jsonReporter) close() {}

// valueJSON converts v for a JSON line with rtfs.ToOutputJSON: NaN is null,
// a function its printed form, the rest of the value kept.
func valueJSON(v rtfs.Value) json.RawMessage { return rtfs.ToOutputJSON(v) }

func orNil(v rtfs.Value) rtfs.Value {
	if v == nil {
		return rtfs.Nil
	}
	return v
}

// textReporter writes plain lines, for a pipe or a file.
type textReporter struct {
	mu   sync.Mutex
	w    io.Writer
	last map[string]rtfs.Value // each stream's last output printed
}

func (r *textReporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, format, args...)
}

func (r *textReporter) output(stream string, o provider.Output) {
	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]rtfs.Value{}
	}
	r.last[stream] = o.Value
	r.mu.Unlock()
	if o.Count > 1 {
		r.printf("%s #%d: %s  (×%d %s)\n", stream, o.Seq, o.Value, o.Count, o.Kind)
		return
	}
	r.printf("%s #%d: %s\n", stream, o.Seq, o.Value)
}

func (r *textReporter) dropped(stream string, n int64) {
	r.printf("%s: %d low-priority outputs left out\n", stream, n)
}

// end prints the stream's status line; a result that is the output just
// printed is not printed again.
func (r *textReporter) end(st provider.Status) {
	r.mu.Lock()
	last, printed := r.last[st.StreamID]
	r.mu.Unlock()
	line := statusLine(st)
	if printed && st.Result != nil && rtfs.Equal(last, st.Result) {
		line = statusLine(provider.Status{StreamID: st.StreamID, State: st.State, EndReason: st.EndReason, Message: st.Message}) + " (result: its last output)"
	}
	r.printf("%s\n", line)
}

func (r *textReporter) log(line string) { r.printf("%s\n", line) }

func (r *textReporter) result(v rtfs.Value) { r.printf("result: %s\n", orNil(v)) }

func (r *textReporter) close() {}

// statusLine describes how a stream ended, in one line.
func statusLine(st provider.Status) string {
	s := fmt.Sprintf("%s %s", st.StreamID, st.State)
	if st.EndReason != "" {
		s += " (" + st.EndReason + ")"
	}
	if st.Message != "" {
		s += ": " + st.Message
	}
	if st.State == provider.StateCompleted && st.Result != nil {
		s += " result " + st.Result.String()
	}
	return s
}
