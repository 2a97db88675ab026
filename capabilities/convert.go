package capabilities

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/rtfshost/rtfshost/rtfs"
)

// This file converts between RTFS values and Go values, for embedders that
// would rather write a capability over Go types (Typed) than over
// []rtfs.Value. Package rtfs itself builds values without reflection; the
// reflection lives here, in the embedding layer.
//
// The rule, one for both directions:
//
//   - bool <-> bool; every Go integer kind <-> int (a value out of the Go
//     type's range is an error, never a wrapped number); float32 and
//     float64 <-> number (an RTFS int is accepted for a float);
//     string <-> string.
//   - A type that implements encoding.TextUnmarshaler is read from an RTFS
//     string (time.Time, net.IP, ...); one that implements
//     encoding.TextMarshaler is written as one.
//   - The RTFS value types (rtfs.Keyword, rtfs.Symbol, rtfs.Int, *rtfs.Map,
//     ...) and rtfs.Value itself pass through unchanged.
//   - A slice or array <-> a vector (a list or a set is accepted too).
//   - A map with string (or rtfs.Keyword) keys <-> a map; keys are written
//     as keywords, and read from keywords or strings.
//   - A struct <-> a map: each exported field is the key named by its
//     `rtfs:"name"` tag, else its `json:"name"` tag, else its Go name in
//     kebab case (StreamID -> :stream-id, MaxSteps -> :max-steps, URL ->
//     :url). A tag of "-" leaves the field out. A field is required unless
//     its tag says omitempty or omitzero or it is a pointer; on the way out
//     such a field is left out when it is the zero value. Embedded structs'
//     fields count as the outer struct's, as in encoding/json.
//   - A pointer is its element, or nil; an interface (any) reads as the
//     natural Go value (map[string]any with the keys' names, []any, int64,
//     float64, string, bool, nil) and writes whatever it holds.

// ToGo stores the RTFS value v in the Go value dst points to, following the
// rule above. The error names the path of the first mismatch, such as
// `.items[2].price: expected number, got string "x"`. It is safe for
// concurrent use; the type information of a struct is computed once per
// type and cached.
func ToGo(v rtfs.Value, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("capabilities.ToGo: destination must be a non-nil pointer, got %T", dst)
	}
	if err := decodeValue(v, rv.Elem()); err != nil {
		return err
	}
	return nil
}

// FromGo returns the RTFS value of x, following the rule above. It fails for
// what has no RTFS form (channels, functions, complex numbers, a map whose
// keys are not strings, an unsigned integer past the largest int, a cycle
// deeper than maxDepth). It is safe for concurrent use.
func FromGo(x any) (rtfs.Value, error) {
	if x == nil {
		return rtfs.Nil, nil
	}
	return encodeValue(reflect.ValueOf(x), 0)
}

// maxDepth bounds the nesting FromGo follows, so that a cyclic Go value is
// an error instead of a stack overflow.
const maxDepth = 256

// A ConvertError is a value that does not convert: Path is where in the
// value (".key", "[i]"; empty for the whole value), Msg what is wrong.
type ConvertError struct {
	Path string
	Msg  string
}

// Error returns "PATH: MSG", or MSG alone for the whole value.
func (e *ConvertError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// at prefixes the path of a *ConvertError with seg.
func at(seg string, err error) error {
	var ce *ConvertError
	if errors.As(err, &ce) {
		return &ConvertError{Path: seg + ce.Path, Msg: ce.Msg}
	}
	return err
}

func mismatch(want string, v rtfs.Value) error {
	return &ConvertError{Msg: fmt.Sprintf("expected %s, got %s", want, describe(v))}
}

var (
	valueType       = reflect.TypeFor[rtfs.Value]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	keywordType     = reflect.TypeFor[rtfs.Keyword]()
)

// decodeValue stores v in dst, which is settable.
func decodeValue(v rtfs.Value, dst reflect.Value) error {
	if v == nil {
		v = rtfs.Nil
	}
	t := dst.Type()
	// RTFS values pass through: the interface itself, or the concrete
	// type the value has.
	if t == valueType {
		dst.Set(reflect.ValueOf(&v).Elem())
		return nil
	}
	if t.Implements(valueType) {
		if v == rtfs.Nil && t.Kind() == reflect.Pointer {
			dst.SetZero()
			return nil
		}
		if reflect.TypeOf(v) != t {
			return mismatch(rtfsKindOf(t), v)
		}
		dst.Set(reflect.ValueOf(v))
		return nil
	}
	if t.Kind() == reflect.Pointer {
		if v == rtfs.Nil {
			dst.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		if err := decodeValue(v, p.Elem()); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		s, ok := v.(rtfs.String)
		if !ok {
			return mismatch("string", v)
		}
		if err := dst.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return &ConvertError{Msg: fmt.Sprintf("%s: %v", t, err)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return &ConvertError{Msg: fmt.Sprintf("cannot convert to interface type %s", t)}
		}
		g, err := natural(v, 0)
		if err != nil {
			return err
		}
		if g == nil {
			dst.SetZero()
		} else {
			dst.Set(reflect.ValueOf(g))
		}
		return nil
	case reflect.Bool:
		b, ok := v.(rtfs.Bool)
		if !ok {
			return mismatch("bool", v)
		}
		dst.SetBool(bool(b))
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(rtfs.Int)
		if !ok {
			return mismatch("int", v)
		}
		if dst.OverflowInt(int64(n)) {
			return &ConvertError{Msg: fmt.Sprintf("%d does not fit in %s", n, t)}
		}
		dst.SetInt(int64(n))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := v.(rtfs.Int)
		if !ok {
			return mismatch("int", v)
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			return &ConvertError{Msg: fmt.Sprintf("%d does not fit in %s", n, t)}
		}
		dst.SetUint(uint64(n))
		return nil
	case reflect.Float32, reflect.Float64:
		var f float64
		switch n := v.(type) {
		case rtfs.Float:
			f = float64(n)
		case rtfs.Int:
			f = float64(n)
		default:
			return mismatch("number", v)
		}
		if dst.OverflowFloat(f) {
			return &ConvertError{Msg: fmt.Sprintf("%v does not fit in %s", f, t)}
		}
		dst.SetFloat(f)
		return nil
	case reflect.String:
		s, ok := v.(rtfs.String)
		if !ok {
			return mismatch("string", v)
		}
		dst.SetString(string(s))
		return nil
	case reflect.Slice, reflect.Array:
		return decodeSeq(v, dst)
	case reflect.Map:
		return decodeMap(v, dst)
	case reflect.Struct:
		return decodeStruct(v, dst)
	}
	return &ConvertError{Msg: fmt.Sprintf("cannot convert to %s", t)}
}

// elements returns the elements of a vector, list or set, and whether v is
// one.
func elements(v rtfs.Value) ([]rtfs.Value, bool) {
	var out []rtfs.Value
	switch c := v.(type) {
	case *rtfs.Vector:
		out = make([]rtfs.Value, c.Len())
		for i := range out {
			out[i] = c.Index(i)
		}
	case *rtfs.List:
		out = make([]rtfs.Value, 0, c.Len())
		for l := c; l.Len() > 0; l = l.Rest() {
			out = append(out, l.First())
		}
	case *rtfs.Set:
		out = make([]rtfs.Value, 0, c.Len())
		c.Range(func(x rtfs.Value) bool { out = append(out, x); return true })
	default:
		return nil, false
	}
	return out, true
}

func decodeSeq(v rtfs.Value, dst reflect.Value) error {
	t := dst.Type()
	if v == rtfs.Nil && t.Kind() == reflect.Slice {
		dst.SetZero()
		return nil
	}
	elems, ok := elements(v)
	if !ok {
		return mismatch("vector", v)
	}
	if t.Kind() == reflect.Array {
		if len(elems) != t.Len() {
			return &ConvertError{Msg: fmt.Sprintf("expected %d elements, got %d", t.Len(), len(elems))}
		}
	} else {
		dst.Set(reflect.MakeSlice(t, len(elems), len(elems)))
	}
	for i, e := range elems {
		if err := decodeValue(e, dst.Index(i)); err != nil {
			return at("["+strconv.Itoa(i)+"]", err)
		}
	}
	return nil
}

// keyName returns the name of a map key given as a keyword or a string.
func keyName(k rtfs.Value) (string, bool) {
	switch k := k.(type) {
	case rtfs.Keyword:
		return string(k), true
	case rtfs.String:
		return string(k), true
	}
	return "", false
}

func decodeMap(v rtfs.Value, dst reflect.Value) error {
	t := dst.Type()
	if v == rtfs.Nil {
		dst.SetZero()
		return nil
	}
	m, ok := v.(*rtfs.Map)
	if !ok {
		return mismatch("map", v)
	}
	if t.Key().Kind() != reflect.String {
		return &ConvertError{Msg: fmt.Sprintf("cannot convert to %s: map keys must be strings", t)}
	}
	out := reflect.MakeMapWithSize(t, m.Len())
	var err error
	m.Range(func(k, e rtfs.Value) bool {
		name, ok := keyName(k)
		if !ok {
			err = &ConvertError{Msg: fmt.Sprintf("map key %s is not a keyword or a string", describe(k))}
			return false
		}
		ev := reflect.New(t.Elem()).Elem()
		if err = decodeValue(e, ev); err != nil {
			err = at("."+name, err)
			return false
		}
		kv := reflect.New(t.Key()).Elem()
		kv.SetString(name)
		out.SetMapIndex(kv, ev)
		return true
	})
	if err != nil {
		return err
	}
	dst.Set(out)
	return nil
}

func decodeStruct(v rtfs.Value, dst reflect.Value) error {
	m, ok := v.(*rtfs.Map)
	if v == rtfs.Nil {
		m, ok = rtfs.MapOf(), true // nil is the empty map: the required keys are missing
	}
	if !ok {
		return mismatch("map", v)
	}
	info, err := structOf(dst.Type())
	if err != nil {
		return &ConvertError{Msg: err.Error()}
	}
	for _, f := range info.fields {
		e, ok := Field(m, f.name)
		if !ok || e == rtfs.Nil {
			if f.required {
				return &ConvertError{Path: "." + f.name, Msg: "required key is missing"}
			}
			continue
		}
		if err := decodeValue(e, fieldByIndex(dst, f.index)); err != nil {
			return at("."+f.name, err)
		}
	}
	var unknown string
	m.Range(func(k, _ rtfs.Value) bool {
		name, ok := keyName(k)
		if !ok || info.byName[name] == nil {
			unknown = rtfs.Excerpt(k, 60)
			return false
		}
		return true
	})
	if unknown != "" {
		return &ConvertError{Msg: fmt.Sprintf("unknown key %s (known keys: %s)", unknown, info.keyList())}
	}
	return nil
}

// fieldByIndex is Value.FieldByIndex that allocates the embedded struct
// pointers it passes through.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// natural returns v as the natural Go value of an any.
func natural(v rtfs.Value, depth int) (any, error) {
	if depth > maxDepth {
		return nil, &ConvertError{Msg: "value nested too deep"}
	}
	switch x := v.(type) {
	case rtfs.NilType:
		return nil, nil
	case rtfs.Bool:
		return bool(x), nil
	case rtfs.Int:
		return int64(x), nil
	case rtfs.Float:
		return float64(x), nil
	case rtfs.String:
		return string(x), nil
	case rtfs.Keyword:
		return string(x), nil
	case rtfs.Symbol:
		return string(x), nil
	case *rtfs.Map:
		out := make(map[string]any, x.Len())
		var err error
		x.Range(func(k, e rtfs.Value) bool {
			name, ok := keyName(k)
			if !ok {
				err = &ConvertError{Msg: fmt.Sprintf("map key %s is not a keyword or a string", describe(k))}
				return false
			}
			var g any
			if g, err = natural(e, depth+1); err != nil {
				err = at("."+name, err)
				return false
			}
			out[name] = g
			return true
		})
		return out, err
	}
	if elems, ok := elements(v); ok {
		out := make([]any, len(elems))
		for i, e := range elems {
			g, err := natural(e, depth+1)
			if err != nil {
				return nil, at("["+strconv.Itoa(i)+"]", err)
			}
			out[i] = g
		}
		return out, nil
	}
	return nil, &ConvertError{Msg: fmt.Sprintf("a %s has no Go form", v.Kind())}
}

// encodeValue returns the RTFS value of x.
func encodeValue(x reflect.Value, depth int) (rtfs.Value, error) {
	if depth > maxDepth {
		return nil, &ConvertError{Msg: "value nested too deep (a cycle?)"}
	}
	if !x.IsValid() {
		return rtfs.Nil, nil
	}
	t := x.Type()
	if t.Implements(valueType) && !(t.Kind() == reflect.Pointer && x.IsNil()) && t.Kind() != reflect.Interface {
		return x.Interface().(rtfs.Value), nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if x.IsNil() {
			return rtfs.Nil, nil
		}
		if t.Kind() == reflect.Pointer && t.Implements(textMarshaler) {
			return encodeText(x)
		}
		return encodeValue(x.Elem(), depth+1)
	}
	if t.Implements(textMarshaler) {
		return encodeText(x)
	}
	switch t.Kind() {
	case reflect.Bool:
		return rtfs.Bool(x.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rtfs.Int(x.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := x.Uint()
		if n > math.MaxInt64 {
			return nil, &ConvertError{Msg: fmt.Sprintf("%d is past the largest RTFS int", n)}
		}
		return rtfs.Int(int64(n)), nil
	case reflect.Float32, reflect.Float64:
		return rtfs.Float(x.Float()), nil
	case reflect.String:
		return rtfs.String(x.String()), nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && x.IsNil() {
			return rtfs.Nil, nil
		}
		elems := make([]rtfs.Value, x.Len())
		for i := range elems {
			e, err := encodeValue(x.Index(i), depth+1)
			if err != nil {
				return nil, at("["+strconv.Itoa(i)+"]", err)
			}
			elems[i] = e
		}
		return rtfs.NewVector(elems...), nil
	case reflect.Map:
		if x.IsNil() {
			return rtfs.Nil, nil
		}
		if t.Key().Kind() != reflect.String {
			return nil, &ConvertError{Msg: fmt.Sprintf("a %s has no RTFS form: map keys must be strings", t)}
		}
		kvs := make([]rtfs.Value, 0, 2*x.Len())
		iter := x.MapRange()
		for iter.Next() {
			name := iter.Key().String()
			e, err := encodeValue(iter.Value(), depth+1)
			if err != nil {
				return nil, at("."+name, err)
			}
			kvs = append(kvs, rtfs.Keyword(name), e)
		}
		return rtfs.MapOf(kvs...), nil
	case reflect.Struct:
		info, err := structOf(t)
		if err != nil {
			return nil, &ConvertError{Msg: err.Error()}
		}
		kvs := make([]rtfs.Value, 0, 2*len(info.fields))
		for _, f := range info.fields {
			fv, ok := fieldOut(x, f.index)
			if !ok || (f.omitZero && fv.IsZero()) {
				continue
			}
			e, err := encodeValue(fv, depth+1)
			if err != nil {
				return nil, at("."+f.name, err)
			}
			kvs = append(kvs, rtfs.Keyword(f.name), e)
		}
		return rtfs.MapOf(kvs...), nil
	}
	return nil, &ConvertError{Msg: fmt.Sprintf("a %s has no RTFS form", t)}
}

func encodeText(x reflect.Value) (rtfs.Value, error) {
	b, err := x.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return nil, &ConvertError{Msg: fmt.Sprintf("%s: %v", x.Type(), err)}
	}
	return rtfs.String(b), nil
}

// fieldOut follows index through x, reporting false where an embedded
// struct pointer on the way is nil.
func fieldOut(x reflect.Value, index []int) (reflect.Value, bool) {
	for i, n := range index {
		if i > 0 && x.Kind() == reflect.Pointer {
			if x.IsNil() {
				return reflect.Value{}, false
			}
			x = x.Elem()
		}
		x = x.Field(n)
	}
	return x, true
}

// A structInfo is the keys of a struct type, in field order.
type structInfo struct {
	fields []*fieldInfo
	byName map[string]*fieldInfo
}

type fieldInfo struct {
	name     string
	index    []int
	typ      reflect.Type
	required bool
	omitZero bool
	doc      string
}

func (s *structInfo) keyList() string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = ":" + f.name
	}
	return strings.Join(names, " ")
}

// structs caches structInfo by type; safe for concurrent use, as
// encoding/json's cache is.
var structs sync.Map // reflect.Type -> *structInfo or error

// structOf returns the keys of struct type t.
func structOf(t reflect.Type) (*structInfo, error) {
	if c, ok := structs.Load(t); ok {
		if err, bad := c.(error); bad {
			return nil, err
		}
		return c.(*structInfo), nil
	}
	info := &structInfo{byName: map[string]*fieldInfo{}}
	err := collectFields(t, nil, info, 0)
	var c any = info
	if err != nil {
		c = err
	}
	structs.Store(t, c)
	return info, err
}

func collectFields(t reflect.Type, index []int, info *structInfo, depth int) error {
	if depth > 16 {
		return fmt.Errorf("struct %s embeds too deep", t)
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name, opts, tagged := fieldTag(sf)
		if name == "-" && opts == "" && tagged {
			continue
		}
		if sf.Anonymous && !tagged {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := collectFields(et, idx, info, depth+1); err != nil {
					return err
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = kebab(sf.Name)
		}
		if info.byName[name] != nil {
			return fmt.Errorf("struct %s: two fields are named :%s", t, name)
		}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		f := &fieldInfo{
			name:     name,
			index:    idx,
			typ:      sf.Type,
			required: !omit && sf.Type.Kind() != reflect.Pointer,
			omitZero: omit,
			doc:      sf.Tag.Get("doc"),
		}
		info.fields = append(info.fields, f)
		info.byName[name] = f
	}
	return nil
}

// fieldTag returns the name and options of sf's rtfs tag, else of its json
// tag, and whether either was present.
func fieldTag(sf reflect.StructField) (name, opts string, tagged bool) {
	tag, ok := sf.Tag.Lookup("rtfs")
	if !ok {
		tag, ok = sf.Tag.Lookup("json")
	}
	if !ok {
		return "", "", false
	}
	name, opts, _ = strings.Cut(tag, ",")
	return name, opts, true
}

// kebab turns a Go name into an RTFS key: StreamID -> stream-id, URL ->
// url, HTTPServer -> http-server, MaxSteps -> max-steps.
func kebab(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]))
			nextLower := i > 0 && i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsLower(rs[i+1])
			if prevLower || nextLower {
				b.WriteByte('-')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		if r == '_' {
			b.WriteByte('-')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rtfsKindOf names the RTFS type a Go type converts from, in the notation
// of Key.Type.
func rtfsKindOf(t reflect.Type) string {
	switch t {
	case valueType:
		return "any"
	case keywordType:
		return "keyword"
	case reflect.TypeFor[rtfs.Symbol]():
		return "symbol"
	case reflect.TypeFor[rtfs.String]():
		return "string"
	case reflect.TypeFor[rtfs.Int]():
		return "int"
	case reflect.TypeFor[rtfs.Float]():
		return "float"
	case reflect.TypeFor[rtfs.Bool]():
		return "bool"
	case reflect.TypeFor[*rtfs.Map]():
		return "map"
	case reflect.TypeFor[*rtfs.Vector]():
		return "vector"
	case reflect.TypeFor[*rtfs.List]():
		return "list"
	case reflect.TypeFor[*rtfs.Set]():
		return "set"
	}
	if t.Kind() == reflect.Pointer {
		return rtfsKindOf(t.Elem())
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) || t.Implements(textMarshaler) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "vector|list|set"
	case reflect.Map, reflect.Struct:
		return "map"
	case reflect.Interface:
		return "any"
	}
	return ""
}
