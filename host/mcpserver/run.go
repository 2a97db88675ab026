package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// run runs prog to its value, serving each host call from the Server's
// registry. A stream the program starts is watched by c from before it
// starts, so the call sees every one of its outputs. It returns the value
// and the program's globals at the end.
func (c *call) run(ctx context.Context, prog *rtfs.Program) (rtfs.Value, *rtfs.Globals, error) {
	th := rtfs.NewThread(c.s.opts.Limits)
	out, err := th.Run(ctx, prog)
	for err == nil && out.Call != nil {
		v, cerr := c.hostCall(ctx, out)
		if cerr != nil {
			out, err = th.ResumeError(ctx, out.Continuation, cerr)
		} else {
			out, err = th.Resume(ctx, out.Continuation, v)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return out.Value, out.Globals, nil
}

// hostCall serves the host call of a suspended outcome.
func (c *call) hostCall(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
	hc := &capabilities.Call{
		ID:      out.Call.Capability,
		Args:    out.Call.Args,
		Pos:     out.Call.Pos,
		Globals: out.Globals,
	}
	id := ""
	if strings.TrimPrefix(hc.ID, ":") == provider.CapStart {
		hc.Args, id = withStreamID(hc.Args, c.s.prov.NewStreamID)
		if id != "" && c.watchStream(id) != nil {
			id = "" // another call's stream: the capability reports the duplicate id
		}
	}
	v, err := c.s.caps.Call(ctx, hc)
	if err != nil && id != "" {
		c.unwatchStream(id)
	}
	return v, err
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
