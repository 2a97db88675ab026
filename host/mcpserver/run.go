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
	hc.Args, id = c.s.prov.WithStreamID(hc.Args)
	if id == "" || c.watchStream(id) != nil {
		return nil, nil // the capability reports the missing id, or the closed provider
	}
	return func(err error) {
		if err != nil {
			c.unwatchStream(id)
		}
	}, nil
}

// compile compiles a program given as source to a tool.
func compile(name, src string) (*rtfs.Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("%s: the program is empty", name)
	}
	return rtfs.Compile(name, []byte(src))
}
