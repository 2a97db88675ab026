package rtfs

import (
	"strconv"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Value is an RTFS value. Values are immutable and safe to share between
// goroutines. The concrete types are the scalars NilType, Bool, Int, Float,
// String, Keyword and Symbol, the persistent collections *List, *Vector, *Map
// and *Set, and the functions *Closure and *Builtin. Hosts build values with
// these types and their constructors; no reflection is involved.
//
// Value is an alias of types.Value (methods Kind() Kind and String() string,
// the printed form, which the reader reads back for data values), so that the
// collections' methods satisfy the views rtfs/types checks through.
type Value = types.Value

// Kind classifies RTFS values (nil, bool, int, ... fn).
type Kind = types.Kind

// NilType is the type of Nil.
type NilType byte

// Nil is RTFS nil. Go code compares with v == Nil.
const Nil = NilType(0)

// Bool is an RTFS boolean.
type Bool bool

// True and False are the RTFS booleans.
const (
	True  = Bool(true)  // the RTFS value true
	False = Bool(false) // the RTFS value false; with nil the only falsy values
)

// Int is an RTFS integer (64-bit, overflow is an error in arithmetic).
type Int int64

// Float is an RTFS float (IEEE 754 double).
type Float float64

// String is an RTFS string (UTF-8).
type String string

// Keyword is an RTFS keyword. Its value is the name without the leading colon:
// Keyword("mcp.stream.start") prints as :mcp.stream.start and Keyword("my.ns/foo")
// as :my.ns/foo.
type Keyword string

// Symbol is an RTFS symbol, the value of a quoted name such as 'process.
type Symbol string

// Truth reports whether v counts as true: everything but nil and false does.
func Truth(v Value) bool { return v != Nil && v != False }

// Kind implements Value.
func (NilType) Kind() Kind { return types.KindNil }

// Kind implements Value.
func (Bool) Kind() Kind { return types.KindBool }

// Kind implements Value.
func (Int) Kind() Kind { return types.KindInt }

// Kind implements Value.
func (Float) Kind() Kind { return types.KindFloat }

// Kind implements Value.
func (String) Kind() Kind { return types.KindString }

// Kind implements Value.
func (Keyword) Kind() Kind { return types.KindKeyword }

// Kind implements Value.
func (Symbol) Kind() Kind { return types.KindSymbol }

// String implements Value.
func (NilType) String() string { return "nil" }

// String implements Value.
func (b Bool) String() string { return strconv.FormatBool(bool(b)) }

// String implements Value.
func (i Int) String() string { return strconv.FormatInt(int64(i), 10) }

// String implements Value: floats always print with a decimal point or exponent,
// and the special values as ##Inf, ##-Inf and ##NaN.
func (f Float) String() string {
	return syntax.FormatFloat(float64(f))
}

// String implements Value: the quoted, escaped form.
func (s String) String() string { return strconv.Quote(string(s)) }

// String implements Value.
func (k Keyword) String() string { return ":" + string(k) }

// String implements Value.
func (s Symbol) String() string { return string(s) }

// Float64 returns the integer as a float (implements types.Number).
func (i Int) Float64() float64 { return float64(i) }

// Float64 implements types.Number.
func (f Float) Float64() float64 { return float64(f) }

// Text returns the string's contents (implements types.Text).
func (s String) Text() string { return string(s) }

// Text returns the keyword's name without the colon (implements types.Text).
func (k Keyword) Text() string { return string(k) }

// Text returns the symbol's name (implements types.Text).
func (s Symbol) Text() string { return string(s) }

// TextOf is the text of v: a string's contents, a keyword's or symbol's name
// (without the colon), else v's printed form cut to maxTextOf bytes (see
// Excerpt: a value that shares structure prints without end); "" for a Go
// nil.
func TextOf(v Value) string {
	switch v := v.(type) {
	case nil:
		return ""
	case interface{ Text() string }:
		return v.Text()
	}
	return Excerpt(v, maxTextOf)
}

// maxTextOf bounds the printed form TextOf gives.
const maxTextOf = 4096
