package rtfs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// UnmarshalGlobals decodes globals that MarshalBinary encoded for the same
// program. A different program or compiler version and corrupt input are
// errors; it never panics.
func UnmarshalGlobals(p *Program, b []byte) (g *Globals, err error) {
	if p == nil {
		return nil, errors.New("rtfs: unmarshal globals: nil program")
	}
	defer func() {
		if r := recover(); r != nil {
			g, err = nil, fmt.Errorf("rtfs: unmarshal globals: internal error: %v", r)
		}
	}()
	d := &decoder{buf: b, prog: p}
	d.header(globalsMagic)
	g = d.globals()
	if d.err == nil && d.off != len(d.buf) {
		d.fail("%d trailing bytes", len(d.buf)-d.off)
	}
	if d.err != nil {
		return nil, fmt.Errorf("rtfs: unmarshal globals: %w", d.err)
	}
	return g, nil
}

// UnmarshalContinuation decodes a continuation that MarshalBinary encoded
// for the same program (same source and compiler version). A different
// program, compiler or format version, and corrupt or truncated input, are
// errors; it never panics.
func UnmarshalContinuation(p *Program, b []byte) (k *Continuation, err error) {
	if p == nil {
		return nil, errors.New("rtfs: unmarshal continuation: nil program")
	}
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, fmt.Errorf("rtfs: unmarshal continuation: internal error: %v", r)
		}
	}()
	d := &decoder{buf: b, prog: p, memoKws: true}
	d.refs = d.refsRoom[:0]
	if m := p.lastKeywords.Load(); m != nil {
		d.kwMemo = *m
	}
	k = d.continuation()
	if d.err != nil {
		return nil, fmt.Errorf("rtfs: unmarshal continuation: %w", d.err)
	}
	if d.kwNew != nil && len(d.kwNew) <= maxKeywordMemo {
		p.lastKeywords.Store(&d.kwNew)
	}
	return k, nil
}

type decoder struct {
	buf  []byte
	off  int
	prog *Program
	err  error
	refs []Value // decoded collections and closures, for tagRef
	// refsRoom holds the first references (one allocation with the
	// decoder, not two).
	refsRoom [8]Value

	// The keywords of a continuation are looked up by position first: the
	// program's previous continuation most often held the same keywords in
	// the same order (kwMemo, Program.lastKeywords), and comparing with the
	// one at the same position is cheaper than the intern tables' lookup.
	// kwNew collects this continuation's keywords from the first that
	// differs, to remember them instead. Only UnmarshalContinuation
	// (memoKws) does this.
	memoKws bool
	kwMemo  []Value
	nkw     int
	kwNew   []Value
}

// maxKeywordMemo bounds the keywords a program remembers by position.
const maxKeywordMemo = 256

// keyword returns the keyword named b, boxed (Program.internKeyword).
func (d *decoder) keyword(b []byte) Value {
	if !d.memoKws {
		return d.prog.internKeyword(b)
	}
	i := d.nkw
	d.nkw++
	var v Value
	if kw, ok := d.memoAt(i); ok && string(kw) == string(b) {
		v = d.kwMemo[i]
	} else {
		v = d.prog.internKeyword(b)
		if d.kwNew == nil {
			d.kwNew = append(make([]Value, 0, i+16), d.kwMemo[:min(i, len(d.kwMemo))]...)
		}
	}
	if d.kwNew != nil {
		d.kwNew = append(d.kwNew, v)
	}
	return v
}

func (d *decoder) memoAt(i int) (Keyword, bool) {
	if i >= len(d.kwMemo) {
		return "", false
	}
	kw, ok := d.kwMemo[i].(Keyword)
	return kw, ok
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format+" (at byte %d)", append(args, d.off)...)
	}
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.buf)-d.off {
		d.fail("truncated input")
		return nil
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.buf) {
		d.fail("truncated input")
		return 0
	}
	b := d.buf[d.off]
	d.off++
	return b
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return x
}

// count reads a length and checks that at least min bytes per element remain.
func (d *decoder) count(min int) int {
	n := d.uint()
	rem := uint64(len(d.buf) - d.off)
	if d.err == nil && (n > rem || n*uint64(min) > rem) {
		d.fail("length %d exceeds the input", n)
		return 0
	}
	return int(n)
}

func (d *decoder) index(limit int, what string) int {
	n := d.uint()
	if d.err == nil && n >= uint64(limit) {
		d.fail("%s %d out of range (%d)", what, n, limit)
		return 0
	}
	return int(n)
}

func (d *decoder) str() string { return string(d.bytes(d.count(1))) }

// name reads a string that is usually one of the program's keyword names
// (a capability id), reusing the program's copy when it is.
func (d *decoder) name() string {
	b := d.bytes(d.count(1))
	if k, ok := d.prog.keywords[string(b)]; ok {
		return string(k.(Keyword))
	}
	return string(b)
}

func (d *decoder) header(magic string) {
	if string(d.bytes(len(magic))) != magic {
		d.fail("bad magic, want %q", magic)
		return
	}
	if v := d.byte(); d.err == nil && v != contVersion {
		d.fail("format version %d, want %d", v, contVersion)
		return
	}
	if v := d.bytes(d.count(1)); d.err == nil && string(v) != compile.Version {
		lp, err := d.prog.underVersion(string(v))
		if err != nil {
			d.fail("%v", err)
			return
		}
		d.prog = lp // an earlier compiler's continuation resumes in its code (legacy.go)
	}
	if h := d.bytes(sha256Size); d.err == nil && string(h) != string(d.prog.hashRaw[:]) {
		d.fail("continuation of program %s, not of %s (%s)", hex.EncodeToString(h), d.prog.hash, d.prog.name)
	}
}

const sha256Size = 32

// contParts holds a decoded continuation's parts in one allocation, with
// room for the frames, the call's arguments and the operand stack of a
// typical processor suspended a few calls deep.
type contParts struct {
	k      Continuation
	g      Globals
	call   HostCall
	frames [4]frame
	vals   [12]Value // the call's arguments, then the stack
}

func (d *decoder) continuation() *Continuation {
	d.header(contMagic)
	parts := &contParts{}
	k := &parts.k
	k.prog = d.prog
	k.globals = d.sharedGlobals(&parts.g)
	call := &parts.call
	call.Capability = d.name()
	line, col := d.uint(), d.uint()
	call.Pos = syntax.MakePos(&d.prog.name, int32(min(line, math.MaxInt32)), int32(min(col, math.MaxInt32)))
	room := parts.vals[:]
	call.Args, room = d.valueListIn(room)
	k.call = call
	d.frames(k, parts.frames[:0:len(parts.frames)])
	k.stack, _ = d.valueListIn(room)
	nh := d.count(3)
	if nh > 0 {
		k.handlers = make([]handler, 0, nh)
	}
	for i := 0; i < nh && d.err == nil; i++ {
		k.handlers = append(k.handlers, handler{frame: int(d.uint()), pc: int(d.uint()), sp: int(d.uint())})
	}
	if d.err == nil && d.off != len(d.buf) {
		d.fail("%d trailing bytes", len(d.buf)-d.off)
	}
	if d.err == nil {
		d.validate(k)
	}
	if d.err != nil {
		return nil
	}
	return k
}

func (d *decoder) globals() *Globals {
	g := &Globals{}
	if !d.globalsInto(g) {
		return nil
	}
	return g
}

// decodedGlobals is a decoded globals section: its bytes, the Globals and
// the values the decoder remembered while decoding it (the back-reference
// table the rest of the continuation indexes).
type decodedGlobals struct {
	enc  []byte
	g    *Globals
	refs []Value
}

// sharedGlobals decodes the globals section, which opens a continuation,
// into g, or returns the Globals of the program's previous continuation when
// the section's bytes are the same: a processor's globals rarely change
// from one chunk to the next, and decoding them is most of a continuation's
// cost. Sharing is safe: Globals decoded from a continuation are never
// written in place (a thread copies them on its first def).
func (d *decoder) sharedGlobals(g *Globals) *Globals {
	start := d.off
	fresh := len(d.refs) == 0 // the section opens the continuation: nothing remembered yet
	if last := d.prog.lastGlobals.Load(); fresh && last != nil && bytes.HasPrefix(d.buf[start:], last.enc) {
		// The section is self-delimiting: the same bytes decode the same way.
		d.off += len(last.enc)
		d.refs = append(d.refs, last.refs...)
		return last.g
	}
	if d.globalsInto(g) && fresh {
		d.prog.lastGlobals.Store(&decodedGlobals{enc: bytes.Clone(d.buf[start:d.off]), g: g, refs: slices.Clone(d.refs)})
	}
	return g
}

// globalsInto decodes the globals section into g.
func (d *decoder) globalsInto(g *Globals) bool {
	ng := d.uint()
	if d.err == nil && ng != uint64(len(d.prog.globals)) {
		d.fail("%d globals, the program has %d", ng, len(d.prog.globals))
	}
	g.prog, g.values = d.prog, make([]Value, len(d.prog.globals))
	k := d.uint()
	if d.err == nil && k > uint64(len(g.values)) {
		d.fail("%d initial globals, the program has %d", k, len(g.values))
	}
	if d.err != nil {
		return false
	}
	copy(g.values, d.prog.init[:k])
	for i := int(k); i < len(g.values); i++ {
		if d.err != nil {
			return false
		}
		if d.off < len(d.buf) && d.buf[d.off] == tagInit {
			d.off++
			g.values[i] = d.prog.init[i]
			continue
		}
		g.values[i] = d.value(0)
	}
	return d.err == nil
}

// frames decodes the frames into room when they fit there.
func (d *decoder) frames(k *Continuation, room []frame) {
	n := d.count(4)
	if d.err == nil && n == 0 {
		d.fail("no frames")
	}
	if n <= cap(room) {
		k.frames = room
	} else {
		k.frames = make([]frame, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		fi := d.prog.funcs[d.index(len(d.prog.funcs), "function id")]
		cl, ok := d.value(0).(*Closure)
		if !ok {
			d.fail("frame %d: closure expected", i)
			return
		}
		k.frames = append(k.frames, frame{fn: fi, cl: cl, pc: int(d.uint()), base: int(d.uint())})
	}
}

// valueListIn decodes a value list into the start of room when it fits
// there, and returns the list and what is left of room.
func (d *decoder) valueListIn(room []Value) (list, rest []Value) {
	n := d.count(1)
	if d.err != nil {
		return nil, room
	}
	if n > len(room) {
		return d.values(make([]Value, n)), room
	}
	return d.values(room[:n:n]), room[n:]
}

// values decodes len(vs) values into vs; nil on an error.
func (d *decoder) values(vs []Value) []Value {
	for i := range vs {
		vs[i] = d.value(0)
		if d.err != nil {
			return nil
		}
	}
	return vs
}

// validate checks that the frames, stack and handlers have exactly the shape
// the compiled code expects at those points (function ids, pcs, the operand
// stack depth of every frame at its call, handler depths), so that resuming
// cannot index out of range.
func (d *decoder) validate(k *Continuation) {
	for i, f := range k.frames {
		c := f.fn.code
		if len(c.Code) == 0 || f.pc <= 0 || f.pc > len(c.Code) || f.base < 1 {
			d.fail("frame %d: pc %d out of range", i, f.pc)
			return
		}
		if !closureRuns(f.cl, f.fn) {
			d.fail("frame %d: closure does not match function %d", i, c.ID)
			return
		}
		end := len(k.stack) // where the frame's operands end
		if i+1 < len(k.frames) {
			end = k.frames[i+1].base
		}
		if want, ok := resumeDepth(c, f.pc-1, i+1 == len(k.frames)); !ok || end != f.base+c.NumLocals+want {
			d.fail("frame %d: stack inconsistent with the code at pc %d", i, f.pc)
			return
		}
	}
	for i, h := range k.handlers {
		if h.frame < 0 || h.frame >= len(k.frames) || h.pc < 0 || h.pc >= len(k.frames[h.frame].fn.code.Code) {
			d.fail("handler %d out of range", i)
			return
		}
		f := k.frames[h.frame]
		if h.sp != f.base+f.fn.code.NumLocals+int(f.fn.code.Depth[h.pc])-1 {
			d.fail("handler %d: stack depth inconsistent with the code", i)
			return
		}
	}
}

// resumeDepth returns how deep the operand stack of a frame suspended at the
// call instruction pc is: for the innermost frame, after the host call's
// operands were popped; for the others, up to the callee's first argument
// (a builtin that redirected to the prelude, redirect.go, is replaced by
// the prelude function in its slot, which for a fast op is its first
// operand's).
func resumeDepth(c *compile.Funcode, pc int, innermost bool) (int, bool) {
	op, arg := compile.Decode(c.Code[pc])
	depth := int(c.Depth[pc])
	switch {
	case innermost && op == compile.HOSTCALL:
		return depth - arg - 1, true
	case innermost && op == compile.HOSTSPREAD:
		return depth - 2, true
	case !innermost && op == compile.CALL:
		return depth - arg, true
	case !innermost && op == compile.CALLSPREAD:
		return depth - 1, true
	case !innermost && op == compile.COUNT:
		// count redirected to the prelude (a lazy sequence to realize):
		// the callee took the operand's slot, so its arguments start above.
		return depth, true
	case !innermost && (op == compile.GET || op == compile.EQ):
		return depth - 1, true
	case !innermost && op == compile.GETDEF:
		return depth - 2, true
	}
	return 0, false
}

func closureRuns(cl *Closure, fi *funcInfo) bool {
	if cl.fn == fi {
		return true
	}
	for _, a := range cl.fn.arities {
		if a == fi {
			return true
		}
	}
	return false
}

func (d *decoder) value(depth int) Value {
	if depth > maxValueDepth {
		d.fail("value nested too deeply")
		return nil
	}
	switch tag := d.byte(); tag {
	case tagHole:
		return nil
	case tagNil:
		return Nil
	case tagFalse:
		return False
	case tagTrue:
		return True
	case tagInt:
		x, n := binary.Varint(d.buf[d.off:])
		if n <= 0 {
			d.fail("bad int")
			return nil
		}
		d.off += n
		return Int(x)
	case tagFloat:
		if d.off+8 > len(d.buf) {
			d.fail("truncated float")
			return nil
		}
		d.off += 8
		return Float(math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.off-8:])))
	case tagString:
		return String(d.str())
	case tagKeyword:
		return d.keyword(d.bytes(d.count(1)))
	case tagSymbol:
		return Symbol(d.str())
	case tagSorted:
		cmp := d.value(depth + 1)
		t := d.byte()
		if d.err != nil {
			return nil
		}
		if cmp == Nil {
			cmp = nil
		} else if !isFn(cmp) {
			d.fail("a sorted collection's comparator is %s", describe(cmp))
			return nil
		}
		if t != tagMap && t != tagSet {
			d.fail("a sorted collection is not a map or set (tag %d)", t)
			return nil
		}
		n := d.count(1)
		if t == tagMap {
			n *= 2
		}
		elems := d.elems(n, depth)
		if d.err != nil {
			return nil
		}
		v, err := buildSorted(t == tagSet, elems, cmp)
		if err != nil {
			d.fail("%v", err)
			return nil
		}
		return d.remember(v)
	case tagLazy:
		kind, inf := d.byte(), d.byte()
		origin := d.str()
		i := d.uint()
		n := d.count(1)
		parts := d.elems(n, depth)
		if d.err != nil {
			return nil
		}
		l, err := lazyFromParts(kind, inf == 1, origin, int(min(i, uint64(maxInt))), parts)
		if err != nil {
			d.fail("%v", err)
			return nil
		}
		return d.remember(l)
	case tagRegex:
		src := d.str()
		if d.err != nil {
			return nil
		}
		re, err := NewRegex(src)
		if err != nil {
			d.fail("%v", err)
			return nil
		}
		return re
	case tagList, tagVector, tagSet, tagMap:
		return d.remember(d.collection(tag, depth))
	case tagFloats:
		return d.remember(d.floats())
	case tagClosure:
		cl := d.closure(depth)
		if cl == nil {
			return nil
		}
		if len(cl.free) == 0 {
			return cl
		}
		return d.remember(cl)
	case tagRef:
		i := d.index(len(d.refs), "reference")
		if d.err != nil {
			return nil
		}
		return d.refs[i]
	case tagBuiltin:
		name := d.str()
		b := d.prog.builtin(name)
		if b == nil && d.err == nil {
			d.fail("unknown builtin %q", name)
		}
		return b
	case tagCaught:
		ee := &EvalError{Msg: d.str()}
		line, col := d.uint(), d.uint()
		ee.Pos = syntax.MakePos(&d.prog.name, int32(min(line, math.MaxInt32)), int32(min(col, math.MaxInt32)))
		ee.Value = d.value(depth + 1)
		if ee.Value == nil {
			d.fail("caught error without a value")
		}
		return &caught{ee}
	default:
		if d.err == nil {
			d.fail("unknown value tag %d", tag)
		}
		return nil
	}
}

func (d *decoder) remember(v Value) Value {
	if v != nil {
		d.refs = append(d.refs, v)
	}
	return v
}

func (d *decoder) floats() Value {
	n := d.count(8)
	if d.err != nil {
		return nil
	}
	if n == 0 {
		d.fail("empty float vector")
		return nil
	}
	fs := make([]Float, n)
	for i := range fs {
		fs[i] = Float(math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.off:])))
		d.off += 8
	}
	elems := make([]Value, n)
	boxFloats(elems, fs) // one allocation for all the floats, not one each
	return vectorOwned(elems)
}

// elems reads n values, the elements of a collection (or the parts of a
// lazy sequence) at depth.
func (d *decoder) elems(n, depth int) []Value {
	elems := make([]Value, 0, min(n, 1024))
	for i := 0; i < n && d.err == nil; i++ {
		v := d.value(depth + 1)
		if v == nil {
			d.fail("collection element missing")
		}
		elems = append(elems, v)
	}
	return elems
}

func (d *decoder) collection(tag byte, depth int) Value {
	n := d.count(1)
	if tag == tagMap {
		if 0 < n && n <= arrayMapMax {
			return d.smallMap(n, depth)
		}
		n *= 2
	}
	elems := d.elems(n, depth)
	if d.err != nil {
		return nil
	}
	switch tag {
	case tagList:
		return listOwned(elems)
	case tagVector:
		return vectorOwned(elems)
	case tagSet:
		return NewSet(elems...)
	}
	if len(elems) <= 16 {
		return mapOwned(elems)
	}
	return MapOf(elems...)
}

// smallMap decodes a map of 1 to arrayMapMax entries straight into an
// array-map, whose entries share its allocation (newArrayMap).
func (d *decoder) smallMap(pairs, depth int) Value {
	m, kvs := newArrayMap(pairs)
	for i := range kvs {
		v := d.value(depth + 1)
		if v == nil {
			if d.err == nil {
				d.fail("collection element missing")
			}
			return nil
		}
		kvs[i] = v
	}
	if !distinctKeys(kvs, nil) {
		return MapOf(kvs...) // a later duplicate wins, as in a map literal
	}
	return m
}

func (d *decoder) closure(depth int) *Closure {
	fi := d.prog.funcs[d.index(len(d.prog.funcs), "function id")]
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	if n != fi.code.NumFree || len(fi.code.Code) == 0 && fi.arities == nil {
		d.fail("closure of function %d with %d captured values, want %d", fi.code.ID, n, fi.code.NumFree)
		return nil
	}
	if n == 0 && fi.static != nil {
		return fi.static
	}
	cl := &Closure{fn: fi}
	if n > 0 {
		cl.free = make([]Value, n)
		for i := range cl.free {
			cl.free[i] = d.value(depth + 1)
			if cl.free[i] == nil {
				d.fail("captured value missing")
				return nil
			}
		}
	}
	return cl
}
