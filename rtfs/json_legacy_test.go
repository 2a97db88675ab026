package rtfs

// The JSON decoder as it was before JSONDecoder (interning, reused
// scratch) replaced it: the oracle of the differential tests in
// json_decoder_test.go. Kept verbatim but for the names.

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// legacyFromJSON is the former FromJSON.
func legacyFromJSON(data []byte) (Value, error) {
	d := legacyJSONDecoder{data: data, stack: make([]Value, 0, min(32, len(data)/4+1))}
	if len(data) <= jsonShareMax {
		d.text = string(data)
	}
	d.skipSpace()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos < len(d.data) {
		return nil, d.errorf("unexpected %s after the JSON value", d.quoteChar())
	}
	return v, nil
}

type legacyJSONDecoder struct {
	data  []byte
	text  string  // string(data) for small inputs: strings slice it
	stack []Value // scratch for the elements of open arrays and objects
	pos   int
	depth int
}

// bytesString returns data[i:j] as a string, sharing d.text if it can.
func (d *legacyJSONDecoder) bytesString(i, j int) string {
	if d.text != "" {
		return d.text[i:j]
	}
	return string(d.data[i:j])
}

// collect pops the stack down to base and returns the popped values in a
// new, exactly sized slice.
func (d *legacyJSONDecoder) collect(base int) []Value {
	out := make([]Value, len(d.stack)-base)
	copy(out, d.stack[base:])
	clear(d.stack[base:])
	d.stack = d.stack[:base]
	return out
}

// errorf reports a syntax error at the current offset.
func (d *legacyJSONDecoder) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range d.data[:min(d.pos, len(d.data))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	msg := fmt.Sprintf(format, args...)
	return fmt.Errorf("invalid JSON at offset %d (line %d, column %d): %s", d.pos, line, col, msg)
}

func (d *legacyJSONDecoder) quoteChar() string {
	if d.pos >= len(d.data) {
		return "end of input"
	}
	r, _ := utf8.DecodeRune(d.data[d.pos:])
	return "character " + strconv.QuoteRune(r)
}

func (d *legacyJSONDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *legacyJSONDecoder) value() (Value, error) {
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of input, expected a value")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		s, err := d.str()
		return String(s), err
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return True, d.literal("true")
	case c == 'f':
		return False, d.literal("false")
	case c == 'n':
		return Nil, d.literal("null")
	}
	return nil, d.errorf("unexpected %s, expected a value", d.quoteChar())
}

func (d *legacyJSONDecoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return d.errorf("invalid literal, expected %s", word)
	}
	d.pos += len(word)
	return nil
}

func (d *legacyJSONDecoder) enter() error {
	d.depth++
	if d.depth > maxJSONDepth {
		return d.errorf("nesting deeper than %d levels", maxJSONDepth)
	}
	d.pos++ // the opening bracket
	d.skipSpace()
	return nil
}

func (d *legacyJSONDecoder) object() (Value, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	base := len(d.stack)
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return emptyMap, nil
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("unexpected %s, expected a string key", d.quoteChar())
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errorf("unexpected %s, expected ':' after object key", d.quoteChar())
		}
		d.pos++
		d.skipSpace()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		d.stack = append(d.stack, Keyword(k), v)
		if done, err := d.separator('}'); done || err != nil {
			if err != nil {
				return nil, err
			}
			if n := len(d.stack) - base; n <= 2*arrayMapMax && distinctKeys(d.stack[base:], nil) {
				m, mkvs := newArrayMap(n / 2)
				copy(mkvs, d.stack[base:])
				clear(d.stack[base:])
				d.stack = d.stack[:base]
				return m, nil
			}
			return mapOwned(d.collect(base)), nil
		}
	}
}

// separator consumes ',' (false) or the closing bracket (true).
func (d *legacyJSONDecoder) separator(closing byte) (bool, error) {
	d.skipSpace()
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
			return false, nil
		case closing:
			d.pos++
			return true, nil
		}
	}
	return false, d.errorf("unexpected %s, expected ',' or '%c'", d.quoteChar(), closing)
}

func (d *legacyJSONDecoder) array() (Value, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return emptyVector, nil
	}
	base := len(d.stack)
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		d.stack = append(d.stack, v)
		if done, err := d.separator(']'); done || err != nil {
			if err != nil {
				return nil, err
			}
			if len(d.stack)-base <= vwidth {
				v := vectorCopy(d.stack[base:])
				clear(d.stack[base:])
				d.stack = d.stack[:base]
				return v, nil
			}
			return vectorOwned(d.collect(base)), nil
		}
	}
}

// str decodes a string starting at the opening quote.
func (d *legacyJSONDecoder) str() (string, error) {
	start := d.pos + 1
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return d.bytesString(start, i), nil
		case c == '\\' || c >= utf8.RuneSelf:
			return d.strSlow(start)
		case c < 0x20:
			d.pos = i
			return "", d.errorf("control character %#02x in string", c)
		}
		i++
	}
	d.pos = len(d.data)
	return "", d.errorf("unterminated string")
}

// strSlow decodes a string with escapes or non-ASCII bytes.
func (d *legacyJSONDecoder) strSlow(start int) (string, error) {
	buf := make([]byte, 0, 32)
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return string(buf), nil
		case c == '\\':
			var err error
			if buf, i, err = d.escape(buf, i); err != nil {
				return "", err
			}
		case c < 0x20:
			d.pos = i
			return "", d.errorf("control character %#02x in string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(d.data[i:])
			buf = utf8.AppendRune(buf, r) // invalid bytes become U+FFFD
			i += size
		}
	}
	d.pos = len(d.data)
	return "", d.errorf("unterminated string")
}

// escape decodes the escape sequence at data[i] (a backslash).
func (d *legacyJSONDecoder) escape(buf []byte, i int) ([]byte, int, error) {
	if i+1 >= len(d.data) {
		d.pos = len(d.data)
		return nil, 0, d.errorf("unterminated string")
	}
	switch c := d.data[i+1]; c {
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
		r, ok := hex4(d.data, i+2)
		if !ok {
			d.pos = i
			return nil, 0, d.errorf("invalid \\u escape")
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if r2, ok := hex4(d.data, i+2); ok && i+1 < len(d.data) && d.data[i] == '\\' && d.data[i+1] == 'u' {
				if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
					return utf8.AppendRune(buf, p), i + 6, nil
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(buf, r), i, nil
	}
	d.pos = i
	return nil, 0, d.errorf("invalid escape \\%c", d.data[i+1])
}

// number decodes -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (d *legacyJSONDecoder) number() (Value, error) {
	start, i := d.pos, d.pos
	if d.data[i] == '-' {
		i++
	}
	digits := i
	for i < len(d.data) && d.data[i] >= '0' && d.data[i] <= '9' {
		i++
	}
	if i == digits || (d.data[digits] == '0' && i-digits > 1) {
		d.pos = digits
		return nil, d.errorf("invalid number")
	}
	isInt := true
	if i < len(d.data) && d.data[i] == '.' {
		isInt = false
		if i = skipDigits(d.data, i+1); i < 0 {
			return nil, d.errorf("invalid number: expected a digit after '.'")
		}
	}
	if i < len(d.data) && (d.data[i] == 'e' || d.data[i] == 'E') {
		isInt = false
		i++
		if i < len(d.data) && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if i = skipDigits(d.data, i); i < 0 {
			return nil, d.errorf("invalid number: expected a digit in the exponent")
		}
	}
	d.pos = i
	if isInt {
		if n, ok := parseDecimal(d.data[start:i]); ok {
			return Int(n), nil
		}
	}
	f, err := strconv.ParseFloat(string(d.data[start:i]), 64)
	if err != nil {
		d.pos = start
		return nil, d.errorf("%v", errJSONNumberRange)
	}
	return Float(f), nil
}
