package types

// Kind classifies RTFS values. rtfs.Kind is an alias of this type.
type Kind uint8

// The kinds of RTFS values.
const (
	KindNil     Kind = iota // nil
	KindBool                // true, false
	KindInt                 // 64-bit integers
	KindFloat               // 64-bit IEEE floats
	KindString              // UTF-8 strings
	KindKeyword             // :k, :my.ns/k
	KindSymbol              // 'sym
	KindList                // (a b)
	KindVector              // [a b]
	KindMap                 // {k v}
	KindSet                 // #{a b}
	KindFn                  // builtins and closures
	KindRegex               // #"pattern"
	KindSeq                 // a lazy sequence: (range), (iterate f x), (lazy-seq ...)
)

var kindNames = [...]string{
	KindNil:     "nil",
	KindBool:    "bool",
	KindInt:     "int",
	KindFloat:   "float",
	KindString:  "string",
	KindKeyword: "keyword",
	KindSymbol:  "symbol",
	KindList:    "list",
	KindVector:  "vector",
	KindMap:     "map",
	KindSet:     "set",
	KindFn:      "fn",
	KindRegex:   "regex",
	KindSeq:     "seq",
}

// String returns the kind's RTFS type name, as error messages use it: "int", "map"...
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Value is the read-only view of an RTFS value that type checks need. Every
// rtfs.Value implements it; type checks use the optional interfaces below to look
// inside values, so this package does not depend on package rtfs.
type Value interface {
	Kind() Kind     // the value's kind; constant for one value
	String() string // the printed form, used in error messages
}

// Number is implemented by int and float values.
type Number interface {
	Value
	Float64() float64 // the value as a float64 (an int above 2^53 rounds)
}

// Text is implemented by string, keyword and symbol values: Text returns the
// string's contents, or the keyword's or symbol's name without the colon.
type Text interface {
	Value
	Text() string // the contents or name, without quotes or colon
}

// Sequence is implemented by lists, vectors and sets.
type Sequence interface {
	Value
	Len() int // the number of elements, O(1)
	// Index returns element i, 0 <= i < Len(). For sets the order is unspecified
	// but stable for one value.
	Index(i int) Value
}

// Mapping is implemented by maps.
type Mapping interface {
	Value
	Len() int // the number of entries, O(1)
	// GetKeyword returns the value stored under the keyword whose name is name.
	GetKeyword(name string) (Value, bool)
	// Range calls f for each entry until f returns false.
	Range(f func(k, v Value) bool)
}
