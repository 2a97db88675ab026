package stream

import (
	"fmt"
	"os"
	"sync"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/replay"
)

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

// OpenRecorder opens path for appending, creating it (and no directory).
func OpenRecorder(path string) (*chunkRecorder, error) {
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

func (r *chunkRecorder) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.f.Close()
	}
}
