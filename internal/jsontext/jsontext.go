// Package jsontext writes JSON text by hand where rtfshost builds it once
// per chunk or value (the RTFS JSON encoder, a transport's cursor, the exec
// transport's {"line": ...} wrapper) and encoding/json would cost an
// allocation per value. It is the one JSON string escaper of the module.
package jsontext

import "unicode/utf8"

// AppendString appends s to b as a JSON string that decodes as
// encoding/json decodes its own:
// quote, backslash and control characters escaped, each byte of invalid
// UTF-8 replaced by U+FFFD (written as UTF-8), everything else copied. It allocates only to grow b.
func AppendString[T string | []byte](b []byte, s T) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeRune decodes the first rune of s without converting s (which
// would allocate for one of the two types).
func decodeRune[T string | []byte](s T) (rune, int) {
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], s)
	return utf8.DecodeRune(buf[:n])
}
