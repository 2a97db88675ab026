package localserver

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Bounds on request parameters, so that a typo cannot ask the server for
// terabytes or a week-long pause.
const (
	maxLimit    = 1_000_000_000
	maxBytes    = 256 << 20
	maxMillis   = 10 * 60 * 1000
	maxHTTPCode = 599
)

// streamParams is one request for a stream, from a query string (SSE) or a
// tool's arguments (MCP).
type streamParams struct {
	limit    int
	interval time.Duration
	size     int
	retry    time.Duration // SSE only: a retry: field sent before the first event
	faults   Faults
}

// lookupFunc returns the raw value of a parameter and whether it was given.
type lookupFunc func(name string) (string, bool)

// queryLookup adapts a URL query; the first value of a parameter wins.
func queryLookup(q url.Values) lookupFunc {
	return func(name string) (string, bool) {
		v, ok := q[name]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
}

// parseParams reads the stream parameters for d, starting from the server's
// default faults. Unknown parameters are ignored: the SSE transport forwards a
// stream's whole :config as the query string.
func parseParams(d *dataset, defaults Faults, get lookupFunc) (streamParams, error) {
	p := streamParams{limit: d.defaultLimit, interval: d.defaultInterval, faults: defaults}
	var err error
	ints := []struct {
		name string
		max  int
		set  func(int)
	}{
		{"limit", maxLimit, func(v int) { p.limit = v }},
		{"interval_ms", maxMillis, func(v int) { p.interval = time.Duration(v) * time.Millisecond }},
		{"size", maxBytes, func(v int) { p.size = v }},
		{"retry_ms", maxMillis, func(v int) { p.retry = time.Duration(v) * time.Millisecond }},
	}
	for _, f := range ints {
		if err = parseInt(get, f.name, f.max, f.set); err != nil {
			return p, err
		}
	}
	if err = parseFaults(&p.faults, get); err != nil {
		return p, err
	}
	return p, nil
}

// parseInt sets a non-negative integer parameter if it is present.
func parseInt(get lookupFunc, name string, max int, set func(int)) error {
	raw, ok := get(name)
	if !ok {
		return nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil {
		return fmt.Errorf("parameter %s=%q: not an integer", name, raw)
	}
	if v < 0 || v > max {
		return fmt.Errorf("parameter %s=%d: out of range 0..%d", name, v, max)
	}
	set(v)
	return nil
}

// parseFaults overrides f with the misbehaviour parameters present.
func parseFaults(f *Faults, get lookupFunc) error {
	ints := []struct {
		name string
		max  int
		set  func(int)
	}{
		{"fail", maxHTTPCode, func(v int) { f.Fail = v }},
		{"fail_times", maxLimit, func(v int) { f.FailTimes = v }},
		{"drop_after", maxLimit, func(v int) { f.Drop, f.DropAfter = true, v }},
		{"drop_times", maxLimit, func(v int) { f.DropTimes = v }},
		{"stall_ms", maxMillis, func(v int) { f.Stall = time.Duration(v) * time.Millisecond }},
		{"stall_after", maxLimit, func(v int) { f.StallAfter = v }},
		{"stall_times", maxLimit, func(v int) { f.StallTimes = v }},
		{"oversized", maxBytes, func(v int) { f.Oversized = v }},
	}
	for _, p := range ints {
		if err := parseInt(get, p.name, p.max, p.set); err != nil {
			return err
		}
	}
	if f.Fail != 0 && (f.Fail < 400 || f.Fail > maxHTTPCode) {
		return fmt.Errorf("parameter fail=%d: want an HTTP error status 400..599", f.Fail)
	}
	return nil
}

// canonicalKey builds the fault-counter key from an endpoint and its
// parameters, sorted so that parameter order does not matter.
func canonicalKey(endpoint string, params map[string]string) string {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(endpoint)
	for i, n := range names {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(n))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(params[n]))
	}
	return b.String()
}
