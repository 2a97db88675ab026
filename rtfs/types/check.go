package types

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Type is a parsed type expression. Types are immutable and safe for
// concurrent use; the concrete types are unexported.
type Type interface {
	// String returns the type as a type expression that Parse reads back to an
	// equal type (a canonical spelling, which may differ from the source).
	String() string
	// check returns nil if v conforms to the type, else what is wrong.
	check(v Value) *failure
	// describe names what the type expects, for messages: "int", "string or nil".
	describe() string
}

// A CheckError reports a value that does not conform to a type.
type CheckError struct {
	// Path leads from the checked value to the offending part: map keys as
	// printed (":config :buffer_size"), sequence indices as [i]; "" for the
	// checked value itself.
	Path string
	// Msg says what was expected and what was found, e.g.
	// `expected int, got string "x"` or `missing required key :action`.
	Msg string
}

// Error returns "at PATH: MSG", or MSG when the path is empty.
func (e *CheckError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return "at " + e.Path + ": " + e.Msg
}

// Check returns nil if v conforms to t, and otherwise a *CheckError. It is safe
// for concurrent use and allocates nothing when v conforms, except for the
// entries of a [:map-of K V] type. A nil t accepts every value; a nil v counts
// as RTFS nil. Its cost is linear in the parts of v that t describes.
func Check(t Type, v Value) error {
	if t == nil {
		return nil
	}
	f := t.check(v)
	if f == nil {
		return nil
	}
	return f.toError()
}

// A failure is a check error under construction: the path grows (innermost
// first) as the failure returns through the enclosing collections.
type failure struct {
	msg  string
	path []string
}

func fail(msg string) *failure { return &failure{msg: msg} }

// at prefixes the path with elem and returns f.
func (f *failure) at(elem string) *failure {
	f.path = append(f.path, elem)
	return f
}

func (f *failure) toError() *CheckError {
	var b strings.Builder
	for i := len(f.path) - 1; i >= 0; i-- {
		b.WriteString(f.path[i])
		if i > 0 {
			b.WriteByte(' ')
		}
	}
	return &CheckError{Path: b.String(), Msg: f.msg}
}

func indexElem(i int) string { return "[" + strconv.Itoa(i) + "]" }

// mismatch reports that v is not what t expects.
func mismatch(t Type, v Value) *failure {
	return fail("expected " + t.describe() + ", got " + describeValue(v))
}

// kindOf returns v's kind, treating a Go nil as RTFS nil.
func kindOf(v Value) Kind {
	if v == nil {
		return KindNil
	}
	return v.Kind()
}

// maxShown bounds the printed form of a value in messages.
const maxShown = 80

// describeValue names a value for a message: nil, booleans and keywords by
// their printed form (nil, true, :explode), others by kind and printed form
// (string "x", int 5, map {...}), long forms cut short.
func describeValue(v Value) string {
	k := kindOf(v)
	if v == nil {
		return "nil"
	}
	s := v.String()
	if len(s) > maxShown {
		n := maxShown
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "..."
	}
	switch k {
	case KindNil, KindBool, KindKeyword:
		return s
	}
	return k.String() + " " + s
}
