package testrunner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport/replay"
)

// builtins are the functions the expanded test forms call.
func (r *run) builtins() []*rtfs.Builtin {
	return []*rtfs.Builtin{
		rtfs.NewBuiltin("%is", r.is),
		rtfs.NewBuiltin("%testing-push", func(_ *rtfs.Thread, args []rtfs.Value) (rtfs.Value, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("testing: expected a description")
			}
			d := args[0].String()
			if s, ok := args[0].(rtfs.String); ok {
				d = string(s)
			}
			r.testing = append(r.testing, d)
			return rtfs.Nil, nil
		}),
		rtfs.NewBuiltin("%testing-pop", func(*rtfs.Thread, []rtfs.Value) (rtfs.Value, error) {
			if n := len(r.testing); n > 0 {
				r.testing = r.testing[:n-1]
			}
			return rtfs.Nil, nil
		}),
	}
}

// is records one assertion: (%is kind outcome form line col msg extra...),
// where outcome is [:ok value args?], [:error e], [:none] or [:thrown e]
// (rewrite.go, isForm). It returns whether the assertion held.
func (r *run) is(_ *rtfs.Thread, args []rtfs.Value) (rtfs.Value, error) {
	if len(args) < 6 {
		return nil, fmt.Errorf("is: internal error: %d arguments", len(args))
	}
	kind, _ := args[0].(rtfs.Keyword)
	res, _ := args[1].(*rtfs.Vector)
	form, _ := args[2].(rtfs.String)
	line, _ := args[3].(rtfs.Int)
	col, _ := args[4].(rtfs.Int)
	f := Failure{File: r.file, Line: int(line), Col: int(col), Test: r.cur.Name, Form: string(form),
		Testing: append([]string(nil), r.testing...)}
	if m, ok := args[5].(rtfs.String); ok {
		f.Message = string(m)
	} else if args[5] != rtfs.Nil {
		f.Message = args[5].String()
	}
	if res == nil || res.Len() == 0 {
		return nil, fmt.Errorf("is: internal error: outcome %s", args[1])
	}
	tag, _ := res.Index(0).(rtfs.Keyword)
	held := false
	switch {
	case tag == "error":
		f.Error = true
		f.Message = "threw " + errMessage(res.Index(1))
	case kind == "thrown" || kind == "thrown-msg":
		if tag == "none" {
			f.Expected, f.Actual = "an error", "none"
			break
		}
		if kind == "thrown" {
			held = true
			break
		}
		msg := errMessage(res.Index(1))
		re, err := pattern(args)
		if err != nil {
			return nil, err
		}
		held = re.MatchString(msg)
		f.Expected, f.Actual = fmt.Sprintf("an error whose message matches #%q", re.String()), fmt.Sprintf("%q", msg)
	case kind == "eq":
		held = rtfs.Truth(res.Index(1))
		vals, _ := res.Index(2).(*rtfs.Vector)
		if vals != nil && vals.Len() >= 2 {
			exp, act := vals.Index(0), vals.Index(1)
			for i := 1; i < vals.Len(); i++ {
				if !rtfs.Equal(exp, vals.Index(i)) {
					act = vals.Index(i)
					break
				}
			}
			f.Expected, f.Actual, f.Diff = show(exp), show(act), diffString(exp, act)
		}
	case kind == "call":
		held = rtfs.Truth(res.Index(1))
		f.Expected = f.Form
		f.Actual = "(not " + callText(f.Form, res.Index(2)) + ")"
	default:
		held = rtfs.Truth(res.Index(1))
		f.Expected, f.Actual = "a truthy value", show(res.Index(1))
	}
	if held {
		r.cur.Passed++
		return rtfs.True, nil
	}
	r.cur.Failures = append(r.cur.Failures, f)
	return rtfs.False, nil
}

// pattern is the regexp of a thrown-with-msg?.
func pattern(args []rtfs.Value) (*regexp.Regexp, error) {
	if len(args) < 7 {
		return nil, fmt.Errorf("thrown-with-msg?: expected (thrown-with-msg? Class #\"re\" body...)")
	}
	switch p := args[6].(type) {
	case *rtfs.Regex:
		return regexp.Compile(p.Pattern())
	case rtfs.String:
		return regexp.Compile(string(p))
	}
	return nil, fmt.Errorf("thrown-with-msg?: expected a regex, got %s", rtfs.Excerpt(args[6], 40))
}

// errMessage is the message of a caught error: its :message, else the
// value printed.
func errMessage(v rtfs.Value) string {
	if m, ok := v.(*rtfs.Map); ok {
		if s, ok := m.GetKeyword("message"); ok {
			if t, ok := s.(rtfs.String); ok {
				return string(t)
			}
		}
	}
	if s, ok := v.(rtfs.String); ok {
		return string(s)
	}
	return show(v)
}

// callText is a call form with its arguments' values: (< 1 2).
func callText(form string, args rtfs.Value) string {
	head := form
	if len(head) > 1 && head[0] == '(' {
		head = head[1:]
		for i, c := range head {
			if c == ' ' || c == ')' {
				head = head[:i]
				break
			}
		}
	}
	text := "(" + head
	if v, ok := args.(*rtfs.Vector); ok {
		for i := 0; i < v.Len(); i++ {
			text += " " + show(v.Index(i))
		}
	}
	return text + ")"
}

// maxShown bounds a value printed in a failure.
const maxShown = 400

func show(v rtfs.Value) string { return rtfs.Excerpt(v, maxShown) }

// capabilities are the host calls a test may make: run-processor's dry
// run, read-recording, and the log.
func (r *run) capabilities() *capabilities.Registry {
	reg := capabilities.NewRegistry()
	must := func(err error) {
		if err != nil {
			panic(err) // the registrations are fixed: a failure is a bug here
		}
	}
	must(reg.Register(capabilities.Capability{
		ID: "test.run-processor", Description: "Drive a processor over chunks as a stream would.",
		Input: &capabilities.Schema{Type: "map", Keys: []capabilities.Key{
			{Name: "processor", Type: "fn|symbol|string", Required: true, Doc: "the processor"},
			{Name: "initial-state", Type: "any", Doc: "the first state"},
			{Name: "chunks", Type: "vector|string", Required: true, Doc: "the chunks, or a recording's file name"},
			{Name: "stream-id", Type: "string", Doc: "the metadata's :stream-id"},
			{Name: "endpoint", Type: "string", Doc: "the metadata's :endpoint"},
		}},
		Handler: r.runProcessor,
	}))
	must(reg.Register(capabilities.Capability{
		ID: "test.read-recording", Description: "A recording's chunks as a processor receives them.",
		Input: &capabilities.Schema{Type: "string"},
		Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
			recs, err := r.readRecording(string(c.Args[0].(rtfs.String)))
			if err != nil {
				return capabilities.Answer{}, err
			}
			out := make([]rtfs.Value, len(recs))
			for i, rc := range recs {
				out[i] = provider.DecodeChunk(rc.Chunk.Data, rc.Chunk.Event)
			}
			return capabilities.Now(rtfs.NewVector(out...)), nil
		},
	}))
	must(reg.Register(capabilities.Capability{
		ID: capabilities.LogCapability, Description: "Print a line.",
		Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
			if r.o.Log != nil {
				var b bytes.Buffer
				for i, a := range c.Args {
					if i > 0 {
						b.WriteByte(' ')
					}
					if s, ok := a.(rtfs.String); ok {
						b.WriteString(string(s))
					} else {
						b.WriteString(a.String())
					}
				}
				b.WriteByte('\n')
				r.o.Log.Write(b.Bytes())
			}
			return capabilities.Now(rtfs.Nil), nil
		},
	}))
	return reg
}

// readRecording reads a recording named relative to the test file.
func (r *run) readRecording(name string) ([]replay.Recorded, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(r.file), path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return replay.Read(path, f)
}

// runProcessor serves (run-processor p state chunks opts): a dry run whose
// steps, result and status come back as
// {:steps [{:seq :chunk :state :action :output :error} ...] :result :status :reason :message}.
func (r *run) runProcessor(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	m := c.Args[0].(*rtfs.Map)
	get := func(k string) rtfs.Value {
		v, _ := capabilities.Field(m, k)
		return v
	}
	req := provider.DryRunRequest{
		Processor:    get("processor"),
		Globals:      c.Globals,
		InitialState: get("initial-state"),
		Limits:       rtfs.Limits{MaxSteps: r.o.steps()},
	}
	if s, ok := get("stream-id").(rtfs.String); ok {
		req.StreamID = string(s)
	}
	if s, ok := get("endpoint").(rtfs.String); ok {
		req.Endpoint = string(s)
	}
	switch ch := get("chunks").(type) {
	case rtfs.String:
		recs, err := r.readRecording(string(ch))
		if err != nil {
			return capabilities.Answer{}, err
		}
		for _, rc := range recs {
			req.Chunks = append(req.Chunks, provider.DryChunk{Data: rc.Chunk.Data, Event: rc.Chunk.Event,
				ID: rc.Chunk.ID, FD: rc.Chunk.FD, ReceivedAt: rc.Chunk.ReceivedAt})
		}
	case *rtfs.Vector:
		for i := 0; i < ch.Len(); i++ {
			req.Chunks = append(req.Chunks, provider.DryChunk{Value: ch.Index(i)})
		}
	}
	res, err := provider.DryRun(ctx, req)
	if err != nil {
		return capabilities.Answer{}, err
	}
	return capabilities.Now(DryResultValue(res)), nil
}

// DryResultValue is a dry run as RTFS sees it:
// {:steps [{:seq :chunk :state :action :output :error} ...] :result :status :reason :message},
// :action a keyword or nil, :error the message of a failed step, :status a
// keyword (:completed :cancelled :paused, or :failed when the processor
// failed on the last step's chunk), :message the stream's message (nil when
// it has none).
func DryResultValue(res *provider.DryResult) rtfs.Value {
	steps := make([]rtfs.Value, len(res.Steps))
	for i, s := range res.Steps {
		var act rtfs.Value = rtfs.Nil
		if s.Action != "" {
			act = rtfs.Keyword(s.Action)
		}
		out := s.Output
		if out == nil {
			out = rtfs.Nil
		}
		m := rtfs.MapOf(rtfs.Keyword("seq"), rtfs.Int(s.Seq), rtfs.Keyword("chunk"), s.Chunk,
			rtfs.Keyword("state"), s.State, rtfs.Keyword("action"), act, rtfs.Keyword("output"), out)
		if s.Err != nil {
			m = m.Assoc(rtfs.Keyword("error"), rtfs.String(s.Err.Error()))
		}
		steps[i] = m
	}
	result := res.Result
	if result == nil {
		result = rtfs.Nil
	}
	var msg rtfs.Value = rtfs.Nil
	if res.Message != "" {
		msg = rtfs.String(res.Message)
	}
	return rtfs.MapOf(rtfs.Keyword("steps"), rtfs.NewVector(steps...), rtfs.Keyword("result"), result,
		rtfs.Keyword("status"), rtfs.Keyword(string(res.Status)), rtfs.Keyword("reason"), rtfs.String(res.Reason),
		rtfs.Keyword("message"), msg)
}
