package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// run runs prog to its value on the host (host.RunWith), serving each host
// call from the Server's registry. A stream the program starts is watched by
// c from before it starts, so the call sees every one of its outputs, and
// what the program prints reaches the call's client (sendLogs). The run is
// ephemeral: the call, not the store, answers for a program that awaits. It
// returns the value and the program's globals at the end. j, when not nil,
// records the run's host calls (host.RunOptions.Journal).
func (c *call) run(ctx context.Context, prog *rtfs.Program, j *capabilities.Journal) (rtfs.Value, *rtfs.Globals, error) {
	return c.s.host.RunWith(ctx, prog, host.RunOptions{
		Limits:    c.s.opts.Limits,
		Before:    c.beforeHostCall,
		Log:       func(line string) { c.w.pushLog("", line) },
		Ephemeral: true,
		Journal:   j,
	})
}

// beforeHostCall gives a :mcp.stream.start of the program a stream id, if it
// has none, and watches that stream before it starts.
func (c *call) beforeHostCall(_ context.Context, hc *capabilities.Call) (func(error), error) {
	if strings.TrimPrefix(hc.ID, ":") != provider.CapStart {
		return nil, nil
	}
	var id string
	hc.Args, id = withStreamID(hc.Args, c.s.prov.NewStreamID)
	if id == "" || c.watchStream(id) != nil {
		return nil, nil // the capability reports the missing id, or the closed provider
	}
	return func(err error) {
		if err != nil {
			c.unwatchStream(id)
		}
	}, nil
}

// withStreamID returns the arguments of a :mcp.stream.start call with a
// :stream-id, adding a fresh one (from newID) to a start map that has none,
// and that id.
// Arguments of another shape are returned as they are, with id "" (the
// capability reports them).
func withStreamID(args []rtfs.Value, newID func(endpoint string) string) ([]rtfs.Value, string) {
	if len(args) != 1 {
		return args, ""
	}
	m, ok := args[0].(*rtfs.Map)
	if !ok {
		return args, ""
	}
	if v, ok := capabilities.Field(m, "stream-id"); ok {
		if s, ok := v.(rtfs.String); ok && s != "" {
			return args, string(s)
		}
		return args, ""
	}
	endpoint := ""
	if v, ok := capabilities.Field(m, "endpoint"); ok {
		if s, ok := v.(rtfs.String); ok {
			endpoint = string(s)
		}
	}
	id := newID(endpoint)
	return []rtfs.Value{m.Assoc(rtfs.Keyword("stream-id"), rtfs.String(id))}, id
}

// compile compiles a program given as source to a tool.
func compile(name, src string) (*rtfs.Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("%s: the program is empty", name)
	}
	return rtfs.Compile(name, []byte(src))
}
