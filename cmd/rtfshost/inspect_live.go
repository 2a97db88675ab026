package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/provider"
)

// toolRemove is serve's tool that removes a stream.
const toolRemove = mcpserver.ToolRemove

// livePage is how many streams infosLive asks for at a time.
var livePage = provider.MaxListLimit

// infosLive asks a running serve for the snapshots of its streams (in a
// cluster, those of every host), a page of livePage at a time: the JSON of its mcp.stream.inspect summary decodes into
// provider.StreamInfo, and its next-cursor asks for the next page.
func infosLive(ctx context.Context, server string) ([]provider.StreamInfo, error) {
	var all []provider.StreamInfo
	cursor := ""
	for {
		args := map[string]any{"include-state": false, "include-initial-state": false, "include-queue": false, "limit": livePage}
		if cursor != "" {
			args["cursor"] = cursor
		}
		text, err := callServer(ctx, server, mcpserver.ToolInspect, args)
		if err != nil {
			return nil, err
		}
		var summary struct {
			Streams []provider.StreamInfo `json:"streams"`
			Next    string                `json:"next-cursor"`
		}
		if err := json.Unmarshal([]byte(text), &summary); err != nil {
			return nil, fmt.Errorf("%s on %s answered something else than an inspect summary: %w", mcpserver.ToolInspect, server, err)
		}
		all = append(all, summary.Streams...)
		if summary.Next == "" || summary.Next == cursor {
			return all, nil
		}
		cursor = summary.Next
	}
}

// infoLive asks a running serve for the snapshot of stream id.
func infoLive(ctx context.Context, server, id string, o provider.InspectOptions) (provider.StreamInfo, error) {
	args := map[string]any{"stream-id": id, "include-state": !o.OmitState, "include-initial-state": !o.OmitInitialState, "include-queue": !o.OmitQueue}
	var in provider.StreamInfo
	text, err := callServer(ctx, server, mcpserver.ToolInspect, args)
	if err != nil {
		return in, err
	}
	if err := json.Unmarshal([]byte(text), &in); err != nil {
		return in, fmt.Errorf("%s on %s answered something else than a stream snapshot: %w", mcpserver.ToolInspect, server, err)
	}
	return in, nil
}

// statusLive pauses, resumes or cancels (verb) stream id of a running
// serve, or sets aside the chunk it is held on (skip: mcp.stream.resume
// with skip), and returns its status after.
func statusLive(ctx context.Context, server, verb, id string) (provider.StatusInfo, error) {
	tool := map[string]string{"pause": mcpserver.ToolPause, "resume": mcpserver.ToolResume, "skip": mcpserver.ToolResume, "cancel": mcpserver.ToolCancel}[verb]
	args := map[string]any{"stream-id": id}
	if verb == "skip" {
		args["skip"] = true
	}
	var st provider.StatusInfo
	text, err := callServer(ctx, server, tool, args)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		return st, fmt.Errorf("%s on %s answered something else than a status: %w", tool, server, err)
	}
	return st, nil
}

// callServer calls one tool of the running "rtfshost serve" at server (its
// token from $RTFSHOST_TOKEN) and returns the result's text; an isError
// result is an error with that text. It connects, calls and closes within
// 10 seconds.
func callServer(ctx context.Context, server, tool string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "rtfshost-cli", Version: version}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: mcpEndpoint(server), HTTPClient: tokenClient(os.Getenv(tokenEnv))}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", server, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s on %s: %w", tool, server, err)
	}
	text := resultText(res)
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// mcpEndpoint accepts a server's base URL or its /mcp URL.
func mcpEndpoint(server string) string {
	s := strings.TrimRight(server, "/")
	if strings.HasSuffix(s, mcpserver.PathStreamable) {
		return s
	}
	return s + mcpserver.PathStreamable
}

// resultText joins a tool result's text blocks.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// tokenClient sends the bearer token serve may require ($RTFSHOST_TOKEN).
func tokenClient(token string) *http.Client {
	if token == "" {
		return http.DefaultClient
	}
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
