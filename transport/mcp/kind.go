package mcp

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/rtfshost/rtfshost/transport"
)

// StreamableKind describes the MCP Streamable HTTP transport to a
// transport.Catalog: :transport :mcp, chosen for an http(s) URL whose path
// ends in /mcp. It reads the start keys :restart and :roots, which
// Configure turns into a *StreamableConfig.
func StreamableKind() transport.Kind {
	return transport.Kind{
		Name:     "mcp",
		Doc:      "one MCP tool call over Streamable HTTP (2026-07-28, or a 2025 session): each progress notification or task status is a chunk, the result the last",
		Endpoint: "the tool's name",
		Target:   transport.TargetURL,
		Detect:   func(u *url.URL) bool { return httpPathEnds(u, "/mcp") },
		Detects:  "an http(s) URL whose path ends in /mcp",
		Keys:     []transport.Key{transport.RestartKey(), rootsKey()},
		Configure: func(keys map[string]json.RawMessage) (any, error) {
			restart, err := transport.ParseRestart(keys)
			if err != nil {
				return nil, err
			}
			roots, err := parseRoots(keys)
			if err != nil {
				return nil, err
			}
			return &StreamableConfig{Restart: restart, Roots: roots}, nil
		},
		Transport: Streamable{},
	}
}

// LegacyKind describes the legacy MCP HTTP+SSE transport (2024-11-05) to a
// transport.Catalog: :transport :mcp-sse, chosen for an http(s) URL whose
// path ends in /mcp-sse. It reads the start key :roots, which Configure
// turns into a *LegacyConfig.
func LegacyKind() transport.Kind {
	return transport.Kind{
		Name:     "mcp-sse",
		Doc:      "one MCP tool call over the legacy HTTP+SSE transport (protocol 2024-11-05)",
		Endpoint: "the tool's name",
		Target:   transport.TargetURL,
		Detect:   func(u *url.URL) bool { return httpPathEnds(u, "/mcp-sse") },
		Detects:  "an http(s) URL whose path ends in /mcp-sse",
		Keys:     []transport.Key{rootsKey()},
		Configure: func(keys map[string]json.RawMessage) (any, error) {
			roots, err := parseRoots(keys)
			if err != nil {
				return nil, err
			}
			return &LegacyConfig{Roots: roots}, nil
		},
		Transport: LegacySSE{},
	}
}

func httpPathEnds(u *url.URL, suffix string) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && strings.HasSuffix(strings.TrimRight(u.Path, "/"), suffix)
}
