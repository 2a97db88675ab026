package syntax

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '\f' || c == '\v'
}

// isDelim reports whether c ends a token.
func isDelim(c byte) bool {
	switch c {
	case '(', ')', '[', ']', '{', '}', '"', ';':
		return true
	}
	return isSpace(c)
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// isNameChar reports whether c may appear in a symbol or keyword name.
// Bytes of multi-byte UTF-8 sequences are accepted (validated separately).
func isNameChar(c byte) bool {
	if isLetter(c) || isDigit(c) || c >= utf8.RuneSelf {
		return true
	}
	return strings.IndexByte("_$+-*/=<>!?%&.@:", c) >= 0
}

// token reads the bytes up to the next delimiter.
func (r *reader) token() string {
	i := r.off
	for i < len(r.src) && !isDelim(r.src[i]) {
		i++
	}
	tok := r.intern(r.src[r.off:i])
	r.advanceN(i - r.off)
	return tok
}

// intern returns b as a string, sharing one copy among equal tokens.
func (r *reader) intern(b []byte) string {
	if s, ok := r.names[string(b)]; ok {
		return s
	}
	if r.names == nil {
		r.names = make(map[string]string)
	}
	s := string(b)
	r.names[s] = s
	return s
}

// readAtom reads a number, nil, true, false or a symbol.
func (r *reader) readAtom(start Pos) (Node, error) {
	tok := r.token()
	c := tok[0]
	if isDigit(c) || (c == '+' || c == '-') && len(tok) > 1 && isDigit(tok[1]) {
		return r.parseNumber(start, tok)
	}
	switch tok {
	case "nil":
		return &Nil{At: start}, nil
	case "true":
		return &Bool{At: start, Value: true}, nil
	case "false":
		return &Bool{At: start, Value: false}, nil
	}
	if msg := checkName(tok); msg != "" {
		return nil, r.errorf(start, "invalid symbol %s: %s", visible(tok), msg)
	}
	return &Symbol{At: start, Name: tok}, nil
}

// invisible reports a code point that looks like nothing, or like a space,
// in a name: white space other than the delimiters, and format characters
// (zero-width spaces and joiners, the byte order mark, soft hyphens).
func invisible(c rune) bool {
	return c >= utf8.RuneSelf && (unicode.IsSpace(c) || unicode.Is(unicode.Cf, c) || c == 0x2800 || c == 0x3164 || c == 0xFFA0)
}

// visible writes the invisible code points of s as \uXXXX escapes, for
// error messages.
func visible(s string) string {
	var b strings.Builder
	for _, c := range s {
		if invisible(c) || c < 0x20 {
			fmt.Fprintf(&b, "\\u%04x", c)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// checkName validates a symbol or keyword name, returning "" or a problem.
func checkName(name string) string {
	for i := 0; i < len(name); i++ {
		if !isNameChar(name[i]) && (name[i] != '\'' || i == 0) { // +' and inc' as in Clojure
			return strconv.Quote(name[i:i+1]) + " is not allowed in a name"
		}
	}
	if !utf8.ValidString(name) {
		return "invalid UTF-8"
	}
	for _, c := range name {
		if invisible(c) {
			return fmt.Sprintf("it holds the invisible character U+%04X; delete it (a no-break or zero-width space pasted from a document, most likely)", c)
		}
	}
	if name == "/" {
		return ""
	}
	switch {
	case name[0] == ':':
		return "a name cannot start with ':'"
	case name[0] == '/':
		return "a name cannot start with '/'"
	case strings.HasSuffix(name, "/"), strings.HasSuffix(name, ":"):
		return "a name cannot end with '" + name[len(name)-1:] + "'"
	}
	return ""
}

// parseNumber reads an integer [+-]digits or a float
// [+-]digits[.digits][(e|E)[+-]digits].
func (r *reader) parseNumber(start Pos, tok string) (Node, error) {
	i, isFloat := 0, false
	if tok[0] == '+' || tok[0] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(tok) && isDigit(tok[i]) {
			i++
		}
		return i > j
	}
	ok := digits()
	if ok && i < len(tok) && tok[i] == '.' {
		i++
		isFloat, ok = true, digits()
	}
	if ok && i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		isFloat, ok = true, digits()
	}
	if !ok || i != len(tok) {
		return nil, r.errorf(start, "invalid number %s", tok)
	}
	if isFloat {
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil && (!errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0)) {
			return nil, r.errorf(start, "float literal %s is out of range", tok)
		}
		return &Float{At: start, Value: f}, nil
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return nil, r.errorf(start, "integer literal %s does not fit in a 64-bit integer", tok)
	}
	return &Int{At: start, Value: n}, nil
}

// readKeyword reads :name.
func (r *reader) readKeyword(start Pos) (Node, error) {
	r.advance()
	if r.eof() || isDelim(r.cur()) {
		return nil, r.errorf(start, "':' must be followed by a keyword name or '['")
	}
	name := r.token()
	if msg := checkName(name); msg != "" {
		return nil, r.errorf(start, "invalid keyword :%s: %s", visible(name), msg)
	}
	return &Keyword{At: start, Name: name}, nil
}

// readString reads a string literal; the reader is at the opening quote.
func (r *reader) readString(start Pos) (Node, error) {
	r.advance()
	begin := r.off
	var b *strings.Builder // nil until the first escape
	for {
		if r.eof() {
			return nil, r.errorf(start, "unterminated string: missing closing '\"'")
		}
		switch r.cur() {
		case '"':
			var s string
			if b == nil {
				s = string(r.src[begin:r.off])
			} else {
				b.Write(r.src[begin:r.off])
				s = b.String()
			}
			r.advance()
			return &String{At: start, Value: s}, nil
		case '\\':
			if b == nil {
				b = new(strings.Builder)
			}
			b.Write(r.src[begin:r.off])
			if err := r.readEscape(b); err != nil {
				return nil, err
			}
			begin = r.off
		default:
			r.advance()
		}
	}
}

// readEscape decodes one escape sequence into b; the reader is at the '\'.
func (r *reader) readEscape(b *strings.Builder) error {
	at := r.pos()
	r.advance()
	if r.eof() {
		return r.errorf(at, "unterminated escape sequence at end of input")
	}
	c := r.cur()
	switch c {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case '0':
		b.WriteByte(0)
	case '"', '\\', '/':
		b.WriteByte(c)
	case 'a':
		b.WriteByte(7)
	case 'v':
		b.WriteByte(11)
	case 'x':
		r.advance()
		v, ok := r.hexN(2)
		if !ok {
			return r.errorf(at, "invalid \\x escape: expected 2 hex digits")
		}
		b.WriteByte(byte(v))
		return nil
	case 'U':
		r.advance()
		v, ok := r.hexN(8)
		if !ok || v < 0 || v > unicode.MaxRune || v >= 0xD800 && v <= 0xDFFF {
			return r.errorf(at, "invalid \\U escape: expected 8 hex digits of a Unicode code point")
		}
		b.WriteRune(v)
		return nil
	case 'u':
		r.advance()
		return r.readUnicodeEscape(at, b)
	default:
		return r.errorf(at, "unknown escape sequence \\%s in string", printable(r.src[r.off:]))
	}
	r.advance()
	return nil
}

// readUnicodeEscape decodes the XXXX of \uXXXX (and a following low surrogate).
func (r *reader) readUnicodeEscape(at Pos, b *strings.Builder) error {
	hi, ok := r.hexN(4)
	if !ok {
		return r.errorf(at, "invalid \\u escape: expected 4 hex digits")
	}
	if hi < 0xD800 || hi > 0xDFFF {
		b.WriteRune(hi)
		return nil
	}
	if hi <= 0xDBFF && r.at(0) == '\\' && r.at(1) == 'u' {
		save := *r
		r.advanceN(2)
		if lo, ok := r.hexN(4); ok && lo >= 0xDC00 && lo <= 0xDFFF {
			b.WriteRune((hi-0xD800)<<10 | (lo - 0xDC00) + 0x10000)
			return nil
		}
		*r = save
	}
	return r.errorf(at, "invalid \\u escape: unpaired surrogate \\u%04X", hi)
}

// hexN reads n hex digits.
func (r *reader) hexN(n int) (rune, bool) {
	if r.off+n > len(r.src) {
		return 0, false
	}
	var v rune
	for _, c := range r.src[r.off : r.off+n] {
		var d byte
		switch {
		case isDigit(c):
			d = c - '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			d = c | 0x20 - 'a' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(d)
	}
	r.advanceN(n)
	return v, true
}

// printable returns the first character of b for an error message.
func printable(b []byte) string {
	ch, _ := utf8.DecodeRune(b)
	if ch == utf8.RuneError || ch < ' ' {
		return strconv.QuoteRune(ch)
	}
	return string(ch)
}
