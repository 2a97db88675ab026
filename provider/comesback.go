package provider

// SourceComesBack reports whether the source of stream id comes back when
// the process that runs the stream ends and the stream is resumed later: a
// source that replays from a cursor (SSE, MCP over HTTP) does, and so does
// a program started again (:restart :on-failure). A program's output
// (:exec, :stdio without :restart) does not: it ends with the process, and
// a stream resumed later gets only the chunks its journal kept. Commands
// that would end the process use it to keep such a source alive while its
// stream can still be moved on (rtfshost run waits instead of exiting). A
// stream with no transport here (manual connect) reports true: its chunks
// come from Deliver, not from a source this process runs. Safe for
// concurrent use; it takes the stream's lock briefly.
func (p *Provider) SourceComesBack(id string) (bool, error) {
	s, err := p.lookup(id)
	if err != nil {
		return false, err
	}
	return s.SourceComesBack(), nil
}
