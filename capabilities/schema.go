package capabilities

import (
	"fmt"
	"github.com/rtfshost/rtfshost/rtfs/suggest"
	"sort"
	"strconv"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A Schema describes the single argument of a capability: usually a map with
// known keys. A nil *Schema accepts any arguments. Schemas are read-only once
// registered.
type Schema struct {
	// Type is the argument's type, in the notation of Key.Type ("map" for a
	// map argument; "" means "any").
	Type string
	// Optional allows the argument to be absent or nil.
	Optional bool
	// Keys describes a map argument's keys. Keys are looked up as keywords
	// first, then as strings.
	Keys []Key
	// OtherKeys allows keys that Keys does not list; by default such a key is
	// an error naming it, which catches typos such as :initial_state.
	OtherKeys bool
}

// A Key describes one key of a map argument.
type Key struct {
	// Name is the key without the colon, e.g. "stream-id".
	Name string
	// Type is what the value must be: one of the kind names nil bool int float
	// string keyword symbol list vector map set fn, or "number" (int or float)
	// or "any", or alternatives joined with "|", e.g. "string|keyword".
	Type string
	// Required makes the key mandatory; a nil value counts as missing.
	Required bool
	// Enum, when not empty, lists the accepted values of a string or keyword
	// key (written without the colon).
	Enum []string
	// Min, when not nil, is the least accepted value of an int key.
	Min *int64
	// Doc describes the key.
	Doc string
}

// AtLeast returns a Key.Min of n.
func AtLeast(n int64) *int64 { return &n }

// knownType reports whether name is a type name of Key.Type.
func knownType(name string) bool {
	switch name {
	case "nil", "bool", "int", "float", "string", "keyword", "symbol",
		"list", "vector", "map", "set", "fn", "number", "any":
		return true
	}
	return false
}

// validate reports a malformed schema at registration time.
func (s *Schema) validate() error {
	if s == nil {
		return nil
	}
	if err := checkTypeSpec(s.Type); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if len(s.Keys) > 0 && s.Type != "map" {
		return fmt.Errorf("schema: keys given for type %q, want \"map\"", s.Type)
	}
	seen := make(map[string]bool, len(s.Keys))
	for _, k := range s.Keys {
		if k.Name == "" || seen[k.Name] {
			return fmt.Errorf("schema: empty or duplicate key %q", k.Name)
		}
		seen[k.Name] = true
		if err := checkTypeSpec(k.Type); err != nil {
			return fmt.Errorf("schema: key :%s: %w", k.Name, err)
		}
	}
	return nil
}

func checkTypeSpec(spec string) error {
	if spec == "" {
		return nil
	}
	for _, alt := range strings.Split(spec, "|") {
		if !knownType(alt) {
			return fmt.Errorf("unknown type %q", alt)
		}
	}
	return nil
}

// typeMatches reports whether v fits spec.
func typeMatches(spec string, v rtfs.Value) bool {
	if spec == "" || spec == "any" {
		return true
	}
	kind := v.Kind().String()
	for spec != "" {
		alt, rest, _ := strings.Cut(spec, "|")
		if alt == kind || alt == "any" || (alt == "number" && (kind == "int" || kind == "float")) {
			return true
		}
		spec = rest
	}
	return false
}

// check validates args against s for capability id.
func (s *Schema) check(id string, args []rtfs.Value) error {
	if s == nil {
		return nil
	}
	if len(args) > 1 {
		return &Error{Capability: id, Msg: fmt.Sprintf("expected one argument, got %d", len(args))}
	}
	var arg rtfs.Value = rtfs.Nil
	if len(args) == 1 && args[0] != nil {
		arg = args[0]
	}
	if arg == rtfs.Nil && s.Optional {
		return nil
	}
	if !typeMatches(s.Type, arg) {
		return &Error{Capability: id, Msg: fmt.Sprintf("expected a %s argument, got %s", typeName(s.Type), describe(arg))}
	}
	if m, ok := arg.(*rtfs.Map); ok && s.Type == "map" {
		return s.checkKeys(id, m)
	}
	return nil
}

func (s *Schema) checkKeys(id string, m *rtfs.Map) error {
	for _, k := range s.Keys {
		v, ok := Field(m, k.Name)
		if !ok || v == rtfs.Nil {
			if k.Required {
				return &Error{Capability: id, Key: k.Name, Msg: fmt.Sprintf("required %s is missing", typeName(k.Type))}
			}
			continue
		}
		if !typeMatches(k.Type, v) {
			return &Error{Capability: id, Key: k.Name, Msg: fmt.Sprintf("expected %s, got %s", typeName(k.Type), describe(v))}
		}
		if msg := k.checkRange(v); msg != "" {
			return &Error{Capability: id, Key: k.Name, Msg: msg}
		}
	}
	if s.OtherKeys {
		return nil
	}
	var bad string
	var badName string
	m.Range(func(k, _ rtfs.Value) bool {
		if !s.knows(k) {
			bad = rtfs.Excerpt(k, 60)
			if t, ok := k.(interface{ Text() string }); ok {
				badName = t.Text()
			}
			return false
		}
		return true
	})
	if bad != "" {
		return s.unknownKey(id, bad, badName)
	}
	return nil
}

// unknownKey is the error of a key the schema does not know: shown is the
// key as printed, name its text for the "did you mean" suggestion.
func (s *Schema) unknownKey(id, shown, name string) *Error {
	msg := fmt.Sprintf("unknown key %s", shown)
	names := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		names[i] = k.Name
	}
	if near, ok := suggest.Closest(name, names); ok {
		msg += fmt.Sprintf(" (did you mean :%s?)", near)
	}
	return &Error{Capability: id, Msg: fmt.Sprintf("%s (known keys: %s)", msg, s.keyList())}
}

// CheckKeyNames checks the keys of a map argument known only by their
// names, as in a map literal of a program's source before it runs: it
// returns, in order, the error of each name the schema does not know (a
// keyword key is shown ":name", a string key quoted) and, when names holds
// every key of the map (complete), the error of each required key missing.
// The errors are those Dispatch gives a call with such a map. It is safe for
// concurrent use and costs a pass over the names per key.
func (s *Schema) CheckKeyNames(id string, names []KeyName, complete bool) []*Error {
	if s == nil || s.Type != "map" {
		return nil
	}
	var errs []*Error
	if !s.OtherKeys {
		for _, n := range names {
			if !s.knowsName(n.Name) {
				shown := ":" + n.Name
				if n.String {
					shown = strconv.Quote(n.Name)
				}
				errs = append(errs, s.unknownKey(id, shown, n.Name))
			}
		}
	}
	if complete {
		for _, k := range s.Keys {
			if !k.Required {
				continue
			}
			found := false
			for _, n := range names {
				found = found || n.Name == k.Name
			}
			if !found {
				errs = append(errs, &Error{Capability: id, Key: k.Name, Msg: fmt.Sprintf("required %s is missing", typeName(k.Type))})
			}
		}
	}
	return errs
}

// A KeyName is a map key known by name: a keyword's name without the
// colon, or a string (String set).
type KeyName struct {
	Name   string
	String bool
}

func (s *Schema) knows(k rtfs.Value) bool {
	switch k := k.(type) {
	case rtfs.Keyword:
		return s.knowsName(string(k))
	case rtfs.String:
		return s.knowsName(string(k))
	}
	return false
}

func (s *Schema) knowsName(name string) bool {
	for _, key := range s.Keys {
		if key.Name == name {
			return true
		}
	}
	return false
}

func (s *Schema) keyList() string {
	names := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		names[i] = ":" + k.Name
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// Field returns the value of m under the keyword name, or else under the
// string name. A nil m has no fields.
func Field(m *rtfs.Map, name string) (rtfs.Value, bool) {
	if m == nil {
		return nil, false
	}
	if v, ok := m.GetKeyword(name); ok {
		return v, true
	}
	return m.Get(rtfs.String(name))
}

func typeName(spec string) string {
	if spec == "" {
		return "any"
	}
	return strings.ReplaceAll(spec, "|", " or ")
}

// describe names a value's kind and, for short scalars, the value itself.
func describe(v rtfs.Value) string {
	switch v.Kind().String() {
	case "nil":
		return "nil"
	case "map", "vector", "list", "set", "fn":
		return v.Kind().String()
	}
	s := v.String()
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return v.Kind().String() + " " + s
}

// checkRange reports a value outside k's Enum or below its Min ("" when it
// is fine).
func (k Key) checkRange(v rtfs.Value) string {
	switch v := v.(type) {
	case rtfs.String:
		return k.checkEnum(string(v))
	case rtfs.Keyword:
		return k.checkEnum(string(v))
	case rtfs.Int:
		return k.checkMin(int64(v))
	}
	return ""
}

func (k Key) checkEnum(s string) string {
	if len(k.Enum) == 0 {
		return ""
	}
	for _, e := range k.Enum {
		if e == s {
			return ""
		}
	}
	return fmt.Sprintf("%q is not one of %s", s, strings.Join(k.Enum, ", "))
}

func (k Key) checkMin(n int64) string {
	if k.Min != nil && n < *k.Min {
		return fmt.Sprintf("must be at least %d, got %d", *k.Min, n)
	}
	return ""
}
