package rtfs

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of arrays and objects FromJSON accepts.
const maxJSONDepth = 10000

// FromJSON decodes one JSON value (RFC 8259): objects become maps with
// keyword keys ({"temp": 1} is {:temp 1}; a repeated key keeps its last
// value), arrays become vectors, numbers without a fraction or exponent
// that fit int64 become Int and all other numbers Float, strings String
// (invalid UTF-8 becomes U+FFFD), true/false Bool and null Nil. Malformed
// input, nesting deeper than 10,000 levels and trailing data are errors
// that give the offset, line and column. FromJSON does not retain data.
// It is safe for concurrent use; to decode many texts on one goroutine,
// a JSONDecoder is cheaper.
func FromJSON(data []byte) (Value, error) {
	p := jsonParser{data: data, stack: make([]Value, 0, min(32, len(data)/4+1))}
	return p.decode()
}

// A JSONDecoder decodes JSON texts exactly as FromJSON does, but carries
// work over from one call to the next: it reuses its scratch space and
// interns object keys (as Keyword values) and short strings, so that a
// stream of similar chunks costs little beyond the maps, vectors and
// non-small numbers of each result. The zero value is ready to use.
//
// A JSONDecoder is not safe for concurrent use: each goroutine (a stream's
// delivery loop, say) owns its own. Its tables are bounded, whatever the
// input: at most 1024 keys of up to 64 bytes and 256 strings of up to 32
// bytes, forgotten all at once when full, so hostile input cannot grow
// them. Decoded values never alias data or the decoder, are immutable, and
// stay valid after later calls.
type JSONDecoder struct {
	stack []Value     // scratch for the elements of open arrays and objects
	buf   []byte      // scratch for strings with escapes
	keys  internTable // object keys: Keyword values
	strs  internTable // short string values: String values
	// last holds the keys of the previous document by their position in
	// it: chunks of one stream usually have one shape, so the n-th key of
	// a document is most often the n-th key of the one before, found by a
	// comparison instead of a hash lookup.
	last [16]Value
	// lastStrs does the same for short string values, and says which
	// position changed from one document to the next: a value there (a
	// timestamp) is not interned, which would only churn the table.
	lastStrs [16]strMemo
	// nums boxes the numbers, its unused cells carried over from one
	// document to the next.
	nums numSlab
}

// A strMemo is the string value at one position of the previous document.
type strMemo struct {
	v        Value
	changing bool // it differed from the one before
}

// Decode decodes one JSON text as FromJSON does. It does not retain data.
// Cost: one allocation per map and per vector of up to 32 elements; the
// numbers outside the runtime's small-integer cache (0 to 255) share
// backing arrays of 4, 8, 16, ... up to 256 cells, whose unused cells the
// next call goes on with (so a stream of small documents allocates one
// every few documents), and a retained number keeps at most 2 KiB alive;
// strings and keys seen before cost none.
func (d *JSONDecoder) Decode(data []byte) (Value, error) {
	return d.decode(data, nil)
}

// DecodeReusing is Decode, except that when data holds an object of no
// more entries than spare has room for, its map is built in spare instead
// of on the heap: spare is a map that an earlier Decode returned and whose
// life has ended, which the caller guarantees (no value, queue, printer or
// RTFS code refers to it any more). The result is spare itself when it was
// reused; when it is not, spare may be dropped or offered again. Cost:
// Decode's, less the map's allocation.
func (d *JSONDecoder) DecodeReusing(data []byte, spare *Map) (Value, error) {
	return d.decode(data, spare)
}

func (d *JSONDecoder) decode(data []byte, spare *Map) (Value, error) {
	if d.stack == nil {
		d.stack = make([]Value, 0, min(32, len(data)/4+1))
	}
	d.nums.carry = true
	p := jsonParser{data: data, stack: d.stack, buf: d.buf, keys: &d.keys, strs: &d.strs, last: &d.last, lastStrs: &d.lastStrs, nums: d.nums, spare: spare}
	v, err := p.decode()
	d.keep(p.stack, p.buf)
	d.nums = p.nums
	return v, err
}

// decode decodes the whole of p.data.
func (p *jsonParser) decode() (Value, error) {
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return nil, p.errorf("unexpected %s after the JSON value", p.quoteChar())
	}
	return v, nil
}

// Scratch beyond these capacities is dropped after a call rather than kept.
const (
	maxKeptStack = 4096
	maxKeptBuf   = 64 << 10
)

// keep stores the scratch space of a call for the next one. It drops
// references into the last result (left on the stack by an error; pop
// clears what it drops) and scratch space that a huge input grew.
func (d *JSONDecoder) keep(stack []Value, buf []byte) {
	clear(stack)
	d.stack, d.buf = stack[:0], buf[:0]
	if cap(stack) > maxKeptStack {
		d.stack = nil
	}
	if cap(buf) > maxKeptBuf {
		d.buf = nil
	}
}

// jsonParser is the state of one FromJSON or Decode call.
type jsonParser struct {
	data     []byte
	text     string  // string(data), made on first use for small inputs
	stack    []Value // the elements of open arrays and objects
	buf      []byte  // the contents of a string with escapes
	keys     *internTable
	strs     *internTable // nil for FromJSON, which interns nothing
	last     *[16]Value   // the previous document's keys by position; nil for FromJSON
	nkey     int          // the keys decoded so far
	lastStrs *[16]strMemo // the previous document's short strings; nil for FromJSON
	nstr     int          // the short strings decoded so far
	nums     numSlab      // boxes the numbers; a JSONDecoder's goes on with the next call
	spare    *Map         // storage for a top-level object's map (DecodeReusing), or nil
	pos      int
	depth    int
}

// jsonShareMax is the largest input whose decoded strings share one
// backing string (one allocation instead of one per string). The cap
// bounds what a retained substring keeps alive.
const jsonShareMax = 4096

// newString returns the decoded string b as a string that does not alias
// data. start is b's offset in data, or -1 when b is scratch space.
func (p *jsonParser) newString(b []byte, start int) string {
	if start < 0 || len(p.data) > jsonShareMax {
		return string(b)
	}
	if p.text == "" {
		p.text = string(p.data)
	}
	return p.text[start : start+len(b)]
}

// collect pops the stack down to base and returns the popped values in a
// new, exactly sized slice.
func (p *jsonParser) collect(base int) []Value {
	st := p.stack
	out := make([]Value, len(st)-base)
	copy(out, st[base:])
	p.pop(base)
	return out
}

// pop clears and drops the stack above base.
func (p *jsonParser) pop(base int) {
	clear(p.stack[base:])
	p.stack = p.stack[:base]
}

// errorf reports a syntax error at the current offset.
func (p *jsonParser) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range p.data[:min(p.pos, len(p.data))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	msg := fmt.Sprintf(format, args...)
	return fmt.Errorf("invalid JSON at offset %d (line %d, column %d): %s", p.pos, line, col, msg)
}

func (p *jsonParser) quoteChar() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	r, _ := utf8.DecodeRune(p.data[p.pos:])
	return "character " + strconv.QuoteRune(r)
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (Value, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input, expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.stringValue()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return True, p.literal("true")
	case c == 'f':
		return False, p.literal("false")
	case c == 'n':
		return Nil, p.literal("null")
	}
	return nil, p.errorf("unexpected %s, expected a value", p.quoteChar())
}

func (p *jsonParser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.errorf("invalid literal, expected %s", word)
	}
	p.pos += len(word)
	return nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.errorf("nesting deeper than %d levels", maxJSONDepth)
	}
	p.pos++ // the opening bracket
	p.skipSpace()
	return nil
}

func (p *jsonParser) object() (Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return emptyMap, nil
	}
	// The entries of an object small enough for an array-map are gathered
	// in small, on the goroutine's stack, where storing them costs no
	// write barrier and leaves nothing to clear; a larger object's go on
	// the parser's stack.
	var small [2 * arrayMapMax]Value
	n := 0 // entries in small; -1 once they moved to p.stack
	base := len(p.stack)
	for {
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		switch {
		case n >= 0 && n < arrayMapMax:
			small[2*n], small[2*n+1] = k, v
			n++
		case n >= 0:
			p.stack = append(append(p.stack, small[:2*n]...), k, v)
			n = -1
		default:
			p.stack = append(p.stack, k, v)
		}
		if done, err := p.separator('}'); done || err != nil {
			if err != nil {
				return nil, err
			}
			if n >= 0 {
				if p.depth == 1 && p.spare != nil && p.spare.refill(small[:2*n], nil) {
					return p.spare, nil
				}
				return smallMap(small[:2*n]), nil
			}
			return p.makeMap(base), nil
		}
	}
}

// smallMap returns the map of the 1 to arrayMapMax entries in kvs, an
// array-map in one allocation unless a key repeats. kvs is not retained.
func smallMap(kvs []Value) *Map {
	if !distinctKeys(kvs, nil) {
		return MapOf(kvs...)
	}
	m, mkvs := newArrayMap(len(kvs) / 2)
	copy(mkvs, kvs)
	return m
}

// key decodes an object key and the ':' after it.
func (p *jsonParser) key() (Value, error) {
	if p.pos >= len(p.data) || p.data[p.pos] != '"' {
		return nil, p.errorf("unexpected %s, expected a string key", p.quoteChar())
	}
	b, start, err := p.str()
	if err != nil {
		return nil, err
	}
	var k Value
	if p.keys != nil && len(b) <= maxInternKey {
		k = p.internKey(b)
	} else {
		k = Keyword(p.newString(b, start))
	}
	p.skipSpace()
	if p.pos >= len(p.data) || p.data[p.pos] != ':' {
		return nil, p.errorf("unexpected %s, expected ':' after object key", p.quoteChar())
	}
	p.pos++
	p.skipSpace()
	return k, nil
}

// internKey returns the interned keyword for b: the previous document's key
// at the same position when it is the same, else the intern table's.
func (p *jsonParser) internKey(b []byte) Value {
	n := p.nkey
	p.nkey++
	if p.last == nil || n >= len(p.last) {
		return p.keys.keyword(b)
	}
	if kw, ok := p.last[n].(Keyword); ok && string(kw) == string(b) {
		return p.last[n]
	}
	k := p.keys.keyword(b)
	p.last[n] = k
	return k
}

// makeMap pops the keys and values above base into a map: an array-map in
// one allocation when it can be one.
func (p *jsonParser) makeMap(base int) *Map {
	kvs := p.stack[base:]
	if len(kvs) <= 2*arrayMapMax && distinctKeys(kvs, nil) {
		m, mkvs := newArrayMap(len(kvs) / 2)
		copy(mkvs, kvs)
		p.pop(base)
		return m
	}
	return mapOwned(p.collect(base))
}

// separator consumes ',' (false) or the closing bracket (true).
func (p *jsonParser) separator(closing byte) (bool, error) {
	p.skipSpace()
	if p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
			return false, nil
		case closing:
			p.pos++
			return true, nil
		}
	}
	return false, p.errorf("unexpected %s, expected ',' or '%c'", p.quoteChar(), closing)
}

func (p *jsonParser) array() (Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return emptyVector, nil
	}
	base := len(p.stack)
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.stack = append(p.stack, v)
		if done, err := p.separator(']'); done || err != nil {
			if err != nil {
				return nil, err
			}
			if len(p.stack)-base <= vwidth {
				v := vectorCopy(p.stack[base:])
				p.pop(base)
				return v, nil
			}
			return vectorOwned(p.collect(base)), nil
		}
	}
}

// stringValue decodes a string value, interned when it is short.
func (p *jsonParser) stringValue() (Value, error) {
	b, start, err := p.str()
	if err != nil {
		return nil, err
	}
	if p.strs != nil && len(b) <= maxInternString {
		return p.internStr(b), nil
	}
	return String(p.newString(b, start)), nil
}

// internStr returns the string value b: the previous document's value at
// the same position when it is the same; a new string when the value at
// this position keeps changing; else the intern table's.
func (p *jsonParser) internStr(b []byte) Value {
	n := p.nstr
	p.nstr++
	if p.lastStrs == nil || n >= len(p.lastStrs) {
		return p.strs.str(b)
	}
	m := &p.lastStrs[n]
	if s, ok := m.v.(String); ok && string(s) == string(b) {
		m.changing = false
		return m.v
	}
	var v Value
	if m.changing {
		v = String(b)
	} else {
		v = p.strs.str(b)
	}
	m.v, m.changing = v, m.v != nil
	return v
}

// str decodes the string at the opening quote. b is its contents: a
// slice of data at start when the string is plain ASCII without escapes,
// else the decoder's scratch buffer (start -1), valid until the next call.
func (p *jsonParser) str() (b []byte, start int, err error) {
	start = p.pos + 1
	i := start
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return p.data[start:i], start, nil
		case c == '\\' || c >= utf8.RuneSelf:
			b, err := p.strSlow(start)
			return b, -1, err
		case c < 0x20:
			p.pos = i
			return nil, 0, p.errorf("control character %#02x in string", c)
		}
		i++
	}
	p.pos = len(p.data)
	return nil, 0, p.errorf("unterminated string")
}

// strSlow decodes a string with escapes or non-ASCII bytes into the
// decoder's scratch buffer.
func (p *jsonParser) strSlow(start int) ([]byte, error) {
	buf := p.buf[:0]
	defer func() { p.buf = buf[:0] }()
	i := start
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return buf, nil
		case c == '\\':
			nb, next, err := p.escape(buf, i)
			if err != nil {
				return nil, err
			}
			buf, i = nb, next
		case c < 0x20:
			p.pos = i
			return nil, p.errorf("control character %#02x in string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(p.data[i:])
			buf = utf8.AppendRune(buf, r) // invalid bytes become U+FFFD
			i += size
		}
	}
	p.pos = len(p.data)
	return nil, p.errorf("unterminated string")
}

// escape decodes the escape sequence at data[i] (a backslash).
func (p *jsonParser) escape(buf []byte, i int) ([]byte, int, error) {
	if i+1 >= len(p.data) {
		p.pos = len(p.data)
		return nil, 0, p.errorf("unterminated string")
	}
	switch c := p.data[i+1]; c {
	case '"', '\\', '/':
		return append(buf, c), i + 2, nil
	case 'b':
		return append(buf, '\b'), i + 2, nil
	case 'f':
		return append(buf, '\f'), i + 2, nil
	case 'n':
		return append(buf, '\n'), i + 2, nil
	case 'r':
		return append(buf, '\r'), i + 2, nil
	case 't':
		return append(buf, '\t'), i + 2, nil
	case 'u':
		r, ok := hex4(p.data, i+2)
		if !ok {
			p.pos = i
			return nil, 0, p.errorf("invalid \\u escape")
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if r2, ok := hex4(p.data, i+2); ok && i+1 < len(p.data) && p.data[i] == '\\' && p.data[i+1] == 'u' {
				if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
					return utf8.AppendRune(buf, p), i + 6, nil
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(buf, r), i, nil
	}
	p.pos = i
	return nil, 0, p.errorf("invalid escape \\%c", p.data[i+1])
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

var errJSONNumberRange = errors.New("number out of range")

// number decodes -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *jsonParser) number() (Value, error) {
	start, i := p.pos, p.pos
	if p.data[i] == '-' {
		i++
	}
	digits := i
	for i < len(p.data) && p.data[i] >= '0' && p.data[i] <= '9' {
		i++
	}
	if i == digits || (p.data[digits] == '0' && i-digits > 1) {
		p.pos = digits
		return nil, p.errorf("invalid number")
	}
	isInt := true
	if i < len(p.data) && p.data[i] == '.' {
		isInt = false
		if i = skipDigits(p.data, i+1); i < 0 {
			return nil, p.errorf("invalid number: expected a digit after '.'")
		}
	}
	if i < len(p.data) && (p.data[i] == 'e' || p.data[i] == 'E') {
		isInt = false
		i++
		if i < len(p.data) && (p.data[i] == '+' || p.data[i] == '-') {
			i++
		}
		if i = skipDigits(p.data, i); i < 0 {
			return nil, p.errorf("invalid number: expected a digit in the exponent")
		}
	}
	p.pos = i
	if isInt {
		if n, ok := parseDecimal(p.data[start:i]); ok {
			return p.nums.int(Int(n), p.numbersLeft()), nil
		}
	}
	if f, ok := parseShortDecimal(p.data[start:i]); ok {
		return p.nums.float(Float(f), p.numbersLeft()), nil
	}
	f, err := strconv.ParseFloat(string(p.data[start:i]), 64)
	if err != nil {
		p.pos = start
		return nil, p.errorf("%v", errJSONNumberRange)
	}
	return p.nums.float(Float(f), p.numbersLeft()), nil
}

// numbersLeft bounds the numbers still to be boxed, the one just parsed
// included: every further number takes a digit and a separator.
func (p *jsonParser) numbersLeft() int { return (len(p.data)-p.pos)/2 + 1 }

// skipDigits returns the index after one or more digits at i, or -1.
func skipDigits(b []byte, i int) int {
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// parseShortDecimal parses -?d+.d+ with at most 15 digits, the usual
// reading (21.5, -0.25), without strconv: its digits make an integer
// below 2^53 and its scale a power of ten below 10^16, both exact in a
// float64, so one division, which IEEE 754 rounds correctly, gives the
// same float as strconv.ParseFloat. false for any other form.
func parseShortDecimal(b []byte) (float64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 16 { // 15 digits and the point
		return 0, false
	}
	var n uint64
	scale := -1 // digits after the point; -1 before it
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n*10 + uint64(c-'0')
			if scale >= 0 {
				scale++
			}
		case c == '.' && scale < 0:
			scale = 0
		default:
			return 0, false
		}
	}
	if scale <= 0 {
		return 0, false
	}
	f := float64(n) / pow10[scale]
	if neg {
		f = -f
	}
	return f, true
}

// pow10 holds the powers of ten parseShortDecimal divides by.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseDecimal parses an optionally negative decimal integer; false if it
// overflows int64.
func parseDecimal(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n uint64
	for _, c := range b {
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return int64(-n), true
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}
