package capabilities

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Typed returns a capability whose handler takes and returns Go values, as
// go-sdk's mcp.AddTool does for tools: fn receives the call's argument
// converted to In and answers an Out, converted back to an RTFS value, by
// the rule of ToGo and FromGo. The capability's Input schema is derived from
// In and its Output schema from Out, so that a bad argument is refused
// before fn runs with the same precise error as a hand-written schema gives
// (naming the capability, the key and what was expected), and a nested
// mismatch names its path (`key :items: [2].price: expected number, got
// string "x"`).
//
// In is usually a struct: `(call :shop.price {:sku "A1" :qty 2})` reaches
// a func(ctx, struct{ SKU string; Qty int }) with both fields set. A struct
// whose fields are all optional (or struct{}) also accepts no argument;
// a pointer In accepts nil. A map In accepts any keys; a scalar In (string,
// int, float64, bool, rtfs.Value) takes the one argument as it is.
//
// fn runs on the goroutine of the program or stream that made the call,
// must honour ctx, and may see the same call again after a crash: CallOf(ctx)
// returns the *Call, whose fields say which stream and chunk made it. The
// returned Capability may be given Effects before it is registered. Typed
// fails when In or Out has no RTFS form (channels, functions, maps whose
// keys are not strings).
func Typed[In, Out any](id, description string, fn func(ctx context.Context, in In) (Out, error)) (Capability, error) {
	id = strings.TrimPrefix(id, ":")
	if fn == nil {
		return Capability{}, fmt.Errorf("typed capability :%s: nil function", id)
	}
	input, err := schemaOf(reflect.TypeFor[In](), true)
	if err != nil {
		return Capability{}, fmt.Errorf("typed capability :%s: input %s: %w", id, reflect.TypeFor[In](), err)
	}
	output, err := schemaOf(reflect.TypeFor[Out](), false)
	if err != nil {
		return Capability{}, fmt.Errorf("typed capability :%s: output %s: %w", id, reflect.TypeFor[Out](), err)
	}
	return Capability{
		ID:          id,
		Description: description,
		Input:       input,
		Output:      output,
		Handler: func(ctx context.Context, c *Call) (Answer, error) {
			var arg rtfs.Value = rtfs.Nil
			if len(c.Args) == 1 && c.Args[0] != nil {
				arg = c.Args[0]
			}
			var in In
			if err := ToGo(arg, &in); err != nil {
				return Answer{}, convertError(id, err)
			}
			out, err := fn(context.WithValue(ctx, callKey{}, c), in)
			if err != nil {
				return Answer{}, err
			}
			v, err := FromGo(out)
			if err != nil {
				return Answer{}, &Error{Capability: id, Msg: "the answer has no RTFS form", Err: err}
			}
			return Now(v), nil
		},
	}, nil
}

type callKey struct{}

// CallOf returns the call a Typed capability's function is serving, or nil
// when ctx does not come from one. The call must not be modified.
func CallOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// convertError turns a conversion failure of a call's argument into the
// *Error a schema check gives: the top-level key in Key, the rest of the
// path in Msg.
func convertError(id string, err error) error {
	var ce *ConvertError
	if !errors.As(err, &ce) {
		return &Error{Capability: id, Err: err}
	}
	path, msg := ce.Path, ce.Msg
	if !strings.HasPrefix(path, ".") {
		if path != "" {
			msg = path + ": " + msg
		}
		return &Error{Capability: id, Msg: msg}
	}
	key := path[1:]
	rest := ""
	if i := strings.IndexAny(key, ".["); i >= 0 {
		key, rest = key[:i], key[i:]
	}
	if rest != "" {
		msg = rest + ": " + msg
	}
	return &Error{Capability: id, Key: key, Msg: msg}
}

// schemaOf derives the Schema of a Go type. For an input, a type with no
// required part accepts nil.
func schemaOf(t reflect.Type, input bool) (*Schema, error) {
	base := t
	ptr := false
	if base.Kind() == reflect.Pointer && !base.Implements(valueType) {
		base, ptr = base.Elem(), true
	}
	if err := convertible(base, 0); err != nil {
		return nil, err
	}
	s := &Schema{Type: rtfsKindOf(base), Optional: ptr}
	switch {
	case base == valueType || base.Kind() == reflect.Interface:
		s.Type, s.Optional = "", true
	case base.Kind() == reflect.Map:
		s.OtherKeys = true
		s.Optional = s.Optional || !input
	case base.Kind() == reflect.Struct && !base.Implements(valueType) && rtfsKindOf(base) == "map":
		info, err := structOf(base)
		if err != nil {
			return nil, err
		}
		anyRequired := false
		for _, f := range info.fields {
			s.Keys = append(s.Keys, Key{Name: f.name, Type: rtfsKindOf(f.typ), Required: f.required, Doc: f.doc})
			anyRequired = anyRequired || f.required
		}
		s.Optional = s.Optional || !anyRequired
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// convertible reports a type that has no RTFS form, looking inside
// composite types.
func convertible(t reflect.Type, depth int) error {
	if depth > 32 || t.Implements(valueType) || t == valueType {
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) || t.Implements(textMarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return convertible(t.Elem(), depth+1)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("%s: map keys must be strings", t)
		}
		return convertible(t.Elem(), depth+1)
	case reflect.Struct:
		info, err := structOf(t)
		if err != nil {
			return err
		}
		for _, f := range info.fields {
			if err := convertible(f.typ, depth+1); err != nil {
				return fmt.Errorf("field :%s: %w", f.name, err)
			}
		}
		return nil
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return fmt.Errorf("%s: only any or rtfs.Value", t)
		}
		return nil
	}
	if rtfsKindOf(t) == "" {
		return fmt.Errorf("%s has no RTFS form", t)
	}
	return nil
}
