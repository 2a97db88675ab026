package localserver

import (
	"sort"
	"strconv"
	"time"
)

// A dataset is one endpoint the server streams. Its records are generated on
// demand from seq (1-based), so any limit can be served without storing the
// stream, and a replay yields the same bytes for the same seq.
type dataset struct {
	name        string
	description string
	fields      []string
	// defaultLimit is the number of chunks sent when the request names none.
	defaultLimit int
	// defaultInterval is the pause before each chunk when interval_ms is absent.
	defaultInterval time.Duration
	// appendRecord appends the chunk object for seq without its closing brace,
	// so that the caller can add padding before closing it; dec is seq in
	// decimal.
	appendRecord func(dst []byte, seq int, dec []byte) []byte
}

type city struct {
	name       string
	tempTenths int
	humidity   int
	conditions string
}

// weatherRecords returns the appendRecord of weather.monitor.v1: it cycles
// through six cities; each later round shifts the temperature and humidity a
// little so readings differ between rounds.
func weatherRecords() func([]byte, int, []byte) []byte {
	cities := [...]city{
		{"Paris", 184, 62, "cloudy"},
		{"Tokyo", 231, 70, "rain"},
		{"Nairobi", 245, 48, "sunny"},
		{"Reykjavik", 52, 81, "snow"},
		{"Lima", 197, 77, "fog"},
		{"Sydney", 212, 55, "windy"},
	}
	return func(dst []byte, seq int, _ []byte) []byte {
		i := seq - 1
		c := cities[i%len(cities)]
		round := i / len(cities)
		dst = append(dst, `{"city":"`...)
		dst = append(dst, c.name...)
		dst = append(dst, `","temperature_c":`...)
		dst = appendTenths(dst, c.tempTenths+(round%5)*3)
		dst = append(dst, `,"humidity_pct":`...)
		dst = strconv.AppendInt(dst, int64(c.humidity+round%4), 10)
		dst = append(dst, `,"conditions":"`...)
		dst = append(dst, c.conditions...)
		return append(dst, '"')
	}
}

// appendTenths writes n/10 with exactly one decimal, e.g. 184 -> 18.4. The
// readings' temperatures are positive, so n >= 0.
func appendTenths(dst []byte, n int) []byte {
	dst = strconv.AppendInt(dst, int64(n/10), 10)
	dst = append(dst, '.')
	return strconv.AppendInt(dst, int64(n%10), 10)
}

// appendCycled returns an appendRecord that cycles through records and adds
// a "rank" field carrying seq.
func appendCycled(records []string) func([]byte, int, []byte) []byte {
	return func(dst []byte, seq int, dec []byte) []byte {
		dst = append(dst, records[(seq-1)%len(records)]...)
		dst = append(dst, `,"rank":`...)
		return append(dst, dec...)
	}
}

func appendCounter(dst []byte, _ int, dec []byte) []byte {
	dst = append(dst, `{"n":`...)
	return append(dst, dec...)
}

const defaultDatasetInterval = 150 * time.Millisecond

// newCatalog returns the datasets by endpoint name. It is built per Server, so
// no package-level state is shared between servers.
func newCatalog() map[string]*dataset {
	docs := []string{
		`{"doc_id":"rtfs-streaming-basics","title":"Streaming basics","snippet":"A processor receives state, chunk and metadata and returns a directive map.","score":0.93`,
		`{"doc_id":"mcp-streamable-http","title":"MCP Streamable HTTP","snippet":"Progress notifications flow on the response stream of tools/call.","score":0.88`,
	}
	news := []string{
		`{"headline":"Runtime adds resumable streams","source":"rtfs-weekly","summary":"Streams now resume from their cursor after a crash."`,
		`{"headline":"Backpressure explained","source":"systems-digest","summary":"A bounded queue makes a slow consumer slow down its source."`,
		`{"headline":"Loopback servers and origins","source":"security-notes","summary":"Local servers should check Origin to stop DNS rebinding."`,
	}
	list := []*dataset{
		{
			name:            "weather.monitor.v1",
			description:     "weather readings cycling through six cities",
			fields:          []string{"city", "temperature_c", "humidity_pct", "conditions"},
			defaultLimit:    6,
			defaultInterval: defaultDatasetInterval,
			appendRecord:    weatherRecords(),
		},
		{
			name:            "docs.search.v1",
			description:     "documentation search hits",
			fields:          []string{"doc_id", "title", "snippet", "score", "rank"},
			defaultLimit:    len(docs),
			defaultInterval: defaultDatasetInterval,
			appendRecord:    appendCycled(docs),
		},
		{
			name:            "news.digest.v1",
			description:     "news digest items",
			fields:          []string{"headline", "source", "summary", "rank"},
			defaultLimit:    len(news),
			defaultInterval: defaultDatasetInterval,
			appendRecord:    appendCycled(news),
		},
		{
			name:            "counter.v1",
			description:     "generator of integers n = 1, 2, ... for load tests; size pads each chunk",
			fields:          []string{"n", "pad"},
			defaultLimit:    100,
			defaultInterval: 0,
			appendRecord:    appendCounter,
		},
	}
	m := make(map[string]*dataset, len(list))
	for _, d := range list {
		m[d.name] = d
	}
	return m
}

// catalogNames returns the endpoint names in sorted order.
func catalogNames(c map[string]*dataset) []string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
