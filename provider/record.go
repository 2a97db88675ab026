package provider

import (
	"path/filepath"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
)

// Recording: a stream started with :record FILE (or by a provider with
// Options.RecordDir) writes every chunk it receives, as its transport
// handed it over and in the order it was numbered, to an NDJSON file in
// the format of transport/replay, which :transport :replay plays back and
// `rtfshost test` feeds to processors. Only the chunks received by this
// run of the stream are written (the file is appended to, so a stream
// resumed with the same recording continues it).

// recordPath is where a new stream records: its :record, else a file
// named by its id in Options.RecordDir, else nowhere (""). A :record path
// must pass the egress policy (a serve's refuses files).
func (c *settings) recordPath(req StartRequest, id string) (string, error) {
	if req.Record != "" {
		if err := c.opts.Egress.CheckFile(req.Record); err != nil {
			return "", &stream.KeyError{Key: "record", Err: err}
		}
		return req.Record, nil
	}
	if c.opts.RecordDir != "" {
		return filepath.Join(c.opts.RecordDir, id+".ndjson"), nil
	}
	return "", nil
}
