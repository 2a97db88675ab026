package mcpserver

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/provider"
)

const upgradeDesc = `Gives a live stream a new processor, keeping its state, cursor and journal (docs/upgrading.md): ` +
	`program is RTFS source that defines the processor (its top level may only define things); processor names it ` +
	`(default: the name of the stream's processor). The stream is stopped between two chunks, swapped and goes on at once, ` +
	`paused if it was. A swap that fails changes nothing. Returns {stream-id, state, from, to}, from and to being ` +
	`{hash, file, processor, compiler, at-epoch-ms}; the stream's inspect map lists its programs.`

func upgradeKeys() []capabilities.Key {
	return []capabilities.Key{
		streamIDKey(),
		{Name: "program", Type: "string", Required: true, Doc: "RTFS source defining the new processor function (and anything it uses)."},
		{Name: "processor", Type: "string", Doc: "The new processor's name in program (default: the stream's processor's name)."},
		{Name: "filename", Type: "string", Doc: "The program's file name in error messages and the stream's history (default upgrade.rtfs)."},
	}
}

// upgrade serves mcp.stream.upgrade: it compiles the program and has the
// provider swap the stream's processor.
func (c *call) upgrade(a args) (*mcp.CallToolResult, error) {
	name := a.str("filename")
	if name == "" {
		name = "upgrade.rtfs"
	}
	prog, err := compile(name, a.str("program"))
	if err != nil {
		return textResult(fmt.Sprintf("%s: %v", ToolUpgrade, err), true), nil
	}
	res, err := c.s.prov.Upgrade(c.ctx, provider.Upgrade{StreamID: a.str("stream-id"), Program: prog, Processor: a.str("processor"), Limits: c.s.opts.Limits})
	if err != nil {
		return textResult(fmt.Sprintf("%s: %v", ToolUpgrade, err), true), nil
	}
	return jsonResult(map[string]any{"stream-id": res.StreamID, "state": res.State, "from": res.From, "to": res.To}, false), nil
}
