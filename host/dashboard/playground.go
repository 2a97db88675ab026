package dashboard

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/internal/testrunner"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/transport/replay"
)

// The playground (/ui/playground.html, PathPlayground) runs a processor
// over chunks typed in the page, on the server, as `rtfshost test`'s
// run-processor does (provider.DryRun): the program's definitions are
// run (not its starts), then the processor named (or the :processor of
// its first start) is driven over the chunks, one per line, decoded as a
// stream decodes a source's bytes. It runs under the Dashboard's budgets
// (Options.Limits for each call, PlaygroundTimeout for the whole run, the
// request and chunk bounds below), and, being a POST, needs the write
// scope when the server checks OAuth scopes.

// PathPlayground is where the playground page posts a run.
const PathPlayground = "/ui/api/playground"

const (
	maxPlaygroundBody   = 1 << 20 // bytes of one request
	maxPlaygroundChunks = 10_000
	// maxPlaygroundRecording bounds the bytes of a recording read.
	maxPlaygroundRecording = 64 << 20
	playgroundFile         = "playground.rtfs"
)

// A playgroundRequest is one run: the program's source, the processor's
// name ("" for the first start's), the initial state as RTFS ("" for {}),
// and the chunks, one JSON value (or line of text) per line.
type playgroundRequest struct {
	Program   string `json:"program"`
	Processor string `json:"processor"`
	State     string `json:"state"`
	Chunks    string `json:"chunks"`
	// Recording, instead of Chunks, names a recording of
	// Options.RecordingsDir (its base name).
	Recording string `json:"recording,omitempty"`
}

// PathRecordings lists the recordings the playground may read.
const PathRecordings = "/ui/api/recordings"

// recordings answers the names of the *.ndjson files of
// Options.RecordingsDir (none when it is unset or missing).
func (d *Dashboard) recordings(w http.ResponseWriter, _ *http.Request) {
	names := []string{}
	if d.opts.RecordingsDir != "" {
		entries, _ := os.ReadDir(d.opts.RecordingsDir)
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".ndjson") {
				names = append(names, e.Name())
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string][]string{"recordings": names})
}

// recordedChunks reads the recording name of Options.RecordingsDir: a
// base name, so that a request cannot reach another file.
func (d *Dashboard) recordedChunks(name string) ([]provider.DryChunk, error) {
	if d.opts.RecordingsDir == "" {
		return nil, errors.New("this server has no recordings directory")
	}
	if name != filepath.Base(name) || !strings.HasSuffix(name, ".ndjson") || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("recording %q: give the name of a .ndjson file of the recordings directory", name)
	}
	path := filepath.Join(d.opts.RecordingsDir, name)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	defer f.Close()
	recs, err := replay.Read(name, io.LimitReader(f, maxPlaygroundRecording))
	if err != nil {
		return nil, err
	}
	if len(recs) > maxPlaygroundChunks {
		return nil, fmt.Errorf("recording %s: more than %d chunks", name, maxPlaygroundChunks)
	}
	out := make([]provider.DryChunk, len(recs))
	for i, r := range recs {
		out[i] = provider.DryChunk{Data: r.Chunk.Data, Event: r.Chunk.Event, ID: r.Chunk.ID, FD: r.Chunk.FD, ReceivedAt: r.Chunk.ReceivedAt}
	}
	return out, nil
}

// A playgroundStep is one processed chunk, its values as JSON.
type playgroundStep struct {
	Seq         int64           `json:"seq"`
	Chunk       json.RawMessage `json:"chunk"`
	StateBefore json.RawMessage `json:"stateBefore"`
	State       json.RawMessage `json:"state"`
	Action      string          `json:"action,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       string          `json:"error,omitempty"`
	Line        int             `json:"line,omitempty"`
	Col         int             `json:"col,omitempty"`
}

// A playgroundReply is the run's steps and end, or the error that kept it
// from running (with the failing form's line and column in the program).
type playgroundReply struct {
	Steps   []playgroundStep `json:"steps"`
	Status  string           `json:"status,omitempty"`
	Reason  string           `json:"reason,omitempty"`
	Message string           `json:"message,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   string           `json:"error,omitempty"`
	Line    int              `json:"line,omitempty"`
	Col     int              `json:"col,omitempty"`
}

func (d *Dashboard) playground(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-CSRF-Token")), []byte(d.csrf)) != 1 {
		writeJSON(w, http.StatusForbidden, playgroundReply{Error: "missing or wrong X-CSRF-Token: reload the page"})
		return
	}
	var req playgroundRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPlaygroundBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, playgroundReply{Error: "the request is not a playground run: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), d.opts.PlaygroundTimeout,
		fmt.Errorf("the run took longer than the playground's %s", d.opts.PlaygroundTimeout))
	defer cancel()
	writeJSON(w, http.StatusOK, d.runPlayground(ctx, req))
}

// runPlayground compiles the program's definitions, runs them, and drives
// the processor over the chunks.
func (d *Dashboard) runPlayground(ctx context.Context, req playgroundRequest) playgroundReply {
	fail := func(err error) playgroundReply {
		rep := playgroundReply{Steps: []playgroundStep{}, Error: err.Error()}
		rep.Line, rep.Col = position(err)
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			rep.Error = c.Error()
		}
		return rep
	}
	var chunks []provider.DryChunk
	for _, line := range bytes.Split([]byte(req.Chunks), []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		if len(chunks) == maxPlaygroundChunks {
			return fail(fmt.Errorf("more than %d chunks", maxPlaygroundChunks))
		}
		chunks = append(chunks, provider.DryChunk{Data: append([]byte(nil), line...)})
	}
	if req.Recording != "" {
		recorded, err := d.recordedChunks(req.Recording)
		if err != nil {
			return fail(err)
		}
		chunks = recorded
	}
	processor := req.Processor
	prog, err := rtfs.CompileWith(playgroundFile, []byte(req.Program), rtfs.CompileOptions{
		Rewrite: func(forms []syntax.Node) ([]syntax.Node, error) {
			if processor == "" {
				processor = firstProcessor(forms)
			}
			defs := testrunner.Definitions(forms)
			state := "{}"
			if req.State != "" {
				state = req.State
			}
			sf, err := syntax.Parse("state", []byte(state))
			if err != nil {
				return nil, err
			}
			if len(sf) != 1 {
				return nil, fmt.Errorf("state: expected one form, got %d", len(sf))
			}
			at := sf[0].Pos()
			return append(defs, &syntax.List{At: at, Elems: []syntax.Node{
				&syntax.Symbol{At: at, Name: "def"}, &syntax.Symbol{At: at, Name: "%playground-state"}, sf[0]}}), nil
		},
	})
	if err != nil {
		return fail(err)
	}
	if processor == "" {
		return fail(errors.New("name the processor: the program starts no stream whose :processor names one"))
	}
	th := rtfs.NewThread(d.opts.Limits)
	out, err := th.Run(ctx, prog)
	if err == nil && out.Call != nil {
		err = fmt.Errorf("%s: the definitions make a host call (:%s); the playground runs none", out.Call.Pos, out.Call.Capability)
	}
	if err != nil {
		return fail(err)
	}
	initial, _ := out.Globals.Get("%playground-state")
	res, err := provider.DryRun(ctx, provider.DryRunRequest{
		Processor: rtfs.String(processor), Globals: out.Globals, InitialState: initial,
		Chunks: chunks, Limits: d.opts.Limits, StreamID: "playground",
	})
	if err != nil {
		return fail(err)
	}
	rep := playgroundReply{Steps: make([]playgroundStep, 0, len(res.Steps)), Status: string(res.Status),
		Reason: res.Reason, Message: res.Message}
	if res.Result != nil {
		rep.Result = outputJSON(res.Result)
	}
	for _, s := range res.Steps {
		st := playgroundStep{Seq: s.Seq, Chunk: outputJSON(s.Chunk), StateBefore: outputJSON(s.StateBefore),
			State: outputJSON(s.State), Action: s.Action}
		if s.Output != nil {
			st.Output = outputJSON(s.Output)
		}
		if s.Err != nil {
			st.Error = s.Err.Error()
			st.Line, st.Col = position(s.Err)
		}
		rep.Steps = append(rep.Steps, st)
	}
	return rep
}

// position is the line and column in the program of the form an error is
// about, when it is there.
func position(err error) (int, int) {
	var ee *rtfs.EvalError
	if errors.As(err, &ee) && ee.Pos.Filename() == playgroundFile {
		return int(ee.Pos.Line), int(ee.Pos.Col)
	}
	var se *syntax.Error
	if errors.As(err, &se) && se.Pos.Filename() == playgroundFile {
		return int(se.Pos.Line), int(se.Pos.Col)
	}
	return 0, 0
}

// firstProcessor is the name the :processor of the program's first
// literal start map gives, or "".
func firstProcessor(forms []syntax.Node) string {
	var found string
	var walk func(n syntax.Node)
	walk = func(n syntax.Node) {
		if found != "" {
			return
		}
		switch n := n.(type) {
		case *syntax.List:
			if len(n.Elems) == 3 {
				if s, ok := n.Elems[0].(*syntax.Symbol); ok && s.Name == "call" {
					if k, ok := n.Elems[1].(*syntax.Keyword); ok && k.Name == "mcp.stream.start" {
						if m, ok := n.Elems[2].(*syntax.Map); ok {
							for i := 0; i+1 < len(m.Elems); i += 2 {
								if k, ok := m.Elems[i].(*syntax.Keyword); ok && k.Name == "processor" {
									switch v := m.Elems[i+1].(type) {
									case *syntax.Symbol:
										found = v.Name
									case *syntax.String:
										found = v.Value
									}
									return
								}
							}
						}
					}
				}
			}
			for _, e := range n.Elems {
				walk(e)
			}
		case *syntax.Vector:
			for _, e := range n.Elems {
				walk(e)
			}
		case *syntax.Map:
			for _, e := range n.Elems {
				walk(e)
			}
		}
	}
	for _, f := range forms {
		walk(f)
	}
	return found
}

// playgroundTimeout is the default of Options.PlaygroundTimeout.
const playgroundTimeout = 10 * time.Second
