package rtfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The binary value codec: a compact, versioned encoding of every value
// kind (docs/rtfs-values.md). A standalone encoding is the format version
// byte followed by one value; a value is a tag byte and its payload:
//
//	nil false true          tag only
//	int                     zigzag varint
//	float                   8 bytes, IEEE 754 little endian
//	string keyword symbol   uvarint length, UTF-8 bytes
//	list vector set         uvarint count, elements
//	map                     uvarint count, key value pairs
//	builtin                 uvarint length, name (a core builtin)
//	fn                      payload written by the fnCodec hook
//
// and, in version 2 only:
//
//	ref                     uvarint index of a value written before
//	regex                   uvarint length, the pattern's UTF-8 bytes
//	lazy                    kind byte, infinite byte (0 or 1), uvarint
//	                        length and origin, uvarint cycle index,
//	                        uvarint count and the parts (lazy.go)
//	sorted                  the comparator (nil: natural order), then the
//	                        map or set, tag included, in its order
//
// Version 2 writes a value that shares structure once: each non-empty
// collection, each lazy sequence, each closure that captures values and
// each text (a regex's pattern included) of refMinText bytes or more is
// numbered in the order its encoding ends, and the same collection, lazy
// sequence or closure (the same pointer) or an equal text met again is a
// ref to that number. So a state of 60 nested pairs holding 2^60 elements
// takes 60 entries, not 2^60. Version 1, without version 2's tags, is
// still read, and still written: an encoding that needs none of them is
// version 1's byte for byte and says so, so that only a value that shares
// structure or holds a regex, a lazy sequence or a sorted collection is
// unreadable by releases that know version 1 alone.
//
// Nesting is bounded by valueCodecMaxDepth on both sides, and corrupt
// input is always an error that gives the offset, never a panic.

// valueCodecVersion is the format version byte of an encoding that holds
// one of version 2's tags.
const valueCodecVersion = 2

// refMinText is the length from which a text is numbered for refs: a
// shorter one costs as little to write again as a ref.
const refMinText = 16

// valueCodecMaxDepth bounds the nesting of encoded and decoded values.
const valueCodecMaxDepth = 10000

// Value tags.
const (
	vcNil byte = iota + 1
	vcFalse
	vcTrue
	vcInt
	vcFloat
	vcString
	vcKeyword
	vcSymbol
	vcList
	vcVector
	vcMap
	vcSet
	vcBuiltin
	vcFn
	// Version 2's tags: a version 1 encoding has none of them.
	vcRef
	vcRegex
	vcLazy
	vcSorted
)

// fnCodec encodes the function values the value codec cannot encode by
// itself (closures): the compiler's side implements it with the program,
// writing a function id and the captured values through the encoder (and
// reading them back through the decoder), so nesting limits and error
// reporting stay uniform.
type fnCodec interface {
	// appendFn appends fn's payload (after the vcFn tag) to e.
	appendFn(e *valueEncoder, fn Value) error
	// readFn reads a payload written by appendFn.
	readFn(d *valueDecoder) (Value, error)
}

// valueEncoder appends encoded values to buf. It is used by one goroutine.
type valueEncoder struct {
	buf   []byte
	fns   fnCodec // nil: closures are an error
	depth int
	start int   // len(buf) before the encoding
	max   int64 // bound on len(buf)-start; <= 0: none
	refs  refTable
	// needsV2 says that the encoding holds one of version 2's tags, so it
	// needs version 2 to be read.
	needsV2 bool
}

// A refTable numbers the values written so far that a ref may name: the
// collections and closures, by identity, for the value codec and the
// continuation codec, and the texts, by content, for the value codec.
type refTable struct {
	n     int
	first [16]Value     // the first collections and closures, found by a scan
	more  map[Value]int // the rest
	texts map[textKey]int
}

type textKey struct {
	tag byte
	s   string
}

// lookup returns the number of collection or closure v, if it was written.
func (t *refTable) lookup(v Value) (int, bool) {
	for i, x := range t.first[:min(t.n, len(t.first))] {
		if x == v {
			return i, true
		}
	}
	i, ok := t.more[v]
	return i, ok
}

// values returns the collections and closures numbered so far, by number,
// in a table without texts (the continuation codec's).
func (t *refTable) values() []Value {
	if t.n == 0 {
		return nil
	}
	out := make([]Value, t.n)
	copy(out, t.first[:min(t.n, len(t.first))])
	for v, i := range t.more {
		out[i] = v
	}
	return out
}

// add numbers collection or closure v, just written.
func (t *refTable) add(v Value) {
	if t.n < len(t.first) {
		t.first[t.n] = v
	} else {
		if t.more == nil {
			t.more = make(map[Value]int)
		}
		t.more[v] = t.n
	}
	t.n++
}

// MarshalValue encodes a value that contains no closures (a closure is an
// error naming it; core builtins are encoded by name). The result starts
// with the format version and decodes with UnmarshalValue. Cost: O(size of
// the value in memory): shared structure is written once.
func MarshalValue(v Value) ([]byte, error) {
	return marshalValue(make([]byte, 0, 64), v, nil, EncodeOptions{})
}

// MarshalValueOpts is MarshalValue with a bound: past o.MaxBytes it stops
// with a *LimitError (LimitOutput).
func MarshalValueOpts(v Value, o EncodeOptions) ([]byte, error) {
	return marshalValue(make([]byte, 0, 64), v, nil, o)
}

// AppendValue is MarshalValue appending to dst: the format version and v,
// whose encoding decodes with UnmarshalValue. On an error dst is returned
// unchanged (up to its capacity). It allocates only to grow dst.
func AppendValue(dst []byte, v Value) ([]byte, error) {
	b, err := marshalValue(dst, v, nil, EncodeOptions{})
	if err != nil {
		return dst, err
	}
	return b, nil
}

// marshalValue appends the version byte and v to dst, encoding closures
// with fns, within o.MaxBytes.
func marshalValue(dst []byte, v Value, fns fnCodec, o EncodeOptions) ([]byte, error) {
	e := valueEncoder{buf: append(dst, valueCodecVersion), fns: fns, start: len(dst), max: o.MaxBytes}
	if err := e.appendValue(v); err != nil {
		return nil, err
	}
	if !e.needsV2 {
		// Without version 2's tags the encoding is version 1's, byte for
		// byte: say so, so that a release that reads only version 1 (a host
		// of 0.2.0 in a cluster being upgraded) reads it.
		e.buf[e.start] = 1
	}
	return e.buf, nil
}

func (e *valueEncoder) appendUvarint(x uint64) { e.buf = binary.AppendUvarint(e.buf, x) }

// appendString appends a text, or a ref to an equal one written before.
func (e *valueEncoder) appendString(tag byte, s string) {
	if len(s) >= refMinText && tag != vcBuiltin {
		k := textKey{tag, s}
		if i, ok := e.refs.texts[k]; ok {
			e.buf = append(e.buf, vcRef)
			e.needsV2 = true
			e.appendUvarint(uint64(i))
			return
		}
		defer func() {
			if e.refs.texts == nil {
				e.refs.texts = make(map[textKey]int)
			}
			e.refs.texts[k] = e.refs.n
			e.refs.n++
		}()
	}
	e.buf = append(e.buf, tag)
	e.appendUvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// full returns the error of an encoding past its bound, if it is.
func (e *valueEncoder) full() error {
	if e.max > 0 && int64(len(e.buf)-e.start) > e.max {
		return &LimitError{Limit: LimitOutput, Max: e.max}
	}
	return nil
}

// shared reports whether v is one of the values a ref may name: a
// non-empty collection, a lazy sequence or a closure that captures values.
func shared(v Value) bool {
	switch x := v.(type) {
	case *Lazy:
		return true
	case *List:
		return x.Len() > 0
	case *Vector:
		return x.Len() > 0
	case *Map:
		return x.Len() > 0
	case *Set:
		return x.Len() > 0
	case *Closure:
		return len(x.free) > 0
	}
	return false
}

// appendValue appends v's tag and payload, or a ref to it.
func (e *valueEncoder) appendValue(v Value) error {
	if shared(v) {
		if i, ok := e.refs.lookup(v); ok {
			e.buf = append(e.buf, vcRef)
			e.needsV2 = true
			e.appendUvarint(uint64(i))
			return nil
		}
		if err := e.appendNew(v); err != nil {
			return err
		}
		e.refs.add(v)
		return e.full()
	}
	if err := e.appendNew(v); err != nil {
		return err
	}
	return e.full()
}

// appendNew appends v's tag and payload.
func (e *valueEncoder) appendNew(v Value) error {
	switch x := v.(type) {
	case NilType:
		e.buf = append(e.buf, vcNil)
	case Bool:
		tag := vcFalse
		if x {
			tag = vcTrue
		}
		e.buf = append(e.buf, tag)
	case Int:
		e.buf = binary.AppendVarint(append(e.buf, vcInt), int64(x))
	case Float:
		e.buf = binary.LittleEndian.AppendUint64(append(e.buf, vcFloat), math.Float64bits(float64(x)))
	case String:
		e.appendString(vcString, string(x))
	case Keyword:
		e.appendString(vcKeyword, string(x))
	case Symbol:
		e.appendString(vcSymbol, string(x))
	case *Regex:
		e.needsV2 = true
		e.appendString(vcRegex, x.src)
	case *Lazy:
		e.needsV2 = true
		return e.appendLazy(x)
	case *Builtin:
		if lookupBuiltin(x.name) != x {
			return fmt.Errorf("cannot encode %s: only core builtins are encodable", x)
		}
		e.appendString(vcBuiltin, x.name)
	case *List, *Vector, *Map, *Set:
		if o := sortedOf(v); o != nil {
			// A sorted map or set: its comparator, then itself in order.
			e.needsV2 = true
			e.buf = append(e.buf, vcSorted)
			var cmp Value = Nil
			if o.cmp != nil {
				cmp = o.cmp
			}
			if err := e.appendValue(cmp); err != nil {
				return err
			}
		}
		return e.appendCollection(v)
	default:
		if e.fns == nil {
			return fmt.Errorf("cannot encode %s: functions need the program's codec", describe(v))
		}
		e.buf = append(e.buf, vcFn)
		return e.fns.appendFn(e, v)
	}
	return nil
}

func (e *valueEncoder) appendCollection(v Value) error {
	if e.depth++; e.depth > valueCodecMaxDepth {
		return fmt.Errorf("cannot encode a value nested deeper than %d levels", valueCodecMaxDepth)
	}
	defer func() { e.depth-- }()
	var err error
	each := func(x Value) bool {
		err = e.appendValue(x)
		return err == nil
	}
	switch x := v.(type) {
	case *List, *Vector:
		tag := vcList
		if _, ok := v.(*Vector); ok {
			tag = vcVector
		}
		e.buf = append(e.buf, tag)
		e.appendUvarint(uint64(x.(sequential).Len()))
		it := newSeqIter(v)
		for el, ok := it.next(); ok && each(el); el, ok = it.next() {
		}
	case *Map:
		e.buf = append(e.buf, vcMap)
		e.appendUvarint(uint64(x.Len()))
		x.Range(func(k, val Value) bool { return each(k) && each(val) })
	case *Set:
		e.buf = append(e.buf, vcSet)
		e.appendUvarint(uint64(x.Len()))
		x.Range(each)
	}
	return err
}

// valueDecoder reads encoded values from buf. It is used by one goroutine.
type valueDecoder struct {
	buf     []byte
	pos     int
	fns     fnCodec
	depth   int
	version byte
	refs    []Value // the values a ref may name, numbered as the encoder did
}

// UnmarshalValue decodes bytes written by MarshalValue. A wrong format
// version, truncated or corrupt input, trailing bytes, nesting deeper than
// 10,000 levels and encoded closures are errors that give the offset. The
// result does not alias b.
func UnmarshalValue(b []byte) (Value, error) {
	return unmarshalValue(b, nil)
}

// unmarshalValue decodes a standalone encoding, closures through fns.
func unmarshalValue(b []byte, fns fnCodec) (Value, error) {
	if len(b) == 0 {
		return nil, errors.New("decode value: empty input")
	}
	if b[0] != 1 && b[0] != valueCodecVersion {
		return nil, fmt.Errorf("decode value: unsupported format version %d (want 1 or %d)", b[0], valueCodecVersion)
	}
	d := valueDecoder{buf: b, pos: 1, fns: fns, version: b[0]}
	v, err := d.readValue()
	if err != nil {
		return nil, err
	}
	if d.pos != len(b) {
		return nil, d.errorf("%d trailing bytes", len(b)-d.pos)
	}
	return v, nil
}

func (d *valueDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("decode value at offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *valueDecoder) readByte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, d.errorf("unexpected end of input")
	}
	d.pos++
	return d.buf[d.pos-1], nil
}

func (d *valueDecoder) readUvarint() (uint64, error) {
	x, n := binary.Uvarint(d.buf[d.pos:])
	if n <= 0 {
		return 0, d.errorf("bad or truncated varint")
	}
	d.pos += n
	return x, nil
}

// readCount reads a count of items that each take at least one byte, so
// a corrupt count cannot cause a huge allocation.
func (d *valueDecoder) readCount(minBytesEach int) (int, error) {
	n, err := d.readUvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(len(d.buf)-d.pos)/uint64(minBytesEach) {
		return 0, d.errorf("count %d exceeds the remaining input", n)
	}
	return int(n), nil
}

func (d *valueDecoder) readString() (string, error) {
	n, err := d.readCount(1)
	if err != nil {
		return "", err
	}
	s := string(d.buf[d.pos : d.pos+n])
	d.pos += n
	return s, nil
}

// readValue reads one tag and its payload, or a ref, and numbers what a
// ref may name.
func (d *valueDecoder) readValue() (Value, error) {
	if d.version < 2 {
		return d.readNew()
	}
	if d.pos < len(d.buf) && d.buf[d.pos] == vcRef {
		d.pos++
		i, err := d.readUvarint()
		if err != nil {
			return nil, err
		}
		if i >= uint64(len(d.refs)) {
			d.pos--
			return nil, d.errorf("ref %d names no value written before (%d are)", i, len(d.refs))
		}
		return d.refs[i], nil
	}
	v, err := d.readNew()
	if err == nil && shared(v) {
		d.refs = append(d.refs, v)
	}
	return v, err
}

// readNew reads one tag and its payload.
func (d *valueDecoder) readNew() (Value, error) {
	tag, err := d.readByte()
	if err != nil {
		return nil, err
	}
	if tag >= vcRef && tag <= vcSorted && d.version < 2 {
		d.pos--
		return nil, d.errorf("value tag %d is not in format version %d", tag, d.version)
	}
	switch tag {
	case vcNil:
		return Nil, nil
	case vcFalse:
		return False, nil
	case vcTrue:
		return True, nil
	case vcInt:
		x, n := binary.Varint(d.buf[d.pos:])
		if n <= 0 {
			return nil, d.errorf("bad or truncated int")
		}
		d.pos += n
		return Int(x), nil
	case vcFloat:
		if len(d.buf)-d.pos < 8 {
			return nil, d.errorf("truncated float")
		}
		d.pos += 8
		return Float(math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.pos-8:]))), nil
	case vcString, vcKeyword, vcSymbol, vcBuiltin, vcRegex:
		return d.readText(tag)
	case vcList, vcVector, vcMap, vcSet:
		return d.readCollection(tag)
	case vcLazy:
		return d.readLazy()
	case vcSorted:
		return d.readSorted()
	case vcFn:
		if d.fns == nil {
			return nil, d.errorf("a function value needs the program's codec")
		}
		return d.fns.readFn(d)
	}
	d.pos--
	return nil, d.errorf("unknown value tag %d", tag)
}

func (d *valueDecoder) readText(tag byte) (Value, error) {
	s, err := d.readString()
	if err != nil {
		return nil, err
	}
	var v Value
	switch tag {
	case vcString:
		v = String(s)
	case vcKeyword:
		v = Keyword(s)
	case vcSymbol:
		v = Symbol(s)
	case vcRegex:
		re, err := NewRegex(s)
		if err != nil {
			return nil, d.errorf("%v", err)
		}
		v = re
	}
	if v != nil {
		if d.version >= 2 && len(s) >= refMinText {
			d.refs = append(d.refs, v)
		}
		return v, nil
	}
	if b := lookupBuiltin(s); b != nil {
		return b, nil
	}
	return nil, d.errorf("unknown builtin %q", s)
}

func (d *valueDecoder) readCollection(tag byte) (Value, error) {
	elems, err := d.readElems(tag)
	if err != nil {
		return nil, err
	}
	switch tag {
	case vcList:
		return listOwned(elems), nil
	case vcVector:
		return vectorOwned(elems), nil
	case vcMap:
		return mapOwned(elems), nil
	}
	return NewSet(elems...), nil
}

// readElems reads a collection's count and elements (keys and values
// alternating for a map).
func (d *valueDecoder) readElems(tag byte) ([]Value, error) {
	if d.depth++; d.depth > valueCodecMaxDepth {
		return nil, d.errorf("value nested deeper than %d levels", valueCodecMaxDepth)
	}
	defer func() { d.depth-- }()
	per := 1
	if tag == vcMap {
		per = 2
	}
	n, err := d.readCount(per)
	if err != nil {
		return nil, err
	}
	elems := make([]Value, per*n)
	for i := range elems {
		if elems[i], err = d.readValue(); err != nil {
			return nil, err
		}
	}
	return elems, nil
}

// appendLazy writes a lazy sequence: kind, infinite, origin, cycle index,
// and its parts (lazy.go).
func (e *valueEncoder) appendLazy(l *Lazy) error {
	if e.depth++; e.depth > valueCodecMaxDepth {
		return fmt.Errorf("cannot encode a value nested deeper than %d levels", valueCodecMaxDepth)
	}
	defer func() { e.depth-- }()
	e.buf = append(e.buf, vcLazy, byte(l.kind), boolByte(l.inf))
	e.appendUvarint(uint64(len(l.origin)))
	e.buf = append(e.buf, l.origin...)
	e.appendUvarint(uint64(l.i))
	parts := l.parts()
	e.appendUvarint(uint64(len(parts)))
	for _, p := range parts {
		if err := e.appendValue(p); err != nil {
			return err
		}
	}
	return nil
}

func (d *valueDecoder) readLazy() (Value, error) {
	if d.depth++; d.depth > valueCodecMaxDepth {
		return nil, d.errorf("value nested deeper than %d levels", valueCodecMaxDepth)
	}
	defer func() { d.depth-- }()
	kind, err := d.readByte()
	if err != nil {
		return nil, err
	}
	inf, err := d.readByte()
	if err != nil {
		return nil, err
	}
	origin, err := d.readString()
	if err != nil {
		return nil, err
	}
	i, err := d.readUvarint()
	if err != nil {
		return nil, err
	}
	n, err := d.readCount(1)
	if err != nil {
		return nil, err
	}
	parts := make([]Value, 0, min(n, 1024))
	for j := 0; j < n; j++ {
		v, err := d.readValue()
		if err != nil {
			return nil, err
		}
		parts = append(parts, v)
	}
	l, err := lazyFromParts(kind, inf == 1, origin, int(min(i, uint64(maxInt))), parts)
	if err != nil {
		return nil, d.errorf("%v", err)
	}
	return l, nil
}

func (d *valueDecoder) readSorted() (Value, error) {
	cmp, err := d.readValue()
	if err != nil {
		return nil, err
	}
	if cmp == Nil {
		cmp = nil
	} else if !isFn(cmp) {
		return nil, d.errorf("a sorted collection's comparator is %s", describe(cmp))
	}
	tag, err := d.readByte()
	if err != nil {
		return nil, err
	}
	if tag != vcMap && tag != vcSet {
		return nil, d.errorf("a sorted collection is not a map or set (tag %d)", tag)
	}
	elems, err := d.readElems(tag)
	if err != nil {
		return nil, err
	}
	v, err := buildSorted(tag == vcSet, elems, cmp)
	if err != nil {
		return nil, d.errorf("%v", err)
	}
	return v, nil
}
