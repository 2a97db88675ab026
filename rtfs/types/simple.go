package types

// primType is a primitive type such as :int or :map (any value of one kind).
type primType struct{ kind Kind }

func (t primType) String() string   { return ":" + t.kind.String() }
func (t primType) describe() string { return t.kind.String() }
func (t primType) check(v Value) *failure {
	if kindOf(v) != t.kind {
		return mismatch(t, v)
	}
	return nil
}

// anyType is :any.
type anyType struct{}

func (anyType) String() string       { return ":any" }
func (anyType) describe() string     { return "any value" }
func (anyType) check(Value) *failure { return nil }

// neverType is :never, which no value has.
type neverType struct{}

func (neverType) String() string           { return ":never" }
func (neverType) describe() string         { return "no value (:never)" }
func (t neverType) check(v Value) *failure { return mismatch(t, v) }

// numberType is :number: an int or a float.
type numberType struct{}

func (numberType) String() string   { return ":number" }
func (numberType) describe() string { return "number" }
func (t numberType) check(v Value) *failure {
	if k := kindOf(v); k != KindInt && k != KindFloat {
		return mismatch(t, v)
	}
	return nil
}

// namedType is a custom, qualified type name such as :my.app/Reading. It
// documents intent and accepts any value.
type namedType struct{ name string }

func (t namedType) String() string   { return ":" + t.name }
func (t namedType) describe() string { return t.name }
func (namedType) check(Value) *failure {
	return nil
}

// optType is T?: nil or a T (T is a primitive or named type).
type optType struct{ base Type }

func (t optType) String() string   { return t.base.String() + "?" }
func (t optType) describe() string { return t.base.describe() + " or nil" }
func (t optType) check(v Value) *failure {
	if kindOf(v) == KindNil {
		return nil
	}
	if t.base.check(v) != nil {
		return mismatch(t, v)
	}
	return nil
}

// unionType is [:union T...]: a value of any of the alternatives.
type unionType struct{ alts []Type }

func (t unionType) String() string { return listString("union", t.alts) }
func (t unionType) describe() string {
	s := ""
	for i, a := range t.alts {
		if i > 0 {
			s += " or "
		}
		s += a.describe()
	}
	return s
}
func (t unionType) check(v Value) *failure {
	for _, a := range t.alts {
		if a.check(v) == nil {
			return nil
		}
	}
	return mismatch(t, v)
}

// andType is [:and T...]: a value that conforms to every part, checked in order
// (typically a base type and predicates). The first failure is reported.
type andType struct{ parts []Type }

func (t andType) String() string { return listString("and", t.parts) }
func (t andType) describe() string {
	s := ""
	for i, p := range t.parts {
		if i > 0 {
			s += " and "
		}
		s += p.describe()
	}
	return s
}
func (t andType) check(v Value) *failure {
	for _, p := range t.parts {
		if f := p.check(v); f != nil {
			return f
		}
	}
	return nil
}

// fnType is [:fn [P...] R] or [:=> [P...] R]. Only the kind is checked at run
// time: a function's parameter and result types are not observable.
type fnType struct {
	head   string // "fn" or "=>"
	params []Type
	rest   Type // after &, or nil
	ret    Type
}

func (t fnType) String() string {
	s := "[:" + t.head + " ["
	for i, p := range t.params {
		if i > 0 {
			s += " "
		}
		s += p.String()
	}
	if t.rest != nil {
		if len(t.params) > 0 {
			s += " "
		}
		s += "& " + t.rest.String()
	}
	return s + "] " + t.ret.String() + "]"
}
func (t fnType) describe() string { return "fn" }
func (t fnType) check(v Value) *failure {
	if kindOf(v) != KindFn {
		return mismatch(t, v)
	}
	return nil
}

// listString prints [:head T...].
func listString(head string, ts []Type) string {
	s := "[:" + head
	for _, t := range ts {
		s += " " + t.String()
	}
	return s + "]"
}
