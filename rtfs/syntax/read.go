package syntax

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// MaxNesting bounds how deeply forms may nest (collections, quote and other
// prefixes, metadata). Deeper input is a reader error, which keeps recursive
// consumers of the forms (compiler, printer) safe from stack exhaustion.
const MaxNesting = 10000

// Parse reads all the forms of an RTFS source file (UTF-8; a leading byte
// order mark is skipped). filename is used only in positions and error
// messages. On error it returns a *Error naming the first problem and where it
// is. Parse never panics; its cost is linear in len(src), except that a chain
// of k ^metadata prefixes on one form costs O(k²). The returned forms are new
// and owned by the caller; Parse keeps no reference to src.
func Parse(filename string, src []byte) ([]Node, error) {
	r := &reader{src: src, file: &filename, line: 1, col: 1}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		r.off = 3 // a UTF-8 byte order mark is not part of the text
	}
	if err := r.checkText(); err != nil {
		return nil, err
	}
	var nodes []Node
	for {
		if err := r.skipSpace(); err != nil {
			return nil, err
		}
		if r.eof() {
			return nodes, nil
		}
		n, err := r.readForm()
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
}

// checkText refuses a source that is not UTF-8 text before reading it: an
// invalid byte or a NUL is an error at its position that shows the byte
// escaped (a binary file's bytes are never echoed).
func (r *reader) checkText() error {
	line, col := int32(1), int32(1)
	for i := r.off; i < len(r.src); {
		c, n := utf8.DecodeRune(r.src[i:])
		switch {
		case c == utf8.RuneError && n <= 1:
			return &Error{Pos: Pos{r.file, line, col}, Msg: fmt.Sprintf("invalid UTF-8 byte 0x%02x: not a UTF-8 text file", r.src[i])}
		case c == 0:
			return &Error{Pos: Pos{r.file, line, col}, Msg: `NUL byte (\x00): not a UTF-8 text file`}
		case c == '\n':
			line, col = line+1, 1
		default:
			col++
		}
		i += n
	}
	return nil
}

// A reader holds the state of one Parse.
type reader struct {
	src       []byte
	off       int
	line, col int32
	file      *string
	depth     int               // current nesting
	inFnLit   bool              // inside #( ... )
	stack     []Node            // elements of the open collections
	names     map[string]string // interned symbol and keyword names
}

func (r *reader) pos() Pos  { return Pos{r.file, r.line, r.col} }
func (r *reader) eof() bool { return r.off >= len(r.src) }
func (r *reader) cur() byte { return r.src[r.off] }
func (r *reader) at(i int) byte {
	if r.off+i < len(r.src) {
		return r.src[r.off+i]
	}
	return 0
}

// advance moves past one byte, keeping line and column (saturating).
func (r *reader) advance() {
	if r.src[r.off] == '\n' {
		if r.line < math.MaxInt32 {
			r.line++
		}
		r.col = 1
	} else if r.col < math.MaxInt32 {
		r.col++
	}
	r.off++
}

// advanceN moves past n bytes known to hold no newline.
func (r *reader) advanceN(n int) {
	r.off += n
	if int64(r.col)+int64(n) < math.MaxInt32 {
		r.col += int32(n)
	} else {
		r.col = math.MaxInt32
	}
}

func (r *reader) errorf(p Pos, format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) enter(p Pos) error {
	if r.depth >= MaxNesting {
		return r.errorf(p, "forms nested too deeply (more than %d levels)", MaxNesting)
	}
	r.depth++
	return nil
}

func (r *reader) leave() { r.depth-- }

// skipSpace skips whitespace, commas and comments.
func (r *reader) skipSpace() error {
	for !r.eof() {
		switch c := r.cur(); {
		case isSpace(c):
			r.advance()
		case c == ';':
			for !r.eof() && r.cur() != '\n' {
				r.advance()
			}
		case c == '#' && r.at(1) == '|':
			if err := r.skipBlockComment(); err != nil {
				return err
			}
		case c == '#' && r.at(1) == '_':
			if err := r.discard(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// skipBlockComment skips a #| ... |# comment; inner #| |# pairs nest.
func (r *reader) skipBlockComment() error {
	start := r.pos()
	r.advanceN(2)
	for depth := 1; depth > 0; {
		switch {
		case r.eof():
			return r.errorf(start, "unterminated block comment: missing |#")
		case r.cur() == '|' && r.at(1) == '#':
			r.advanceN(2)
			depth--
		case r.cur() == '#' && r.at(1) == '|':
			r.advanceN(2)
			depth++
		default:
			r.advance()
		}
	}
	return nil
}

// readForm reads one form; the reader is at its first character.
func (r *reader) readForm() (Node, error) {
	start := r.pos()
	switch c := r.cur(); c {
	case '(', '[', '{':
		return r.readColl(start, c)
	case ')', ']', '}':
		return nil, r.errorf(start, "unexpected %q", c)
	case '"':
		return r.readString(start)
	case ':':
		if r.at(1) == '[' {
			return r.readTypeExpr(start)
		}
		return r.readKeyword(start)
	case '\'':
		return r.readPrefixed(start, "quote", 1)
	case '`':
		return r.readPrefixed(start, "quasiquote", 1)
	case '~':
		if r.at(1) == '@' {
			return r.readPrefixed(start, "unquote-splicing", 2)
		}
		return r.readPrefixed(start, "unquote", 1)
	case '@':
		return r.readPrefixed(start, "deref", 1)
	case '^':
		return r.readMeta(start)
	case '#':
		return r.readDispatch(start)
	}
	return r.readAtom(start)
}

func closer(open byte) byte {
	switch open {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

// readElems reads the forms of a collection up to its closing delimiter; the
// reader is at the opening one (the '{' of "#{" for sets). what names the
// collection in errors.
func (r *reader) readElems(start Pos, what string) ([]Node, error) {
	if err := r.enter(start); err != nil {
		return nil, err
	}
	defer r.leave()
	closeCh := closer(r.cur())
	r.advance()
	base := len(r.stack)
	defer func() { r.stack = r.stack[:base] }()
	for {
		if err := r.skipSpace(); err != nil {
			return nil, err
		}
		if r.eof() {
			return nil, r.errorf(start, "unterminated %s: missing %q", what, closeCh)
		}
		switch c := r.cur(); c {
		case closeCh:
			r.advance()
			if len(r.stack) == base {
				return nil, nil
			}
			return append([]Node(nil), r.stack[base:]...), nil
		case ')', ']', '}':
			return nil, r.errorf(r.pos(), "unexpected %q: the %s opened at %d:%d needs %q",
				c, what, start.Line, start.Col, closeCh)
		}
		n, err := r.readForm()
		if err != nil {
			return nil, err
		}
		r.stack = append(r.stack, n)
	}
}

func (r *reader) readColl(start Pos, open byte) (Node, error) {
	switch open {
	case '(':
		elems, err := r.readElems(start, "list")
		if err != nil {
			return nil, err
		}
		return &List{At: start, Elems: elems}, nil
	case '[':
		elems, err := r.readElems(start, "vector")
		if err != nil {
			return nil, err
		}
		return &Vector{At: start, Elems: elems}, nil
	}
	elems, err := r.readElems(start, "map")
	if err != nil {
		return nil, err
	}
	if len(elems)%2 != 0 {
		return nil, r.errorf(start, "map literal needs an even number of forms, has %d", len(elems))
	}
	if err := checkDuplicates(elems, 2, "key", "map literal"); err != nil {
		return nil, err
	}
	return &Map{At: start, Elems: elems}, nil
}

// readTypeExpr reads :[ ... ].
func (r *reader) readTypeExpr(start Pos) (Node, error) {
	r.advance() // ':'
	v, err := r.readColl(r.pos(), '[')
	if err != nil {
		return nil, err
	}
	return &TypeExpr{At: start, Vec: v.(*Vector)}, nil
}

// readPrefixed reads sugar such as 'x into (name x); width is the prefix length.
func (r *reader) readPrefixed(start Pos, name string, width int) (Node, error) {
	if err := r.enter(start); err != nil {
		return nil, err
	}
	defer r.leave()
	prefix := string(r.src[r.off : r.off+width])
	r.advanceN(width)
	n, err := r.readOperand(start, prefix)
	if err != nil {
		return nil, err
	}
	return &List{At: start, Elems: []Node{&Symbol{At: start, Name: name}, n}}, nil
}

// readOperand reads the form that a prefix such as ' or ^ applies to.
func (r *reader) readOperand(start Pos, prefix string) (Node, error) {
	if err := r.skipSpace(); err != nil {
		return nil, err
	}
	if r.eof() {
		return nil, r.errorf(start, "%s must be followed by a form, found end of input", prefix)
	}
	if c := r.cur(); c == ')' || c == ']' || c == '}' {
		return nil, r.errorf(start, "%s must be followed by a form, found %q", prefix, c)
	}
	return r.readForm()
}

// discard reads and drops the form after #_ (Clojure's discard), which may
// itself be preceded by another #_.
func (r *reader) discard() error {
	start := r.pos()
	if err := r.enter(start); err != nil {
		return err
	}
	defer r.leave()
	r.advanceN(2)
	_, err := r.readOperand(start, "#_")
	return err
}
