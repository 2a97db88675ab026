package rtfs

// Bounds of a JSONDecoder's intern tables. Longer keys and strings are not
// interned; a full table is cleared and refilled, so its size never grows
// beyond these however hostile the input.
const (
	maxInternKey     = 64
	maxInternKeys    = 1024
	maxInternString  = 32
	maxInternStrings = 256
)

// An internTable maps the bytes of a key or string to its boxed Value, so
// that a name seen before costs no allocation: the lookup m[string(b)]
// does not allocate, and the Value interface already holds its data.
type internTable struct {
	m map[string]Value
}

// keyword returns Keyword(b) boxed, from the table when it is there.
func (t *internTable) keyword(b []byte) Value {
	if v, ok := t.m[string(b)]; ok {
		return v
	}
	s := string(b)
	v := Value(Keyword(s))
	t.add(s, v, maxInternKeys)
	return v
}

// str returns String(b) boxed, from the table when it is there.
func (t *internTable) str(b []byte) Value {
	if v, ok := t.m[string(b)]; ok {
		return v
	}
	s := string(b)
	v := Value(String(s))
	t.add(s, v, maxInternStrings)
	return v
}

// add records v under s, first forgetting everything when the table holds
// limit entries.
func (t *internTable) add(s string, v Value, limit int) {
	switch {
	case t.m == nil:
		t.m = make(map[string]Value, 16)
	case len(t.m) >= limit:
		clear(t.m)
	}
	t.m[s] = v
}

// len returns the number of entries (for tests).
func (t *internTable) len() int { return len(t.m) }
