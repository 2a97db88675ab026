package mcpserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// jsonOnly serves POSTs whose Accept lists application/json but not
// text/event-stream, which go-sdk would refuse: it removes the call's
// progress token (so no notification is generated), lets next answer over
// SSE, and returns the one JSON-RPC response of that stream as
// application/json. Other requests go to next unchanged.
func jsonOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !acceptsJSONOnly(r.Header.Values("Accept")) {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Accept", "application/json, text/event-stream")
		setBody(r2, withoutProgressToken(body))
		rec := &recorder{header: http.Header{}}
		next.ServeHTTP(rec, r2)
		rec.replay(w)
	})
}

// acceptsJSONOnly reports whether an Accept header admits application/json
// but not text/event-stream.
func acceptsJSONOnly(values []string) bool {
	jsonOK, sseOK := false, false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*", "*/*":
				sseOK = true
			}
		}
	}
	return jsonOK && !sseOK
}

// withoutProgressToken returns a JSON-RPC tools/call body without
// params._meta.progressToken; any other body is returned as it is.
func withoutProgressToken(body []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || string(msg["method"]) != `"tools/call"` {
		return body
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return body
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil || meta["progressToken"] == nil {
		return body
	}
	delete(meta, "progressToken")
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return body
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return body
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return body
	}
	return out
}

// A recorder is an http.ResponseWriter that keeps the response for replay.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
}

func (rec *recorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}

// Flush implements http.Flusher; the recorder keeps everything anyway.
func (rec *recorder) Flush() {}

// replay writes the recorded response to w: an SSE response becomes its
// JSON-RPC response as application/json; anything else is copied.
func (rec *recorder) replay(w http.ResponseWriter) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	if !strings.HasPrefix(rec.header.Get("Content-Type"), "text/event-stream") {
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
		return
	}
	resp := responseOf(rec.body.Bytes())
	w.Header().Del("Connection")
	if resp == nil {
		http.Error(w, "the MCP session ended before the response", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
	w.WriteHeader(rec.status)
	_, _ = w.Write(resp)
}

// responseOf returns the data of the first SSE event in stream that holds a
// JSON-RPC response (an object with an id and a result or an error).
func responseOf(stream []byte) []byte {
	for _, block := range bytes.Split(bytes.ReplaceAll(stream, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var data [][]byte
		for _, line := range bytes.Split(block, []byte("\n")) {
			if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(rest, []byte(" ")))
			}
		}
		payload := bytes.Join(data, []byte("\n"))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(payload, &msg) == nil && msg.ID != nil && (msg.Result != nil || msg.Error != nil) {
			return payload
		}
	}
	return nil
}
