package localserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixedNow is the clock of servers started by startServer, so that chunk
// bytes are reproducible.
func fixedNow() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC) }

// startServer starts a server on a free loopback port and closes it, and the
// returned client's idle connections, when the test ends.
func startServer(t testing.TB, opts Options) (*Server, *http.Client) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	s := New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("Start: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, client
}

type sseEvent struct {
	id, event, data, retry string
}

// readEvents parses an SSE body until it ends. A clean end returns a nil
// error; a broken connection returns the read error.
func readEvents(r io.Reader) ([]sseEvent, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var evs []sseEvent
	var cur sseEvent
	has := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" && !has {
				return evs, nil
			}
			return evs, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if has {
				evs = append(evs, cur)
			}
			cur, has = sseEvent{}, false
			continue
		}
		name, value, _ := strings.Cut(line, ": ")
		has = true
		switch name {
		case "id":
			cur.id = value
		case "event":
			cur.event = value
		case "data":
			cur.data = value
		case "retry":
			cur.retry = value
		}
	}
}

// get sends a GET with optional headers (name, value pairs) and returns the
// response; the caller closes its body.
func get(t testing.TB, c *http.Client, url string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

// stream GETs an SSE url and returns its events and the read error.
func stream(t testing.TB, c *http.Client, url string, headers ...string) ([]sseEvent, error) {
	t.Helper()
	resp := get(t, c, url, headers...)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	return readEvents(resp.Body)
}

// status GETs url and returns the status code and body.
func status(t testing.TB, c *http.Client, url string, headers ...string) (int, string) {
	t.Helper()
	resp := get(t, c, url, headers...)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// envelope is the data of a chunk event.
type envelope struct {
	Endpoint    string          `json:"endpoint"`
	Seq         int             `json:"seq"`
	Chunk       json.RawMessage `json:"chunk"`
	GeneratedAt string          `json:"generated_at"`
	Trace       struct {
		Source  string `json:"source"`
		Version string `json:"version"`
	} `json:"trace"`
	OversizedPad string `json:"oversized_pad"`
}

func decodeEnvelope(t testing.TB, data string) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		t.Fatalf("chunk data is not the envelope JSON: %v\n%s", err, data)
	}
	return e
}

type summary struct {
	Endpoint     string `json:"endpoint"`
	Status       string `json:"status"`
	ChunksSent   int    `json:"chunks_sent"`
	ResumedAfter int    `json:"resumed_after"`
}

// checkStream asserts that evs are chunk events with ids first..last, in
// order, followed by the terminal status event, and returns the envelopes.
func checkStream(t testing.TB, evs []sseEvent, endpoint string, first, last int) []envelope {
	t.Helper()
	want := last - first + 1
	if len(evs) != want+1 {
		t.Fatalf("got %d events, want %d chunks and a status event: %+v", len(evs), want, evs)
	}
	envs := make([]envelope, 0, want)
	for i, ev := range evs[:want] {
		seq := first + i
		if ev.event != "chunk" || ev.id != itoa(seq) {
			t.Fatalf("event %d: event %q id %q, want chunk id %d", i, ev.event, ev.id, seq)
		}
		e := decodeEnvelope(t, ev.data)
		if e.Endpoint != endpoint || e.Seq != seq {
			t.Fatalf("event %d: endpoint %q seq %d, want %q %d", i, e.Endpoint, e.Seq, endpoint, seq)
		}
		envs = append(envs, e)
	}
	end := evs[want]
	if end.event != "status" || end.id != "" {
		t.Fatalf("last event: %+v, want an id-less status event", end)
	}
	var sum summary
	if err := json.Unmarshal([]byte(end.data), &sum); err != nil {
		t.Fatalf("status data: %v: %s", err, end.data)
	}
	if sum.Endpoint != endpoint || sum.Status != "complete" || sum.ChunksSent != last || sum.ResumedAfter != first-1 {
		t.Fatalf("status %+v, want endpoint %s complete chunks_sent %d resumed_after %d", sum, endpoint, last, first-1)
	}
	return envs
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
