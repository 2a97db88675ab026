package syntax

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// readDispatch reads the forms that start with '#': ##Inf ##-Inf ##NaN, #(...)
// and #{...}. (#| comments are skipped as whitespace.)
func (r *reader) readDispatch(start Pos) (Node, error) {
	switch r.at(1) {
	case '#':
		r.advanceN(2)
		var tok string
		if !r.eof() {
			tok = r.token()
		}
		switch tok {
		case "Inf":
			return &Float{At: start, Value: math.Inf(1)}, nil
		case "-Inf":
			return &Float{At: start, Value: math.Inf(-1)}, nil
		case "NaN":
			return &Float{At: start, Value: math.NaN()}, nil
		}
		return nil, r.errorf(start, "unknown special value ##%s (want ##Inf, ##-Inf or ##NaN)", tok)
	case '(':
		return r.readFnLit(start)
	case '"':
		return r.readRegex(start)
	case '_':
		return nil, r.errorf(start, "#_ must be followed by a form to discard")
	case '{':
		r.advance()
		elems, err := r.readElems(start, "set")
		if err != nil {
			return nil, err
		}
		if err := checkDuplicates(elems, 1, "element", "set literal"); err != nil {
			return nil, err
		}
		return &Set{At: start, Elems: elems}, nil
	case '?':
		return nil, r.errorf(start, "reader conditionals (#?) are not supported in RTFS: there is one platform; write the form for it directly")
	case 0:
		if r.off+1 >= len(r.src) {
			return nil, r.errorf(start, "'#' at end of input")
		}
	}
	return nil, r.errorf(start, "unknown reader syntax #%s", printable(r.src[r.off+1:]))
}

// readMeta reads ^meta form and returns form with the metadata merged in.
func (r *reader) readMeta(start Pos) (Node, error) {
	if err := r.enter(start); err != nil {
		return nil, err
	}
	defer r.leave()
	r.advance()
	mform, err := r.readOperand(start, "'^'")
	if err != nil {
		return nil, err
	}
	var meta *Map
	switch m := mform.(type) {
	case *Map:
		meta = &Map{At: m.At, Elems: m.Elems} // metadata maps carry no metadata
	case *Keyword:
		meta = &Map{At: m.At, Elems: []Node{m, &Bool{At: m.At, Value: true}}}
	case *Symbol, *String:
		meta = &Map{At: m.Pos(), Elems: []Node{&Keyword{At: m.Pos(), Name: "tag"}, m}}
	default:
		return nil, r.errorf(mform.Pos(), "metadata must be a map, keyword, symbol or string, not %s", mform)
	}
	target, err := r.readOperand(start, "metadata "+mform.String())
	if err != nil {
		return nil, err
	}
	if k, ok := mform.(*Keyword); ok && k.Name == "delegation" {
		if tk, ok := target.(*Keyword); ok {
			return r.readDelegation(start, meta, tk)
		}
	}
	return attachMeta(meta, target)
}

// attachMeta merges meta into target's metadata.
func attachMeta(meta *Map, target Node) (Node, error) {
	switch t := target.(type) {
	case *Symbol:
		t.Meta = mergeMeta(meta, t.Meta)
	case *List:
		t.Meta = mergeMeta(meta, t.Meta)
	case *Vector:
		t.Meta = mergeMeta(meta, t.Meta)
	case *Map:
		t.Meta = mergeMeta(meta, t.Meta)
	case *Set:
		t.Meta = mergeMeta(meta, t.Meta)
	default:
		return nil, &Error{Pos: target.Pos(), Msg: "metadata can only be attached to a symbol or a collection, not " + target.String()}
	}
	return target, nil
}

// readDelegation reads the rest of the RTFS 2.0 delegation metadata
// ^:delegation :local | :local-model "id" | :remote "id", then the form it
// applies to, which gets {:delegation :local-model :delegation-target "id"}.
func (r *reader) readDelegation(start Pos, meta *Map, where *Keyword) (Node, error) {
	meta.Elems[1] = where
	switch where.Name {
	case "local":
	case "local-model", "remote":
		id, err := r.readOperand(start, "^:delegation :"+where.Name)
		if err != nil {
			return nil, err
		}
		if _, ok := id.(*String); !ok {
			return nil, r.errorf(id.Pos(), "^:delegation :%s needs a string id, got %s", where.Name, id)
		}
		meta.Elems = append(meta.Elems, &Keyword{At: where.At, Name: "delegation-target"}, id)
	default:
		return nil, r.errorf(where.At, "^:delegation needs :local, :local-model \"id\" or :remote \"id\", got %s", where)
	}
	target, err := r.readOperand(start, "^:delegation")
	if err != nil {
		return nil, err
	}
	return attachMeta(meta, target)
}

// mergeMeta returns inner with the entries of outer added, outer's winning
// for keys present in both. Both maps are fresh from the reader.
func mergeMeta(outer, inner *Map) *Map {
	if inner == nil {
		return outer
	}
	elems := append([]Node(nil), inner.Elems...)
outerLoop:
	for i := 0; i < len(outer.Elems); i += 2 {
		for j := 0; j < len(elems); j += 2 {
			if sameLiteral(outer.Elems[i], elems[j]) {
				elems[j+1] = outer.Elems[i+1]
				continue outerLoop
			}
		}
		elems = append(elems, outer.Elems[i], outer.Elems[i+1])
	}
	return &Map{At: outer.At, Elems: elems}
}

// readFnLit reads #( ... ) as (fn [%1 ... %n & %&] ( ... )).
func (r *reader) readFnLit(start Pos) (Node, error) {
	if r.inFnLit {
		return nil, r.errorf(start, "nested #() function literals are not allowed")
	}
	r.inFnLit = true
	defer func() { r.inFnLit = false }()
	r.advance()
	bodyAt := r.pos()
	elems, err := r.readElems(start, "#() function literal")
	if err != nil {
		return nil, err
	}
	body := &List{At: bodyAt, Elems: elems}
	var a fnArgs
	if err := a.scan(body); err != nil {
		return nil, err
	}
	params := make([]Node, 0, a.max+2)
	for i := 1; i <= a.max; i++ {
		params = append(params, &Symbol{At: start, Name: "%" + strconv.Itoa(i)})
	}
	if a.rest {
		params = append(params, &Symbol{At: start, Name: "&"}, &Symbol{At: start, Name: "%&"})
	}
	return &List{At: start, Elems: []Node{
		&Symbol{At: start, Name: "fn"},
		&Vector{At: start, Elems: params},
		body,
	}}, nil
}

// maxFnLitArgs bounds %N in #() literals.
const maxFnLitArgs = 20

// fnArgs collects the % parameters used in a #() body.
type fnArgs struct {
	max  int
	rest bool
}

// scan walks n (bounded by MaxNesting), renaming % to %1 and noting the
// highest %N and %&.
func (a *fnArgs) scan(n Node) error {
	switch n := n.(type) {
	case *Symbol:
		return a.symbol(n)
	case *List:
		return a.scanAll(n.Elems)
	case *Vector:
		return a.scanAll(n.Elems)
	case *Map:
		return a.scanAll(n.Elems)
	case *Set:
		return a.scanAll(n.Elems)
	}
	return nil
}

func (a *fnArgs) scanAll(elems []Node) error {
	for _, e := range elems {
		if err := a.scan(e); err != nil {
			return err
		}
	}
	return nil
}

func (a *fnArgs) symbol(s *Symbol) error {
	name := s.Name
	if len(name) == 0 || name[0] != '%' {
		return nil
	}
	switch {
	case name == "%":
		s.Name = "%1"
		a.max = max(a.max, 1)
	case name == "%&":
		a.rest = true
	default:
		n, err := strconv.Atoi(name[1:])
		if err != nil {
			return nil // an ordinary symbol such as %foo
		}
		if n < 1 || n > maxFnLitArgs || name[1] == '0' || name[1] == '+' {
			return &Error{Pos: s.At, Msg: "invalid #() parameter " + name + " (want % or %1 to %20 or %&)"}
		}
		a.max = max(a.max, n)
	}
	return nil
}

// checkDuplicates reports the first literal element of elems (stepping by
// step) that repeats an earlier one. Non-literal elements are not compared.
func checkDuplicates(elems []Node, step int, what, where string) error {
	if len(elems)/step <= 16 {
		for i := step; i < len(elems); i += step {
			for j := 0; j < i; j += step {
				if sameLiteral(elems[i], elems[j]) {
					return dupError(elems[i], what, where)
				}
			}
		}
		return nil
	}
	seen := make(map[string]bool, len(elems)/step)
	for i := 0; i < len(elems); i += step {
		k, ok := literalKey(elems[i])
		if !ok {
			continue
		}
		if seen[k] {
			return dupError(elems[i], what, where)
		}
		seen[k] = true
	}
	return nil
}

func dupError(n Node, what, where string) error {
	return &Error{Pos: n.Pos(), Msg: "duplicate " + what + " " + n.String() + " in " + where}
}

// literalKey returns a string that identifies a literal form, and false for
// non-literals.
func literalKey(n Node) (string, bool) {
	switch n := n.(type) {
	case *Nil:
		return "n", true
	case *Bool:
		return "b" + strconv.FormatBool(n.Value), true
	case *Int:
		return "i" + strconv.FormatInt(n.Value, 10), true
	case *Float:
		return "f" + strconv.FormatUint(math.Float64bits(n.Value), 16), true
	case *String:
		return "s" + n.Value, true
	case *Keyword:
		return "k" + n.Name, true
	}
	return "", false
}

// sameLiteral reports whether a and b are the same literal.
func sameLiteral(a, b Node) bool {
	switch a := a.(type) {
	case *Nil:
		_, ok := b.(*Nil)
		return ok
	case *Bool:
		b, ok := b.(*Bool)
		return ok && a.Value == b.Value
	case *Int:
		b, ok := b.(*Int)
		return ok && a.Value == b.Value
	case *Float:
		b, ok := b.(*Float)
		return ok && math.Float64bits(a.Value) == math.Float64bits(b.Value)
	case *String:
		b, ok := b.(*String)
		return ok && a.Value == b.Value
	case *Keyword:
		b, ok := b.(*Keyword)
		return ok && a.Name == b.Name
	}
	return false
}

// readRegex reads #"pattern": the characters up to the closing quote as
// they are, a backslash keeping the character after it (so \" does not end
// the pattern), and checks the pattern with Go's regexp package.
func (r *reader) readRegex(start Pos) (Node, error) {
	r.advanceN(2)
	begin := r.off
	for {
		if r.eof() {
			return nil, r.errorf(start, "unterminated regular expression: missing closing '\"'")
		}
		switch r.cur() {
		case '"':
			pat := string(r.src[begin:r.off])
			r.advance()
			if err := CheckRegex(pat); err != nil {
				return nil, r.errorf(start, "%v", err)
			}
			return &Regex{At: start, Pattern: pat}, nil
		case '\\':
			r.advance()
			if !r.eof() {
				r.advance()
			}
		default:
			r.advance()
		}
	}
}

// CheckRegex reports whether Go's regexp package (RE2) accepts a pattern,
// with an error that says what Java's regex has and RE2 lacks when that is
// the cause.
func CheckRegex(pat string) error {
	if _, err := regexp.Compile(pat); err != nil {
		msg := err.Error()
		if strings.Contains(pat, "(?=") || strings.Contains(pat, "(?!") || strings.Contains(pat, "(?<=") || strings.Contains(pat, "(?<!") {
			msg += " (RE2 has no lookahead or lookbehind)"
		} else if strings.Contains(msg, "escape sequence") && regexp.MustCompile(`\\[1-9]`).MatchString(pat) {
			msg += " (RE2 has no backreferences)"
		} else if strings.Contains(pat, "*+") || strings.Contains(pat, "++") || strings.Contains(pat, "?+") || strings.Contains(pat, "(?>") {
			msg += " (RE2 has no possessive quantifiers or atomic groups)"
		}
		return fmt.Errorf("invalid regular expression #\"%s\": %s", pat, msg)
	}
	return nil
}
