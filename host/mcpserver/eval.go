package mcpserver

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// eval serves rtfs.eval: it runs the program on its own goroutine, serving
// its host calls, while this goroutine reports the outputs of the streams the
// program starts. The result's text is the program's value as JSON; its _meta
// holds every output the call saw.
func (c *call) eval(a args) (*mcp.CallToolResult, error) {
	name := a.str("filename")
	if name == "" {
		name = "eval.rtfs"
	}
	prog, err := compile(name, a.str("program"))
	if err != nil {
		return textResult(err.Error(), true), nil
	}
	ctx, cancel := withTimeout(c.ctx, a)
	defer cancel()
	var (
		value  rtfs.Value
		runErr error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				runErr = fmt.Errorf("%s: internal error: %v", ToolEval, p)
			}
		}()
		value, _, runErr = c.run(ctx, prog, nil)
	}()
	_, err = c.pump(ctx, done, func(ends map[string]provider.Status) bool {
		select {
		case <-done:
			return c.settled(ends)
		default:
			return false
		}
	})
	if err != nil {
		<-done // ctx has ended, so the program stops
	}
	switch {
	case err == nil && runErr == nil:
		v, err := valueJSON(value, c.s.opts.Limits.OutputLimit())
		if err != nil {
			return c.evalResult(textResult(fmt.Sprintf("%s: the program's value is too large to send: %v (its JSON, where a value that shares structure is written in full; the limit is the smaller of serve's --max-output-bytes and --max-memory)", ToolEval, err), true)), nil
		}
		res := textResult(string(v), false)
		res.StructuredContent = evalResult{Value: v}
		return c.evalResult(res), nil
	case ctx.Err() != nil:
		// Cancelled by the client or timed out, whichever goroutine saw it.
		c.cancelStreams()
		if c.ctx.Err() != nil {
			return nil, c.ctx.Err() // the client cancelled: no result is sent
		}
		return c.evalResult(textResult(timeoutMessage(a), true)), nil
	}
	return c.evalResult(textResult(runErr.Error(), true)), nil
}

// evalResult adds the call's outputs to res's _meta.
func (c *call) evalResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	r := c.rep
	if r.count == 0 {
		return res
	}
	res.Meta = mcp.Meta{
		metaOutputs:                  r.outputs,
		"rtfshost/output-count":      r.count,
		"rtfshost/notifications":     r.sent,
		"rtfshost/coalesced":         r.coalesced,
		"rtfshost/outputs-truncated": r.truncated,
	}
	if r.dropped > 0 {
		res.Meta["rtfshost/dropped-outputs"] = r.dropped
	}
	if r.cut != "" {
		res.Meta["rtfshost/delivery-cut"] = r.cut
	}
	return res
}
