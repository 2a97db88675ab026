package rtfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// The continuation format (docs/continuations.md): magic, format version,
// compiler version, program hash, globals, host call, frames, stack, handlers.
const (
	contMagic    = "RTFK"
	globalsMagic = "RTFG"
	contVersion  = 1
	// maxValueDepth bounds the nesting of encoded values.
	maxValueDepth = 10000
)

// Value tags of the continuation encoding.
const (
	tagHole byte = iota // an unset slot (Go nil)
	tagNil
	tagFalse
	tagTrue
	tagInt
	tagFloat
	tagString
	tagKeyword
	tagSymbol
	tagList
	tagVector
	tagMap
	tagSet
	tagClosure
	tagBuiltin
	tagCaught
	tagInit   // a global that still has the program's initial value
	tagRef    // a collection or closure written before (its index)
	tagFloats // a vector of floats: count, then 8 bytes each
	tagRegex  // a regex: its pattern (added in rtfs-compile-3; older continuations have none)
	tagLazy   // a lazy sequence: kind, infinite, origin, index, parts (added in rtfs-compile-3)
	tagSorted // a sorted map or set: its comparator (nil: natural), then the map or set in order (added in rtfs-compile-3)
)

// MarshalBinary encodes the continuation: the program's hash, the globals,
// the frames, the stack and the handlers, with every value, closures
// included (as function id and captured values). A collection or closure
// met again (the same pointer) is a back-reference, so shared structure is
// written once; a text is written where it appears.
func (k *Continuation) MarshalBinary() ([]byte, error) {
	return k.MarshalBinaryOpts(EncodeOptions{})
}

// MarshalBinaryOpts is MarshalBinary with a bound: past o.MaxBytes it stops
// with a *LimitError (LimitOutput), which the error wraps.
func (k *Continuation) MarshalBinaryOpts(o EncodeOptions) ([]byte, error) {
	size := int(min(k.prog.contSize.Load(), 64<<10)) // a huge one is no guide
	if size == 0 {
		size = 1024
	}
	e := &encoder{buf: make([]byte, 0, size+size/16+16), max: o.MaxBytes}
	e.header(contMagic, k.prog)
	e.globals(k.globals)
	e.str(k.call.Capability)
	e.uint(uint64(k.call.Pos.Line))
	e.uint(uint64(k.call.Pos.Col))
	e.values(k.call.Args)
	e.uint(uint64(len(k.frames)))
	for _, f := range k.frames {
		e.uint(uint64(f.fn.code.ID))
		e.value(f.cl, 0)
		e.uint(uint64(f.pc))
		e.uint(uint64(f.base))
	}
	e.values(k.stack)
	e.uint(uint64(len(k.handlers)))
	for _, h := range k.handlers {
		e.uint(uint64(h.frame))
		e.uint(uint64(h.pc))
		e.uint(uint64(h.sp))
	}
	if e.err != nil {
		return nil, fmt.Errorf("rtfs: marshal continuation: %w", e.err)
	}
	if n := int64(len(e.buf)); n != k.prog.contSize.Load() {
		k.prog.contSize.Store(n)
	}
	return e.buf, nil
}

func (e *encoder) header(magic string, p *Program) {
	e.buf = append(e.buf, magic...)
	e.buf = append(e.buf, contVersion)
	e.str(compile.Version)
	e.buf = append(e.buf, p.hashRaw[:]...)
}

// An encodedGlobals is the globals section of a continuation as encoded,
// and the collections and closures the encoder remembered while writing it,
// in order (the back-references the rest of the continuation may use).
type encodedGlobals struct {
	enc  []byte
	refs []Value
}

// globals writes the globals section. The section opens a continuation,
// so it is encoded with nothing remembered yet and always the same way:
// the encoding of g is kept with g and copied the next time.
func (e *encoder) globals(g *Globals) {
	if e.refs.n == 0 && e.err == nil {
		if c := g.enc.Load(); c != nil {
			e.buf = append(e.buf, c.enc...)
			for _, v := range c.refs {
				e.remember(v)
			}
			return
		}
		start := len(e.buf)
		e.globalsSection(g)
		if e.err == nil {
			g.enc.Store(&encodedGlobals{enc: bytes.Clone(e.buf[start:]), refs: e.remembered()})
		}
		return
	}
	e.globalsSection(g)
}

// remembered returns the values remembered so far, by index.
func (e *encoder) remembered() []Value { return e.refs.values() }

func (e *encoder) globalsSection(g *Globals) {
	e.uint(uint64(len(g.values)))
	k := 0 // leading globals that still hold their initial values
	for k < len(g.values) && g.values[k] != nil && g.values[k] == g.prog.init[k] {
		k++
	}
	e.uint(uint64(k))
	for i, v := range g.values[k:] {
		if v != nil && v == g.prog.init[k+i] {
			e.buf = append(e.buf, tagInit)
			continue
		}
		e.value(v, 0)
	}
}

// MarshalBinary encodes the globals with the program's hash, in the value
// encoding of continuations (docs/continuations.md).
func (g *Globals) MarshalBinary() ([]byte, error) {
	return g.MarshalBinaryOpts(EncodeOptions{})
}

// MarshalBinaryOpts is MarshalBinary with a bound, as
// Continuation.MarshalBinaryOpts has.
func (g *Globals) MarshalBinaryOpts(o EncodeOptions) ([]byte, error) {
	e := &encoder{buf: make([]byte, 0, 256), max: o.MaxBytes}
	e.header(globalsMagic, g.prog)
	e.globals(g)
	if e.err != nil {
		return nil, fmt.Errorf("rtfs: marshal globals: %w", e.err)
	}
	return e.buf, nil
}

type encoder struct {
	buf  []byte
	max  int64 // bound on len(buf); <= 0: none
	err  error
	refs refTable // the collections and closures written, by identity
}

// backref writes a back-reference and reports true if v was written before.
func (e *encoder) backref(v Value) bool {
	i, ok := e.lookup(v)
	if ok {
		e.buf = append(e.buf, tagRef)
		e.uint(uint64(i))
	}
	return ok
}

// remember records v, just written, for later back-references.
func (e *encoder) remember(v Value) { e.refs.add(v) }

func (e *encoder) lookup(v Value) (int, bool) { return e.refs.lookup(v) }

func (e *encoder) uint(x uint64) { e.buf = binary.AppendUvarint(e.buf, x) }

func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) values(vs []Value) {
	e.uint(uint64(len(vs)))
	for _, v := range vs {
		e.value(v, 0)
	}
}

func (e *encoder) collection(v Value, depth int) {
	switch c := v.(type) {
	case *Vector:
		if e.floats(c) {
			return
		}
		e.buf = append(e.buf, tagVector)
		e.uint(uint64(c.Len()))
		for i := 0; i < c.Len(); i++ {
			e.value(c.Index(i), depth+1)
		}
	case *List:
		e.buf = append(e.buf, tagList)
		e.uint(uint64(c.Len()))
		for l := c; l.Len() > 0; l = l.Rest() {
			e.value(l.First(), depth+1)
		}
	case *Set:
		e.buf = append(e.buf, tagSet)
		e.uint(uint64(c.Len()))
		for i := 0; i < c.Len(); i++ {
			e.value(c.Index(i), depth+1)
		}
	case *Map:
		e.mapValue(c, depth)
	}
}

func (e *encoder) value(v Value, depth int) {
	if depth > maxValueDepth {
		if e.err == nil {
			e.err = errors.New("value nested too deeply")
		}
		return
	}
	if e.max > 0 && int64(len(e.buf)) > e.max {
		if e.err == nil {
			e.err = &LimitError{Limit: LimitOutput, Max: e.max}
		}
		return
	}
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, tagHole)
	case NilType:
		e.buf = append(e.buf, tagNil)
	case Bool:
		if v {
			e.buf = append(e.buf, tagTrue)
		} else {
			e.buf = append(e.buf, tagFalse)
		}
	case Int:
		e.buf = append(e.buf, tagInt)
		e.buf = binary.AppendVarint(e.buf, int64(v))
	case Float:
		e.buf = append(e.buf, tagFloat)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(float64(v)))
	case String:
		e.buf = append(e.buf, tagString)
		e.str(string(v))
	case Keyword:
		e.buf = append(e.buf, tagKeyword)
		e.str(string(v))
	case Symbol:
		e.buf = append(e.buf, tagSymbol)
		e.str(string(v))
	case *Regex:
		e.buf = append(e.buf, tagRegex)
		e.str(v.src)
	case *Lazy:
		// Written once and then referenced, like a collection: a builtin
		// waiting for the prelude to compute a lazy sequence's elements
		// finds it again by identity among its arguments (lazy.go).
		if e.backref(v) {
			break
		}
		e.buf = append(e.buf, tagLazy, byte(v.kind), boolByte(v.inf))
		e.str(v.origin)
		e.uint(uint64(v.i))
		parts := v.parts()
		e.uint(uint64(len(parts)))
		for _, p := range parts {
			e.value(p, depth+1)
		}
		e.remember(v)
	case *List, *Vector, *Set, *Map:
		if !e.backref(v) {
			if o := sortedOf(v); o != nil {
				e.buf = append(e.buf, tagSorted)
				cmp := o.cmp
				if cmp == nil {
					cmp = Nil
				}
				e.value(cmp, depth+1)
			}
			e.collection(v, depth)
			e.remember(v)
		}
	case *Closure:
		if len(v.free) == 0 {
			e.buf = append(e.buf, tagClosure)
			e.uint(uint64(v.fn.code.ID))
			e.uint(0)
		} else if !e.backref(v) {
			e.closure(v, depth)
			e.remember(v)
		}
	case *Builtin:
		e.buf = append(e.buf, tagBuiltin)
		e.str(builtinKey(v))
	case *caught:
		e.buf = append(e.buf, tagCaught)
		e.str(v.err.Msg)
		e.uint(uint64(v.err.Pos.Line))
		e.uint(uint64(v.err.Pos.Col))
		e.value(v.err.Value, depth+1)
	default:
		if e.err == nil {
			e.err = fmt.Errorf("cannot encode a value of type %T", v)
		}
	}
}

// floats writes a non-empty vector of floats compactly and reports whether
// v was one.
func (e *encoder) floats(v *Vector) bool {
	n := v.Len()
	if n == 0 {
		return false
	}
	start := len(e.buf)
	e.buf = append(e.buf, tagFloats)
	e.uint(uint64(n))
	for i := 0; i < n; {
		leaf := v.leafFor(i) // a leaf at a time: no walk from the root per element
		for _, x := range leaf[i&vmask:] {
			f, ok := x.(Float)
			if !ok {
				e.buf = e.buf[:start] // not all floats: the caller writes the vector as values
				return false
			}
			e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(float64(f)))
			i++
		}
	}
	return true
}

func (e *encoder) mapValue(m *Map, depth int) {
	e.buf = append(e.buf, tagMap)
	e.uint(uint64(m.Len()))
	m.Range(func(k, x Value) bool {
		e.value(k, depth+1)
		e.value(x, depth+1)
		return true
	})
}

func (e *encoder) closure(c *Closure, depth int) {
	e.buf = append(e.buf, tagClosure)
	e.uint(uint64(c.fn.code.ID))
	e.uint(uint64(len(c.free)))
	for _, x := range c.free {
		e.value(x, depth+1)
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
