package localserver

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
)

// errDropped is what a dropped response's writer returns to the go-sdk
// handler still writing to it.
var errDropped = errors.New("localserver: connection dropped by the drop_after fault")

// progressMethod marks an SSE event carrying a progress notification.
const progressMethod = `"notifications/progress"`

// mcpFaults applies the faults named in the MCP endpoint URL's query (for
// example /mcp?drop_after=3&drop_times=1) around a go-sdk handler: fail
// answers the HTTP request with that status, and drop_after closes the
// connection of a dropMethod response after that many progress events.
// Requests without a query pass straight through.
func (s *Server) mcpFaults(next http.Handler, dropMethod string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		var f Faults
		if err := parseFaults(&f, queryLookup(q)); err != nil {
			httpError(w, http.StatusBadRequest, "%s: %v", r.URL.Path, err)
			return
		}
		if f.Drop && f.DropAfter == 0 {
			httpError(w, http.StatusBadRequest, "%s: drop_after=0: on MCP routes drop_after counts progress events and must be at least 1", r.URL.Path)
			return
		}
		key := "mcp " + r.URL.Path + "?" + q.Encode()
		if s.budget.failFires(f, key) {
			s.injectFailure(w, f.Fail, r.URL.Path)
			return
		}
		if f.Drop && r.Method == dropMethod {
			w = &dropWriter{ResponseWriter: w, rc: http.NewResponseController(w), after: f.DropAfter,
				fires: func() bool { return s.budget.take("drop", key, f.DropTimes) }, s: s}
		}
		next.ServeHTTP(w, r)
	})
}

// dropWriter counts the progress events written to an SSE response and drops
// the connection after the configured number. It is used by one handler
// goroutine at a time, as an http.ResponseWriter is.
type dropWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	after   int
	fires   func() bool
	s       *Server
	seen    int
	dropped bool
}

func (d *dropWriter) Write(p []byte) (int, error) {
	if d.dropped {
		return 0, errDropped
	}
	n, err := d.ResponseWriter.Write(p)
	if err != nil || !strings.HasPrefix(d.Header().Get("Content-Type"), "text/event-stream") {
		return n, err
	}
	if bytes.Contains(p, []byte(progressMethod)) {
		d.seen++
		if d.seen == d.after && d.fires() {
			d.drop()
		}
	}
	return n, nil
}

// FlushError lets http.ResponseController flush through the wrapper.
func (d *dropWriter) FlushError() error {
	if d.dropped {
		return errDropped
	}
	return d.rc.Flush()
}

// drop flushes what was written and closes the connection.
func (d *dropWriter) drop() {
	d.dropped = true
	d.s.stats.drops.Add(1)
	_ = d.rc.Flush() // best effort: the point is to break the connection
	if conn, _, err := d.rc.Hijack(); err == nil {
		conn.Close()
	}
}
