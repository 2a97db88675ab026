package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rtfshost/rtfshost/internal/jsontext"
)

// cursorPrefix starts every cursor this package writes; the digit is the
// format version.
const cursorPrefix = "mcp1."

// Cursor kinds.
const (
	kindStreamable = "http"
	kindLegacy     = "sse"
)

// callState is what a chunk's cursor records about its call: enough to resume
// it by GET with Last-Event-ID and to drop progress already delivered.
type callState struct {
	Kind        string  `json:"k"`
	Session     string  `json:"s,omitempty"`
	Proto       string  `json:"p,omitempty"`
	Req         int     `json:"r"`
	Token       string  `json:"t"`
	Event       string  `json:"e,omitempty"`
	Progress    float64 `json:"g,omitempty"`
	HasProgress bool    `json:"h,omitempty"`
	Chunks      int64   `json:"n,omitempty"`
	Done        bool    `json:"d,omitempty"`
	// Task is the id of the task the tool call became (the server answered
	// with a task): a restart polls it instead of calling the tool again.
	Task string `json:"tk,omitempty"`
}

// encode returns the cursor for st. It writes the same JSON that
// encoding/json would, by hand, because it runs once per chunk.
func (st *callState) encode() string {
	return string(st.appendCursor(nil))
}

// appendCursor appends the cursor for st to dst.
func (st *callState) appendCursor(dst []byte) []byte {
	var js [256]byte
	b := append(js[:0], `{"k":`...)
	b = jsontext.AppendString(b, st.Kind)
	if st.Session != "" {
		b = jsontext.AppendString(append(b, `,"s":`...), st.Session)
	}
	if st.Proto != "" {
		b = jsontext.AppendString(append(b, `,"p":`...), st.Proto)
	}
	b = strconv.AppendInt(append(b, `,"r":`...), int64(st.Req), 10)
	b = jsontext.AppendString(append(b, `,"t":`...), st.Token)
	if st.Event != "" {
		b = jsontext.AppendString(append(b, `,"e":`...), st.Event)
	}
	if st.Progress != 0 {
		b = strconv.AppendFloat(append(b, `,"g":`...), st.Progress, 'g', -1, 64)
	}
	if st.HasProgress {
		b = append(b, `,"h":true`...)
	}
	if st.Chunks != 0 {
		b = strconv.AppendInt(append(b, `,"n":`...), st.Chunks, 10)
	}
	if st.Done {
		b = append(b, `,"d":true`...)
	}
	if st.Task != "" {
		b = jsontext.AppendString(append(b, `,"tk":`...), st.Task)
	}
	b = append(b, '}')
	dst = append(dst, cursorPrefix...)
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

// decodeCursor parses a cursor written by encode for the given kind.
func decodeCursor(cursor, kind string) (callState, error) {
	var st callState
	rest, ok := strings.CutPrefix(cursor, cursorPrefix)
	if !ok {
		return st, fmt.Errorf("cursor %.24q was not written by the MCP transport (want prefix %q)", cursor, cursorPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return st, fmt.Errorf("cursor is not valid base64url: %w", err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("cursor payload is malformed: %w", err)
	}
	if st.Kind != kind {
		return st, fmt.Errorf("cursor belongs to transport kind %q, not %q", st.Kind, kind)
	}
	if st.Token == "" || st.Req == 0 {
		return st, fmt.Errorf("cursor lacks the request id or progress token")
	}
	return st, nil
}
