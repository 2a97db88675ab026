package mcpserver

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// jsonOnly serves POSTs whose Accept lists application/json but not
// text/event-stream, which go-sdk would refuse: it lets next answer over
// SSE, telling the tool handlers (headerJSONOnly) that no notification
// would reach the client so that the call sends no progress, and returns
// the one JSON-RPC response of that stream as application/json. Other
// requests go to next unchanged.
func jsonOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !envelopeOf(r).jsonOnly {
			next.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Accept", "application/json, text/event-stream")
		r2.Header.Set(headerJSONOnly, "1")
		rec := &recorder{header: http.Header{}}
		next.ServeHTTP(rec, r2)
		rec.replay(w)
	})
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
