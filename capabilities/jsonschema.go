package capabilities

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/suggest"
)

// This file gives a Schema to clients that speak JSON rather than RTFS (the
// MCP tools): the schema as a JSON Schema, and the check of JSON arguments
// against it. The RTFS types of a Key map to JSON types: string, keyword and
// symbol to "string"; int to "integer"; float and number to "number"; bool
// to "boolean"; map to "object"; vector, list and set to "array"; nil to
// "null"; any to every JSON type; fn has no JSON form.

// JSONSchema returns the schema as a JSON Schema (draft 2020-12) document:
// for a map argument an "object" with its keys as "properties", "required"
// and, unless OtherKeys, "additionalProperties": false. Each property
// carries its JSON type, its Enum, its Min as "minimum", its Doc as
// "description" and its RTFS type as "rtfsType". A nil schema gives an
// object schema that allows anything. It builds a new document each time.
func (s *Schema) JSONSchema() map[string]any {
	if s == nil || s.Type != "map" {
		return map[string]any{"type": "object"}
	}
	props := make(map[string]any, len(s.Keys))
	required := []string{}
	for _, k := range s.Keys {
		p := map[string]any{"rtfsType": typeName(k.Type)}
		if t := jsonTypes(k.Type); len(t) == 1 {
			p["type"] = t[0]
		} else if len(t) > 1 {
			p["type"] = t
		}
		if k.Doc != "" {
			p["description"] = k.Doc
		}
		if len(k.Enum) > 0 {
			p["enum"] = k.Enum
		}
		if k.Min != nil {
			p["minimum"] = *k.Min
		}
		props[k.Name] = p
		if k.Required {
			required = append(required, k.Name)
		}
	}
	doc := map[string]any{"type": "object", "properties": props, "required": required}
	if !s.OtherKeys {
		doc["additionalProperties"] = false
	}
	return doc
}

// allJSON lists every JSON type, for a key of any type: a client building a
// form from the schema (the MCP Inspector) then sends 0 as the number 0
// rather than the string "0".
var allJSON = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// jsonTypes returns the JSON types of an RTFS type spec, without repeats.
func jsonTypes(spec string) []string {
	var out []string
	add := func(t string) {
		for _, x := range out {
			if x == t {
				return
			}
		}
		out = append(out, t)
	}
	for _, alt := range strings.Split(spec, "|") {
		switch alt {
		case "", "any":
			return allJSON
		case "string", "keyword", "symbol":
			add("string")
		case "int":
			add("integer")
		case "float", "number":
			add("number")
		case "bool":
			add("boolean")
		case "map":
			add("object")
		case "vector", "list", "set":
			add("array")
		case "nil":
			add("null")
		}
	}
	return out
}

// A JSONArgError is an argument of a JSON call that does not fit its
// schema: Key names it ("" for the arguments object as a whole).
type JSONArgError struct {
	Key string
	Msg string
}

func (e *JSONArgError) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return fmt.Sprintf("argument %q: %s", e.Key, e.Msg)
}

// CheckJSON checks the JSON object args (by key, as raw JSON) against s: no
// key s does not list (unless OtherKeys; an unknown key's error names the
// nearest known one), every required key present, each value of its key's
// JSON type, within its Enum and not below its Min. Its error is a
// *JSONArgError. It is safe for concurrent use.
func (s *Schema) CheckJSON(args map[string]json.RawMessage) error {
	if s == nil {
		return nil
	}
	keys := make(map[string]*Key, len(s.Keys))
	names := make([]string, len(s.Keys))
	for i := range s.Keys {
		keys[s.Keys[i].Name] = &s.Keys[i]
		names[i] = s.Keys[i].Name
	}
	given := make([]string, 0, len(args))
	for k := range args {
		given = append(given, k)
	}
	sort.Strings(given)
	for _, name := range given {
		k, ok := keys[name]
		if !ok {
			if s.OtherKeys {
				continue
			}
			msg := "unknown argument"
			if near, ok := suggest.Closest(name, names); ok {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			return &JSONArgError{Key: name, Msg: fmt.Sprintf("%s (accepted: %s)", msg, strings.Join(names, ", "))}
		}
		if err := k.checkJSON(args[name]); err != "" {
			return &JSONArgError{Key: name, Msg: err}
		}
	}
	for _, k := range s.Keys {
		if v, ok := args[k.Name]; k.Required && (!ok || JSONKind(v) == "null") {
			return &JSONArgError{Key: k.Name, Msg: "missing required argument"}
		}
	}
	return nil
}

// checkJSON reports a JSON value that does not fit k ("" when it fits).
func (k *Key) checkJSON(v json.RawMessage) string {
	kind := JSONKind(v)
	types := jsonTypes(k.Type)
	if len(types) == len(allJSON) || kind == "null" { // null is absent: CheckJSON reports a required one
		return ""
	}
	for _, t := range types {
		switch {
		case t == kind:
		case t == "integer" && kind == "number":
			var n int64
			if json.Unmarshal(v, &n) != nil {
				continue
			}
			return k.checkMin(n)
		default:
			continue
		}
		if kind == "string" {
			var s string
			_ = json.Unmarshal(v, &s)
			return k.checkEnum(s)
		}
		return ""
	}
	want := make([]string, len(types))
	for i, t := range types {
		want[i] = article(t) + " " + t
	}
	got := kind
	if kind == "number" || kind == "boolean" {
		got += " " + clip(v)
	}
	return fmt.Sprintf("expected %s, got %s", strings.Join(want, " or "), got)
}

// JSONKind names the JSON type of the value v starts with: object, array,
// string, boolean, null or number ("nothing" when empty, "invalid JSON"
// otherwise).
func JSONKind(v json.RawMessage) string {
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
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
