package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTransportSuite runs the transport conformance suite on :replay: a
// finite recording, an endless one written into a FIFO, a recording with a
// line that is not a chunk.
func TestTransportSuite(t *testing.T) { transporttest.Run(t, suiteHarness()) }

func writeRecording(t testing.TB, n int) string {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b)
	for i := range n {
		if err := w.Write(int64(i+1), transport.Chunk{Data: []byte(strconv.Itoa(i)), ID: fmt.Sprint("c", i), ReceivedAt: time.UnixMilli(int64(1000 + i))}); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(t.TempDir(), "rec.ndjson")
	if err := os.WriteFile(f, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func source(file string) transporttest.Source {
	return transporttest.Source{Transport: Transport{}, Spec: transport.Spec{StreamID: "suite", Config: &Config{File: file}}}
}

func suiteHarness() transporttest.Harness {
	return transporttest.Harness{
		Finite: func(t testing.TB, n int) transporttest.Source { return source(writeRecording(t, n)) },
		Endless: func(t testing.TB) transporttest.Source {
			fifo := filepath.Join(t.TempDir(), "endless.ndjson")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			var produced atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer f.Close()
				w := NewWriter(f)
				for i := 0; ctx.Err() == nil; i++ {
					if w.Write(int64(i+1), transport.Chunk{Data: []byte(strconv.Itoa(i)), ID: strconv.Itoa(i)}) != nil {
						return
					}
					produced.Add(1)
				}
			}()
			t.Cleanup(func() {
				cancel()
				// Unblock a writer still waiting for a reader, or one
				// blocked on a full pipe, by reading what is left.
				if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					buf := make([]byte, 64<<10)
					for {
						select {
						case <-done:
							r.Close()
							return
						default:
						}
						r.Read(buf)
						time.Sleep(time.Millisecond)
					}
				}
				<-done
			})
			return transporttest.Source{Transport: Transport{}, Spec: transport.Spec{StreamID: "suite", Config: &Config{File: fifo}},
				Produced: func() int { return int(produced.Load()) }}
		},
		Failing: func(t testing.TB) transporttest.Source {
			f := filepath.Join(t.TempDir(), "bad.ndjson")
			if err := os.WriteFile(f, []byte("{\"seq\":1,\"data\":1}\nnot a chunk\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return source(f)
		},
		Index: func(c transport.Chunk) (int, bool) {
			i, err := strconv.Atoi(string(c.Data))
			return i, err == nil
		},
	}
}

type sink struct{ got []transport.Chunk }

func (s *sink) Deliver(_ context.Context, c transport.Chunk) error {
	s.got = append(s.got, c)
	return nil
}

// TestRoundTrip: what Writer writes, Run delivers as it was given: JSON
// data as JSON (compacted), other data as text, with its id, event, fd and
// time; a chunk without an id gets its line's.
func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	in := []transport.Chunk{
		{Data: []byte(`{"a": [1, 2]}`), ID: "7", Event: "progress", ReceivedAt: time.UnixMilli(1500)},
		{Data: []byte("plain\ttext"), FD: "stderr", ReceivedAt: time.UnixMilli(1600)},
		{Data: []byte(`"a string"`), ID: "9", ReceivedAt: time.UnixMilli(1700)},
	}
	for i, c := range in {
		if err := w.Write(int64(i+1), c); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"seq":1,"id":"7","event":"progress","received-at-ms":1500,"data":{"a":[1,2]}}
{"seq":2,"fd":"stderr","received-at-ms":1600,"text":"plain\ttext"}
{"seq":3,"id":"9","received-at-ms":1700,"data":"a string"}
`
	if b.String() != want {
		t.Fatalf("recording:\n%s\nwant:\n%s", b.String(), want)
	}
	f := filepath.Join(t.TempDir(), "r.ndjson")
	if err := os.WriteFile(f, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := (Transport{}).Run(context.Background(), transport.Spec{Config: &Config{File: f}}, "", &s); err != nil {
		t.Fatal(err)
	}
	in[0].Data = []byte(`{"a":[1,2]}`)
	in[1].ID = "#2"
	for i := range in {
		g := s.got[i]
		if string(g.Data) != string(in[i].Data) || g.ID != in[i].ID || g.Event != in[i].Event || g.FD != in[i].FD || !g.ReceivedAt.Equal(in[i].ReceivedAt) {
			t.Errorf("chunk %d: %+v, want %+v", i, g, in[i])
		}
	}
	// Resumed after the second chunk's cursor: the third alone.
	s = sink{}
	if err := (Transport{}).Run(context.Background(), transport.Spec{Config: &Config{File: f}}, "#2", &s); err != nil || len(s.got) != 1 || s.got[0].ID != "9" {
		t.Errorf("resumed after #2: %v %+v", err, s.got)
	}
	// A cursor the recording does not hold: the source is lost.
	err := (Transport{}).Run(context.Background(), transport.Spec{Config: &Config{File: f}}, "nope", &sink{})
	if !errors.Is(err, transport.ErrSourceLost) {
		t.Errorf("unknown cursor: %v", err)
	}
}

// TestPace: :interval-ms spaces the chunks; :speed follows the recorded
// times, faster by its factor.
func TestPace(t *testing.T) {
	f := writeRecording(t, 3) // received 1 ms apart
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{File: f, Interval: 60 * time.Millisecond}, 120 * time.Millisecond},
		{Config{File: f, Speed: 0.02}, 100 * time.Millisecond},
	} {
		start := time.Now()
		if err := (Transport{}).Run(context.Background(), transport.Spec{Config: &tc.cfg}, "", &sink{}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < tc.want {
			t.Errorf("%+v took %s, want at least %s", tc.cfg, d, tc.want)
		}
	}
}

// TestConfigure: the start keys and their errors.
func TestConfigure(t *testing.T) {
	k := Kind()
	cfg, err := k.Configure(map[string]json.RawMessage{"file": json.RawMessage(`"r.ndjson"`), "speed": json.RawMessage(`2.5`)})
	if c, ok := cfg.(*Config); err != nil || !ok || c.File != "r.ndjson" || c.Speed != 2.5 || c.Path() != "r.ndjson" {
		t.Errorf("%+v %v", cfg, err)
	}
	for _, tc := range []struct {
		keys map[string]string
		want string
	}{
		{map[string]string{}, "key :file: required"},
		{map[string]string{"file": `""`}, "key :file: expected a file name"},
		{map[string]string{"file": `"f"`, "interval-ms": `-1`}, "key :interval-ms: expected a non-negative int"},
		{map[string]string{"file": `"f"`, "speed": `0`}, "key :speed: expected a positive number"},
		{map[string]string{"file": `"f"`, "speed": `1`, "interval-ms": `5`}, "not both"},
	} {
		keys := map[string]json.RawMessage{}
		for k, v := range tc.keys {
			keys[k] = json.RawMessage(v)
		}
		if _, err := k.Configure(keys); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.keys, err, tc.want)
		}
	}
}
