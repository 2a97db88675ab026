package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/rtfshost/rtfshost/persistence"
)

// TestStructuredResults: on both eras, every tool declares an outputSchema
// and annotations, and each successful call returns "isError": false and
// structuredContent that validates against its tool's outputSchema, beside
// the same JSON as text.
func TestStructuredResults(t *testing.T) {
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			store := persistence.NewMemStore() // mcp.stream.upgrade swaps a stream's records
			defer store.Close()
			f := newFixtureStore(t, Options{}, store)
			ctx := context.Background()
			url := f.ts.URL + PathStreamable
			var h map[string]string
			var meta map[string]any
			if era == "2025-11-25" {
				h = legacyInit(t, url)
			} else {
				h = map[string]string{"MCP-Protocol-Version": era}
				meta = map[string]any{"io.modelcontextprotocol/protocolVersion": era, metaClientCaps: map[string]any{},
					"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"}}
			}
			header := func(method, name string) map[string]string {
				out := map[string]string{"Mcp-Method": method}
				if name != "" {
					out["Mcp-Name"] = name
				}
				for k, v := range h {
					out[k] = v
				}
				return out
			}
			list, e := rpc(t, url, header("tools/list", ""), "tools/list", map[string]any{"_meta": meta})
			if e != nil {
				t.Fatalf("tools/list: %v", e)
			}
			schemas := map[string]*jsonschema.Resolved{}
			tools, _ := list["tools"].([]any)
			for _, raw := range tools {
				tool := raw.(map[string]any)
				name, _ := tool["name"].(string)
				out, ok := tool["outputSchema"]
				if !ok {
					t.Errorf("%s declares no outputSchema", name)
					continue
				}
				schemas[name] = resolveSchema(t, name, out)
				if err := closedObjects(out); err != nil {
					t.Errorf("%s: outputSchema: %v", name, err)
				}
				ann, _ := tool["annotations"].(map[string]any)
				readOnly := name == ToolInspect || name == ToolStatus || name == ToolDeadLetters
				if (ann["readOnlyHint"] == true) != readOnly {
					t.Errorf("%s: readOnlyHint = %v", name, ann["readOnlyHint"])
				}
				if readOnly && ann["idempotentHint"] != true {
					t.Errorf("%s is read-only but not idempotent: %v", name, ann)
				}
				if !readOnly && ann["destructiveHint"] == nil {
					t.Errorf("%s mutates but says nothing of destructiveHint: %v", name, ann)
				}
			}
			if len(schemas) != 10 {
				t.Fatalf("%d tools with an output schema, want 10", len(schemas))
			}

			var id atomic.Int64
			post := func(name string, args map[string]any) (string, error) {
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id.Add(1), "method": "tools/call",
					"params": map[string]any{"name": name, "arguments": args, "_meta": meta}})
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range header("tools/call", name) {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return "", err
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				return string(body), err
			}
			checked := map[string]bool{}
			check := func(name, body string) {
				t.Helper()
				checked[name] = true
				res, e := decodeResponse(t, name, body)
				if e != nil {
					t.Fatalf("%s: %v", name, e)
				}
				if v, ok := res["isError"]; !ok || v != false {
					t.Fatalf(`%s: a successful result without "isError": false: %v`, name, res)
				}
				sc, ok := res["structuredContent"]
				if !ok {
					t.Fatalf("%s: no structuredContent: %v", name, res)
				}
				if err := schemas[name].Validate(sc); err != nil {
					t.Errorf("%s: structuredContent %v does not match its outputSchema: %v", name, sc, err)
				}
				content, _ := res["content"].([]any)
				if len(content) != 1 {
					t.Fatalf("%s: content = %v", name, res["content"])
				}
				text, _ := content[0].(map[string]any)["text"].(string)
				var fromText any
				if err := json.Unmarshal([]byte(text), &fromText); err != nil {
					t.Fatalf("%s: the text block is not JSON: %v", name, err)
				}
				if name != ToolEval && !jsonEqual(fromText, sc) {
					t.Errorf("%s: text %s and structuredContent %v differ", name, text, sc)
				}
			}

			call := func(name string, args map[string]any) {
				t.Helper()
				body, err := post(name, args)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				check(name, body)
			}
			type answer struct {
				body string
				err  error
			}
			started := make(chan answer, 1)
			go func() {
				body, err := post(ToolStart, startArgs("s1"))
				started <- answer{body, err}
			}()
			waitFor(t, "the stream's start", func() bool { _, err := f.host.Provider().Status(ctx, "s1"); return err == nil })
			call(ToolPause, map[string]any{"stream-id": "s1"})
			call(ToolUpgrade, map[string]any{"stream-id": "s1", "program": counterProgram, "filename": "again.rtfs"})
			call(ToolResume, map[string]any{"stream-id": "s1"})
			call(ToolStatus, map[string]any{"stream-id": "s1"})
			f.feed(ctx, "s1", append(values(2), end)...)
			a := <-started
			if a.err != nil {
				t.Fatalf("%s: %v", ToolStart, a.err)
			}
			check(ToolStart, a.body)
			call(ToolInspect, map[string]any{"stream-id": "s1"})
			call(ToolInspect, map[string]any{})
			call(ToolEval, map[string]any{"program": "{:a [1 2.5 \"x\" nil]}"})
			call(ToolDeadLetters, map[string]any{"stream-id": "s1"})
			call(ToolCancel, map[string]any{"stream-id": "s1"})
			call(ToolRemove, map[string]any{"stream-id": "s1"})
			for name := range schemas {
				if !checked[name] {
					t.Errorf("%s was not called: its outputSchema is not checked against an answer", name)
				}
			}
		})
	}
}

// closedObjects checks that a tool's outputSchema (decoded JSON) describes
// its answer: an object with its properties and no others, or any of such
// objects, never a bare {"type": "object"}.
func closedObjects(schema any) error {
	s, _ := schema.(map[string]any)
	if s["type"] != "object" {
		return fmt.Errorf("type %v, want object", s["type"])
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, alt := range alts {
			if err := closedObjects(alt); err != nil {
				return fmt.Errorf("anyOf: %w", err)
			}
		}
		return nil
	}
	if props, _ := s["properties"].(map[string]any); len(props) == 0 {
		return fmt.Errorf("no properties")
	}
	if s["additionalProperties"] != false {
		return fmt.Errorf("additionalProperties %v, want false", s["additionalProperties"])
	}
	return nil
}

func resolveSchema(t *testing.T, name string, v any) *jsonschema.Resolved {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: outputSchema is not a JSON schema: %v\n%s", name, err, b)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: outputSchema does not resolve: %v\n%s", name, err, b)
	}
	return r
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return strings.EqualFold(string(x), string(y))
}
