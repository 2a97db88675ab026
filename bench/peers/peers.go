package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"
	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	// The pure components register the mapping processor.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)

// Chunk is the data of every chunk, as the provider's benchmarks send it.
var Chunk = []byte(`{"temp":21.5,"ts":12345,"sensor":"a"}`)

// Window is how many readings the anchor processor keeps before it starts
// over.
const Window = 100

// Mapping is the Bloblang of the Benthos pipeline: it parses the chunk (the
// mapping reads `this`, the message parsed as JSON) and builds the
// processor's per-chunk output document. Bloblang keeps no state from one
// message to the next, so the readings (the anchor processor's state) are
// kept by the consumer, which appends each temp and counts.
const Mapping = `root.temp = this.temp
root.sensor = this.sensor
root.ts = this.ts`

// Readings is the anchor processor's state in Go, for the Benthos consumer.
// It is not safe for concurrent use.
type Readings struct {
	list      []float64
	Processed int
	LastCount int
}

// Add appends a reading, starting over at Window, and returns the count
// output.
func (r *Readings) Add(t float64) int {
	r.list = append(r.list, t)
	n := len(r.list)
	if n >= Window {
		r.list = r.list[:0]
	}
	r.Processed++
	r.LastCount = n
	return n
}

// Benthos is a built Benthos stream: the producer func, the stream and the
// consumer's state. Build one with NewBenthos, call Run, then Send batches.
type Benthos struct {
	stream  *service.Stream
	produce service.MessageBatchHandlerFunc

	mu    sync.Mutex
	state Readings
}

// NewBenthos builds the pipeline: batched producer func → mapping → batched
// consumer func, one pipeline thread (the provider runs one worker per
// stream), logs off.
func NewBenthos() (*Benthos, error) {
	b := &Benthos{}
	sb := service.NewStreamBuilder()
	if err := sb.SetLoggerYAML("level: none"); err != nil {
		return nil, fmt.Errorf("benthos logger: %w", err)
	}
	sb.SetThreads(1)
	produce, err := sb.AddBatchProducerFunc()
	if err != nil {
		return nil, fmt.Errorf("benthos producer: %w", err)
	}
	b.produce = produce
	if err := sb.AddProcessorYAML("mapping: |\n  " + indent(Mapping)); err != nil {
		return nil, fmt.Errorf("benthos mapping: %w", err)
	}
	err = sb.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, m := range batch {
			v, err := m.AsStructured()
			if err != nil {
				return err
			}
			doc, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("mapping output %T, want an object", v)
			}
			t, err := toFloat(doc["temp"])
			if err != nil {
				return err
			}
			b.state.Add(t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("benthos consumer: %w", err)
	}
	if b.stream, err = sb.Build(); err != nil {
		return nil, fmt.Errorf("benthos build: %w", err)
	}
	return b, nil
}

func indent(s string) string {
	out := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if s[i] == '\n' {
			out = append(out, ' ', ' ')
		}
	}
	return string(out)
}

func toFloat(v any) (float64, error) {
	switch v := v.(type) {
	case float64:
		return v, nil
	case int64:
		return float64(v), nil
	case interface{ Float64() (float64, error) }:
		return v.Float64()
	}
	return 0, fmt.Errorf("temp is %T, want a number", v)
}

// Run runs the stream until ctx ends or Stop; it returns the stream's error.
func (b *Benthos) Run(ctx context.Context) error {
	err := b.stream.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Send produces one batch of n chunks and waits until the consumer has
// taken all of them.
func (b *Benthos) Send(ctx context.Context, n int) error {
	batch := make(service.MessageBatch, n)
	for i := range batch {
		batch[i] = service.NewMessage(Chunk)
	}
	return b.produce(ctx, batch)
}

// Processed returns how many chunks the consumer counted.
func (b *Benthos) Processed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state.Processed
}

// Stop stops the stream, waiting at most ctx.
func (b *Benthos) Stop(ctx context.Context) error { return b.stream.Stop(ctx) }

// StarlarkSource is the anchor processor in Starlark: the same logic as the
// RTFS one, with Starlark's mutable list as the readings.
const StarlarkSource = `
def proc(state, chunk, meta):
    rs = state["readings"]
    rs.append(chunk["temp"])
    n = len(rs)
    if n < 100:
        return {"state": state, "action": "continue", "output": n}
    return {"state": {"readings": []}, "action": "continue", "output": n}
`

// Starlark is the compiled Starlark processor with its thread and the
// json.decode builtin. It is not safe for concurrent use.
type Starlark struct {
	thread *starlark.Thread
	proc   starlark.Callable
	decode starlark.Callable
	state  starlark.Value
	args   starlark.Tuple
	argv   starlark.Tuple
	// Processed counts the calls.
	Processed int
	// LastCount is the last output.
	LastCount int
}

// NewStarlark compiles StarlarkSource.
func NewStarlark() (*Starlark, error) {
	th := &starlark.Thread{Name: "peer"}
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{}, th, "proc.star", StarlarkSource, nil)
	if err != nil {
		return nil, fmt.Errorf("starlark: %w", err)
	}
	proc, ok := globals["proc"].(starlark.Callable)
	if !ok {
		return nil, errors.New("starlark: proc is not callable")
	}
	dec, err := json.Module.Attr("decode")
	if err != nil {
		return nil, fmt.Errorf("starlark json.decode: %w", err)
	}
	s := &Starlark{thread: th, proc: proc, decode: dec.(starlark.Callable)}
	s.Reset()
	return s, nil
}

// Reset empties the state.
func (s *Starlark) Reset() {
	st := starlark.NewDict(1)
	_ = st.SetKey(starlark.String("readings"), starlark.NewList(nil))
	s.state = st
	s.args = make(starlark.Tuple, 3)
	s.argv = make(starlark.Tuple, 1)
}

// Decode parses a chunk's JSON with Starlark's json.decode.
func (s *Starlark) Decode(data []byte) (starlark.Value, error) {
	s.argv[0] = starlark.String(data)
	return starlark.Call(s.thread, s.decode, s.argv, nil)
}

// Meta builds a chunk's metadata dict, as the provider builds its map.
func Meta(stream string, seq int64, id string, ms int64) starlark.Value {
	m := starlark.NewDict(6)
	_ = m.SetKey(starlark.String("stream-id"), starlark.String(stream))
	_ = m.SetKey(starlark.String("seq"), starlark.MakeInt64(seq))
	_ = m.SetKey(starlark.String("event"), starlark.None)
	_ = m.SetKey(starlark.String("id"), starlark.String(id))
	_ = m.SetKey(starlark.String("received-at-ms"), starlark.MakeInt64(ms))
	_ = m.SetKey(starlark.String("endpoint"), starlark.String("bench"))
	return m
}

// Call runs the processor once and keeps the state it returns.
func (s *Starlark) Call(chunk, meta starlark.Value) error {
	s.args[0], s.args[1], s.args[2] = s.state, chunk, meta
	res, err := starlark.Call(s.thread, s.proc, s.args, nil)
	if err != nil {
		return err
	}
	d, ok := res.(*starlark.Dict)
	if !ok {
		return fmt.Errorf("starlark result %s, want a dict", res.Type())
	}
	st, found, err := d.Get(starlark.String("state"))
	if err != nil || !found {
		return fmt.Errorf("starlark result has no state: %v", err)
	}
	out, _, _ := d.Get(starlark.String("output"))
	n, _ := starlark.AsInt32(out)
	s.state = st
	s.Processed++
	s.LastCount = n
	return nil
}

// A chunk is what the Starlark pipeline's producer hands its worker: the
// bytes and the ID, as a transport.Chunk carries them.
type chunk struct {
	data []byte
	id   string
}

// RunStarlarkPipeline pushes n chunks through a minimal host around the
// Starlark processor, built as the provider runs one stream: a producer
// goroutine sends each chunk's bytes on a channel of 256 (the queue), and a
// worker goroutine decodes it with json.decode, builds its metadata dict
// and calls the processor. It returns when the worker has processed all n.
func (s *Starlark) RunStarlarkPipeline(n int) error {
	q := make(chan chunk, 256)
	go func() {
		for i := 0; i < n; i++ {
			q <- chunk{data: Chunk, id: "x"}
		}
		close(q)
	}()
	var seq int64
	for c := range q {
		v, err := s.Decode(c.data)
		if err != nil {
			return err
		}
		if err := s.Call(v, Meta("bench", seq, c.id, 0)); err != nil {
			return err
		}
		seq++
	}
	return nil
}
