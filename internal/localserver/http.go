package localserver

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// httpError answers with status and a one-line text message prefixed with
// "localserver: ".
func httpError(w http.ResponseWriter, status int, format string, args ...any) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, "localserver: "+format+"\n", args...)
}

// writeJSON answers with status and v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

// loopbackOrigin reports whether an Origin header names a loopback origin
// (http or https, host localhost or a loopback IP, any port).
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" && u.Path != "/" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// datasetInfo describes one endpoint in GET /datasets.
type datasetInfo struct {
	Endpoint          string   `json:"endpoint"`
	Description       string   `json:"description"`
	Fields            []string `json:"fields"`
	DefaultLimit      int      `json:"default_limit"`
	DefaultIntervalMS int64    `json:"default_interval_ms"`
	SSEPath           string   `json:"sse_path"`
}

func (s *Server) serveDatasets(w http.ResponseWriter, _ *http.Request) {
	names := catalogNames(s.catalog)
	out := make([]datasetInfo, 0, len(names))
	for _, n := range names {
		d := s.catalog[n]
		out = append(out, datasetInfo{
			Endpoint: n, Description: d.description, Fields: d.fields,
			DefaultLimit: d.defaultLimit, DefaultIntervalMS: d.defaultInterval.Milliseconds(),
			SSEPath: "/sse/" + n,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// serveDataset answers GET /datasets/<endpoint>?limit=&size= with the chunk
// envelopes as one JSON array, for inspection.
func (s *Server) serveDataset(w http.ResponseWriter, r *http.Request) {
	d, ok := s.lookup(w, r.PathValue("endpoint"))
	if !ok {
		return
	}
	p, err := parseParams(d, Faults{}, queryLookup(r.URL.Query()))
	if err != nil {
		httpError(w, http.StatusBadRequest, "%s: %v", r.URL.Path, err)
		return
	}
	const maxListed = 10_000
	if p.limit > maxListed {
		httpError(w, http.StatusBadRequest, "%s: limit=%d: at most %d chunks can be listed; stream them from /sse/%s",
			r.URL.Path, p.limit, maxListed, d.name)
		return
	}
	enc := newEncoder(d, p.size, s.now)
	buf := []byte{'['}
	for seq := 1; seq <= p.limit; seq++ {
		if seq > 1 {
			buf = append(buf, ',')
		}
		buf = enc.appendData(buf, seq, 0)
	}
	buf = append(buf, "]\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf) // the client may be gone; nothing to do about it
}
