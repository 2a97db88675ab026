package syntax

// A Node is one form read from RTFS source. The concrete types are *Nil, *Bool,
// *Int, *Float, *String, *Regex, *Keyword, *Symbol, *List, *Vector, *Map, *Set
// and *TypeExpr. Reader sugar is expanded into plain forms: 'x reads as (quote x),
// @x as (deref x), #(...) as (fn [%1 ...] (...)). Nodes are immutable after
// reading and safe to share between goroutines.
type Node interface {
	// Pos returns the position of the form's first character.
	Pos() Pos
	// String returns the form as source text that reads back to an equal form
	// (positions aside). It allocates; use it for error messages and tests.
	String() string
	node()
}

// Nil is the literal nil.
type Nil struct {
	At Pos // position of the literal
}

// Bool is the literal true or false.
type Bool struct {
	At    Pos  // position of the literal
	Value bool // the literal's value
}

// Int is an integer literal.
type Int struct {
	At    Pos   // position of the literal's first character (a sign or digit)
	Value int64 // the literal's value
}

// Float is a float literal, including ##Inf, ##-Inf and ##NaN.
type Float struct {
	At    Pos     // position of the literal's first character
	Value float64 // the literal's value
}

// String is a string literal, escapes already decoded.
type String struct {
	At    Pos    // position of the opening quote
	Value string // the contents, escapes decoded
}

// Regex is the regular expression literal #"...". Pattern is the text
// between the quotes as written: backslashes are the pattern's own (#"\d+"
// is the pattern \d+), and \" stands for a quote. The reader checks that
// Go's regexp package (RE2 syntax) accepts it.
type Regex struct {
	At      Pos    // position of the '#'
	Pattern string // the pattern's source
}

// Keyword is a keyword; Name excludes the colon (":my.ns/foo" has Name "my.ns/foo").
type Keyword struct {
	At   Pos    // position of the colon
	Name string // the name without the colon
}

// Symbol is a symbol such as foo, my.ns/bar or +.
type Symbol struct {
	At   Pos    // position of the symbol's first character
	Name string // the symbol as written, namespace included
	Meta *Map   // from ^{...} or ^:kw before the symbol; nil if none
}

// List is (a b c).
type List struct {
	At    Pos    // position of the '('
	Elems []Node // the forms inside, in order
	Meta  *Map   // metadata read before the form; nil if none
}

// Vector is [a b c].
type Vector struct {
	At    Pos    // position of the '['
	Elems []Node // the forms inside, in order
	Meta  *Map   // metadata read before the form; nil if none
}

// Map is {k v ...}; Elems alternates keys and values (len is even). The reader
// rejects a map literal whose literal keys (nil, booleans, numbers, strings,
// keywords) repeat.
type Map struct {
	At    Pos    // position of the '{'
	Elems []Node // keys and values alternating: k0 v0 k1 v1 ...
	Meta  *Map   // metadata read before the form; nil if none
}

// Set is the set literal #{a b c}. The reader rejects repeated literal elements.
// At is the position of the '#'.
type Set struct {
	At    Pos    // position of the '#'
	Elems []Node // the elements, in source order
	Meta  *Map   // metadata read before the form; nil if none
}

// TypeExpr is the type-expression form :[ ... ], a colon directly followed by a
// vector, as in [s c m] :[ :map { :state :any } ]. A plain type name such as :int
// reads as a *Keyword; the compiler decides from the position whether a form is
// a type annotation, and package rtfs/types turns it into a types.Type.
type TypeExpr struct {
	At  Pos     // position of the colon
	Vec *Vector // the vector after the colon, read as ordinary forms
}

// Pos implements Node.
func (n *Nil) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Bool) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Int) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Float) Pos() Pos { return n.At }

// Pos implements Node.
func (n *String) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Keyword) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Regex) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Symbol) Pos() Pos { return n.At }

// Pos implements Node.
func (n *List) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Vector) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Map) Pos() Pos { return n.At }

// Pos implements Node.
func (n *Set) Pos() Pos { return n.At }

// Pos implements Node.
func (n *TypeExpr) Pos() Pos { return n.At }

func (*Nil) node()      {}
func (*Bool) node()     {}
func (*Int) node()      {}
func (*Float) node()    {}
func (*String) node()   {}
func (*Keyword) node()  {}
func (*Regex) node()    {}
func (*Symbol) node()   {}
func (*List) node()     {}
func (*Vector) node()   {}
func (*Map) node()      {}
func (*Set) node()      {}
func (*TypeExpr) node() {}
