package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A param describes one argument of a tool: it yields the tool's JSON schema
// and checks the arguments of each call.
type param struct {
	name     string
	typ      string // "string", "integer", "boolean", "object", "array" or "" (any JSON)
	required bool
	min      int64    // for "integer": the least accepted value
	enum     []string // for "string": the accepted values, if any
	doc      string
}

// schemaOf returns the JSON schema of a tool taking params: an object with
// those properties and no others.
// anyJSON is the type of a parameter that takes any JSON value. Its schema
// lists every JSON type, so that a client building a form (the MCP
// Inspector) sends 0 as the number 0 rather than the string "0".
const anyJSON = "any"

func schemaOf(params []param) map[string]any {
	props := make(map[string]any, len(params))
	required := []string{}
	for _, p := range params {
		s := map[string]any{"description": p.doc}
		switch p.typ {
		case "":
		case anyJSON:
			s["type"] = []string{"object", "array", "string", "number", "integer", "boolean", "null"}
		default:
			s["type"] = p.typ
		}
		if p.typ == "integer" {
			s["minimum"] = p.min
		}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
		props[p.name] = s
		if p.required {
			required = append(required, p.name)
		}
	}
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// args are the checked arguments of one call, by name, as raw JSON.
type args map[string]json.RawMessage

// parseArgs checks raw against params and returns the arguments. Its error
// is a JSON-RPC invalid-params error (-32602) naming the tool and the
// argument.
func parseArgs(tool string, params []param, raw json.RawMessage) (args, error) {
	raw = bytes.TrimSpace(raw)
	a := args{}
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, invalidParams(tool, "", "arguments must be a JSON object, got %s", jsonKind(raw))
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, invalidParams(tool, "", "arguments are not valid JSON: %v", err)
	}
	known := make(map[string]*param, len(params))
	for i := range params {
		known[params[i].name] = &params[i]
	}
	for _, name := range sortedKeys(a) {
		p, ok := known[name]
		if !ok {
			return nil, invalidParams(tool, name, "unknown argument (accepted: %s)", paramNames(params))
		}
		if err := p.check(a[name]); err != nil {
			return nil, invalidParams(tool, name, "%v", err)
		}
	}
	for _, p := range params {
		if _, ok := a[p.name]; p.required && !ok {
			return nil, invalidParams(tool, p.name, "missing required argument")
		}
	}
	return a, nil
}

// check reports whether v fits p's type, range and enumeration.
func (p *param) check(v json.RawMessage) error {
	kind := jsonKind(v)
	switch p.typ {
	case "", anyJSON:
		return nil
	case "integer":
		var n int64
		if kind != "number" || json.Unmarshal(v, &n) != nil {
			return fmt.Errorf("expected an integer, got %s %s", kind, clip(v))
		}
		if n < p.min {
			return fmt.Errorf("must be at least %d, got %d", p.min, n)
		}
		return nil
	case "string":
		if kind != "string" {
			return fmt.Errorf("expected a string, got %s", kind)
		}
		var s string
		_ = json.Unmarshal(v, &s)
		if len(p.enum) > 0 && !contains(p.enum, s) {
			return fmt.Errorf("%q is not one of %s", s, strings.Join(p.enum, ", "))
		}
		return nil
	case "boolean", "object", "array":
		if kind != p.typ {
			return fmt.Errorf("expected %s %s, got %s", article(p.typ), p.typ, kind)
		}
		return nil
	}
	return fmt.Errorf("internal error: unknown parameter type %q", p.typ)
}

// str returns argument name as a string ("" if absent).
func (a args) str(name string) string {
	var s string
	_ = json.Unmarshal(a[name], &s)
	return s
}

// int returns argument name as an integer (0 if absent).
func (a args) int(name string) int64 {
	var n int64
	_ = json.Unmarshal(a[name], &n)
	return n
}

// bool returns argument name as a boolean (def if absent).
func (a args) bool(name string, def bool) bool {
	v, ok := a[name]
	if !ok {
		return def
	}
	var b bool
	_ = json.Unmarshal(v, &b)
	return b
}

// invalidParams returns a JSON-RPC -32602 error about argument arg (or the
// whole arguments object when arg is "") of tool.
func invalidParams(tool, arg, format string, a ...any) *jsonrpc.Error {
	where := fmt.Sprintf("tool %q", tool)
	if arg != "" {
		where += fmt.Sprintf(": argument %q", arg)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: where + ": " + fmt.Sprintf(format, a...)}
}

// jsonKind names the JSON type of the value v starts with.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch c := v[0]; {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "number"
	}
	return "invalid JSON"
}

func clip(v json.RawMessage) string {
	const max = 40
	if len(v) > max {
		return string(v[:max]) + "..."
	}
	return string(v)
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(a args) []string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func paramNames(params []param) string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}
