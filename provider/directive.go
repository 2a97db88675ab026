package provider

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// An action is a directive of DESIGN §4.2.
type action uint8

const (
	actNone action = iota // no directive named
	actContinue
	actPause
	actResume
	actCancel
	actComplete
)

const validActions = ":continue :pause :resume :cancel :complete"

// parseAction reads a directive from a keyword or a string. ok is false for
// any other value, or an unknown name.
func parseAction(v rtfs.Value) (action, bool) {
	var name string
	switch v := v.(type) {
	case rtfs.Keyword:
		name = string(v)
	case rtfs.String:
		name = string(v)
	default:
		return actNone, false
	}
	switch name {
	case "continue":
		return actContinue, true
	case "pause":
		return actPause, true
	case "resume":
		return actResume, true
	case "cancel":
		return actCancel, true
	case "complete":
		return actComplete, true
	}
	return actNone, false
}

// controlAction returns the directive a control chunk carries: a map chunk
// whose :action or "action" key holds one of the five directives, as a
// keyword or a string. Any other chunk gives actNone.
func controlAction(chunk rtfs.Value) action {
	m, ok := chunk.(*rtfs.Map)
	if !ok {
		return actNone
	}
	v, ok := m.GetKeyword("action")
	if !ok {
		if v, ok = m.Get(rtfs.String("action")); !ok {
			return actNone
		}
	}
	a, _ := parseAction(v)
	return a
}

// decodeChunk turns a chunk's data into an RTFS value: JSON becomes a value
// with keyword keys, anything else a string. For MCP progress chunks a JSON
// :message is decoded in place. dec is the stream's decoder, which reuses the
// keys it has seen (one allocation less per key and chunk).
func decodeChunk(dec *rtfs.JSONDecoder, c transport.Chunk) rtfs.Value {
	if !looksLikeJSON(c.Data) {
		return rtfs.String(c.Data)
	}
	v, err := dec.Decode(c.Data)
	if err != nil {
		return rtfs.String(c.Data)
	}
	if c.Event == "progress" {
		v = decodeMessage(dec, v)
	}
	return v
}

// looksLikeJSON is a cheap filter that spares FromJSON the plain-text chunks.
func looksLikeJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[', '"', '-', 't', 'f', 'n':
			return true
		}
		return c >= '0' && c <= '9'
	}
	return false
}

func decodeMessage(dec *rtfs.JSONDecoder, v rtfs.Value) rtfs.Value {
	m, ok := v.(*rtfs.Map)
	if !ok {
		return v
	}
	msg, ok := m.GetKeyword("message")
	s, isStr := msg.(rtfs.String)
	if !ok || !isStr || !json.Valid([]byte(s)) || !looksLikeJSON([]byte(s)) {
		return v
	}
	inner, err := dec.Decode([]byte(s))
	if err != nil {
		return v
	}
	return m.Assoc(rtfs.Keyword("message"), inner)
}

// resumeAfter reads :config {:resume-after-ms n} from a processor result.
// ok is false when there is none; an invalid value is an error.
func resumeAfter(res *rtfs.Map) (time.Duration, bool, error) {
	cfg, ok := res.GetKeyword("config")
	if !ok || cfg == rtfs.Nil {
		return 0, false, nil
	}
	cm, isMap := cfg.(*rtfs.Map)
	if !isMap {
		return 0, false, fmt.Errorf("processor result :config must be a map, got %s", kindOf(cfg))
	}
	v, ok := cm.GetKeyword("resume-after-ms")
	if !ok || v == rtfs.Nil {
		return 0, false, nil
	}
	n, isInt := v.(rtfs.Int)
	if !isInt || n < 0 {
		return 0, false, fmt.Errorf("processor result :config :resume-after-ms must be a non-negative int, got %s", kindOf(v))
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

// kindOf names a value for messages: its kind, and its printed form when short.
func kindOf(v rtfs.Value) string {
	if v == nil {
		return "nothing"
	}
	s := v.String()
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	if v.Kind().String() == "nil" {
		return "nil"
	}
	return v.Kind().String() + " " + s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
