package provider

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// TestHostCallIdentity: a processor's host calls carry the chunk that made
// them (its seq and its source's id) and their place among that chunk's
// calls, and a chunk processed again (here, a failed stream's Resume
// retrying it) makes its calls with the same identity, so a handler can
// act once per key.
func TestHostCallIdentity(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	failOnce := true
	reg := capabilities.NewRegistry()
	must(t, reg.Register(capabilities.Capability{ID: "test.charge", Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, c.Key()+"@"+c.ChunkID)
		if c.Seq == 2 && c.Index == 1 && failOnce {
			failOnce = false
			return capabilities.Answer{}, errors.New("payment service unavailable")
		}
		return capabilities.Now(rtfs.Nil), nil
	}}))
	const src = `
(defn proc [state chunk meta]
  (call :test.charge {:n (:n chunk)})
  (call :test.charge {:n (:n chunk)})
  {:state (+ state (:n chunk))})`
	f := newFixture(t, Options{Store: persistence.NewMemStore(), Capabilities: reg})
	id := f.start(StartRequest{StreamID: "pay", Processor: rtfs.Symbol("proc"), Globals: compileGlobals(t, src), InitialState: rtfs.Int(0)})
	for n, chunkID := range []string{"a", "b", "c"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		must(t, f.mock.Source(id).Send(ctx, transport.Chunk{Data: []byte(`{"n":` + stream.Itoa(int64(n+1)) + `}`), ID: chunkID}))
		cancel()
	}
	f.waitState(id, StateFailed)
	if _, err := f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	f.processed(id, 3)
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"pay/1/0@a", "pay/1/1@a",
		"pay/2/0@b", "pay/2/1@b", // the second call fails: the stream is held
		"pay/2/0@b", "pay/2/1@b", // Resume processes chunk 2 again: the same keys
		"pay/3/0@c", "pay/3/1@c",
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("calls\n%v\nwant\n%v", keys, want)
	}
	if k := (&capabilities.Call{ID: "x"}).Key(); k != "" {
		t.Errorf("a program's call has key %q, want none", k)
	}
}
