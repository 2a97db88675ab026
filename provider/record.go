package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/replay"
)

// Recording: a stream started with :record FILE (or by a provider with
// Options.RecordDir) writes every chunk it receives, as its transport
// handed it over and in the order it was numbered, to an NDJSON file in
// the format of transport/replay, which :transport :replay plays back and
// `rtfshost test` feeds to processors. Only the chunks received by this
// run of the stream are written (the file is appended to, so a stream
// resumed with the same recording continues it).

// A chunkRecorder appends a stream's chunks to its recording. Deliver
// calls record under the stream's mu; exit closes it. The first write
// error stops the recording (it is logged) and never the stream.
type chunkRecorder struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	w      *replay.Writer
	closed bool
}

// openRecorder opens path for appending, creating it (and no directory).
func openRecorder(path string) (*chunkRecorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the recording: %w", err)
	}
	return &chunkRecorder{path: path, f: f, w: replay.NewWriter(f)}, nil
}

// record appends chunk number seq; it reports the error that stopped the
// recording, once.
func (r *chunkRecorder) record(seq int64, c transport.Chunk) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if err := r.w.Write(seq, c); err != nil {
		r.closed = true
		r.f.Close()
		return fmt.Errorf("recording to %s stopped: %w", r.path, err)
	}
	return nil
}

func (r *chunkRecorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.f.Close()
	}
}

// recordPath is where a new stream records: its :record, else a file
// named by its id in Options.RecordDir, else nowhere (""). A :record path
// must pass the egress policy (a serve's refuses files).
func (c *settings) recordPath(req StartRequest, id string) (string, error) {
	if req.Record != "" {
		if err := c.opts.Egress.CheckFile(req.Record); err != nil {
			return "", &keyError{"record", err}
		}
		return req.Record, nil
	}
	if c.opts.RecordDir != "" {
		return filepath.Join(c.opts.RecordDir, id+".ndjson"), nil
	}
	return "", nil
}
