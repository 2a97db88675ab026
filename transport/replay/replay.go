package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// Config is the configuration of a :replay stream: the recording to play
// and its pace.
type Config struct {
	// File is the recording's path.
	File string
	// Interval, when positive, is the time between two chunks.
	Interval time.Duration
	// Speed, when positive, plays the chunks at the pace they were
	// received, Speed times faster (1 is as recorded). Zero with no
	// Interval plays them as fast as the stream takes them.
	Speed float64
}

// Path returns the file the stream reads (transport.FileUser): the egress
// policy checks it.
func (c *Config) Path() string { return c.File }

// Kind describes the replay transport to a transport.Catalog: :transport
// :replay with :file, and the optional :interval-ms and :speed.
func Kind() transport.Kind {
	return transport.Kind{
		Name:   "replay",
		Doc:    "a recording (rtfshost run --record, :record) played back as a source",
		Target: transport.TargetFile,
		Keys: []transport.Key{
			{Name: "file", Type: "string", Doc: "the recording to play (NDJSON, one chunk a line)"},
			{Name: "interval-ms", Type: "int", Doc: "milliseconds between two chunks (default: as fast as the stream takes them)"},
			{Name: "speed", Type: "number", Doc: "play at the recorded pace, this many times faster (1: as recorded)"},
		},
		Configure: configure,
		Transport: Transport{},
	}
}

func configure(keys map[string]json.RawMessage) (any, error) {
	c := &Config{}
	raw, ok := keys["file"]
	if !ok {
		return nil, errors.New("key :file: required: the recording to play")
	}
	if err := json.Unmarshal(raw, &c.File); err != nil || c.File == "" {
		return nil, fmt.Errorf("key :file: expected a file name, got %s", raw)
	}
	if raw, ok := keys["interval-ms"]; ok {
		var ms int64
		if err := json.Unmarshal(raw, &ms); err != nil || ms < 0 {
			return nil, fmt.Errorf("key :interval-ms: expected a non-negative int, got %s", raw)
		}
		c.Interval = time.Duration(ms) * time.Millisecond
	}
	if raw, ok := keys["speed"]; ok {
		if err := json.Unmarshal(raw, &c.Speed); err != nil || c.Speed <= 0 {
			return nil, fmt.Errorf("key :speed: expected a positive number, got %s", raw)
		}
	}
	if c.Interval > 0 && c.Speed > 0 {
		return nil, errors.New("key :speed: give :interval-ms or :speed, not both")
	}
	return c, nil
}

// Transport plays recordings. It is replayable: a chunk's ID is its ID in
// the recording (or "#N", its line, when it had none), and a run resumed
// after a cursor starts with the chunk after the line that carries it, so
// a stream killed in the middle resumes exactly. The zero value is ready
// to use and safe for concurrent use; each Run reads its own file.
type Transport struct{}

// Run plays the recording of spec.Config (a *Config) after cursor. It
// returns nil at the recording's end, ctx's error when ctx ends, and a
// permanent *transport.Error for a file that cannot be read, a line that
// is not a recorded chunk, or a cursor the recording does not hold.
func (Transport) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	cfg, ok := spec.Config.(*Config)
	if !ok || cfg == nil {
		return &transport.Error{StreamID: spec.StreamID, Op: "config", Permanent: true, Err: fmt.Errorf("replay: the spec's Config is %T, want *replay.Config", spec.Config)}
	}
	fail := func(op string, err error) error {
		return &transport.Error{StreamID: spec.StreamID, Op: op, Permanent: true, Err: err}
	}
	f, err := os.Open(cfg.File)
	if err != nil {
		return fail("open", err)
	}
	defer f.Close()
	max := spec.MaxEventBytes
	if max <= 0 {
		max = MaxLine
	}
	br := bufio.NewReaderSize(f, 64<<10)
	skipping := cursor != ""
	var prev time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	wait := func(d time.Duration) error {
		if d <= 0 {
			return ctx.Err()
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := readLine(br, max)
		if err == io.EOF {
			if skipping {
				return fail("resume", fmt.Errorf("%w: the recording %s holds no chunk %q to resume after", transport.ErrSourceLost, cfg.File, cursor))
			}
			return nil
		}
		if err != nil {
			return fail("read", fmt.Errorf("%s:%d: %w", cfg.File, n, err))
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		rec, err := parseLine(bytes.TrimSpace(b))
		if err != nil {
			return fail("read", fmt.Errorf("%s:%d: %w", cfg.File, n, err))
		}
		c := rec.Chunk
		if c.ID == "" {
			c.ID = "#" + strconv.Itoa(n)
		}
		if skipping {
			skipping = c.ID != cursor
			prev = c.ReceivedAt
			continue
		}
		switch {
		case cfg.Interval > 0 && !prev.IsZero():
			err = wait(cfg.Interval)
		case cfg.Speed > 0 && !prev.IsZero():
			err = wait(time.Duration(float64(c.ReceivedAt.Sub(prev)) / cfg.Speed))
		}
		if err != nil {
			return err
		}
		prev = c.ReceivedAt
		if prev.IsZero() {
			prev = time.UnixMilli(0)
		}
		if err := sink.Deliver(ctx, c); err != nil {
			return err
		}
	}
}

// readLine reads one line of at most max bytes (without its newline).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max+1 {
			return nil, fmt.Errorf("a line longer than %d bytes", max)
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}
