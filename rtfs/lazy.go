package rtfs

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// Lazy sequences. RTFS sequences are eager, except these: (range),
// (repeat x), (cycle coll), (iterate f x), (repeatedly f), (lazy-seq ...)
// and what map, filter, concat ... make of an infinite one. A *Lazy is a
// chain of nodes, each of which is either computed in Go (a range, a
// repetition, a cycle, a cons cell, a run of elements already computed) or
// a thunk: an RTFS function of no arguments whose value is the rest of the
// sequence. Builtins step through the Go nodes themselves; when they reach a
// thunk they hand their work to the prelude (redirect.go), which calls the
// thunks in the VM (so a host call inside one suspends and serializes as any
// other) and calls the builtin again with the elements it needs computed.
//
// Nothing is memoized: a Lazy is an immutable value, and a thunk runs each
// time a builtin walks past it (docs/rtfs-values.md). A sequence known to be
// infinite says so (inf), and realizing one whole is an error that says so
// at once; a lazy-seq of unknown length is realized as far as the step and
// size limits allow.

type lazyKind uint8

const (
	lzRange  lazyKind = iota + 1 // x, x+step, x+2*step, ...: a (start), b (step)
	lzRepeat                     // a, a, a, ...
	lzCycle                      // the elements of the vector a from index i, round and round
	lzCons                       // a, then the sequence b
	lzRun                        // the elements, then the sequence b (nil: none)
	lzThunk                      // the sequence (a), a a function of no arguments
)

// A Lazy is a lazy sequence (kind seq). It is immutable and safe to share
// between goroutines; its elements are computed when a function needs them.
type Lazy struct {
	kind   lazyKind
	inf    bool   // known to be infinite
	origin string // the call that made the infinite sequence, for errors
	a, b   Value
	i      int     // lzCycle: the index of the first element
	elems  []Value // lzRun
}

// Kind implements Value.
func (*Lazy) Kind() Kind { return types.KindSeq }

// String implements Value: the elements computed in Go, as a list; an
// infinite sequence shows its first elements and "...", a thunk not yet run
// shows as "...".
func (l *Lazy) String() string {
	var b strings.Builder
	writeLazy(&b, l, -1, nil, styleHost)
	return b.String()
}

// lazyPrintMax is how many elements String shows of a sequence it cannot
// show whole.
const lazyPrintMax = 16

// writeLazy prints l as writeLimited prints a list: up to limit bytes
// (limit < 0: all), counting on m a unit per element.
func writeLazy(b *strings.Builder, l *Lazy, limit int, m *meter, style printStyle) {
	b.WriteByte('(')
	var s Value = l
	for i := 0; (limit < 0 || b.Len() <= limit) && m.visit(1); i++ {
		if i == lazyPrintMax && isInfinite(s) {
			b.WriteString(" ...")
			break
		}
		x, rest, ok, thunk, _ := stepPure(s)
		if thunk != nil {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("...")
			break
		}
		if !ok {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		writeForm(b, x, limit, m, style)
		s = rest
	}
	b.WriteByte(')')
}

// isInfinite reports whether v is a sequence known to be infinite.
func isInfinite(v Value) bool {
	l, ok := v.(*Lazy)
	return ok && l.inf
}

// originOf names the call that made an infinite sequence.
func originOf(v Value) string {
	if l, ok := v.(*Lazy); ok && l.origin != "" {
		return l.origin
	}
	return "an infinite sequence"
}

func newRange(start, step Value) *Lazy {
	return &Lazy{kind: lzRange, inf: true, origin: "(range)", a: start, b: step}
}

// lazyCons is (cons x s) for a lazy s.
func lazyCons(x, s Value) *Lazy {
	return &Lazy{kind: lzCons, inf: isInfinite(s), origin: originOf(s), a: x, b: s}
}

// lazyRun is the elements, then more (Nil: none).
func lazyRun(elems []Value, more Value) *Lazy {
	return &Lazy{kind: lzRun, inf: isInfinite(more), origin: originOf(more), elems: elems, b: more}
}

// stepPure takes one step along a seqable value in Go: its first element
// and the rest, or ok false at the end. When the next element is a thunk's
// to compute, it returns that thunk (a *Lazy of kind lzThunk) instead.
func stepPure(v Value) (first, rest Value, ok bool, thunk *Lazy, err error) {
	for {
		switch s := v.(type) {
		case NilType:
			return nil, nil, false, nil, nil
		case *List:
			if s.n == 0 {
				return nil, nil, false, nil, nil
			}
			return s.First(), s.Rest(), true, nil, nil
		case *Vector:
			if s.cnt == 0 {
				return nil, nil, false, nil, nil
			}
			return s.Index(0), listView(s, 1), true, nil, nil
		case *Lazy:
			switch s.kind {
			case lzRange:
				next, err := addNumbers(s.a, s.b)
				if err != nil {
					return nil, nil, false, nil, err
				}
				return s.a, &Lazy{kind: lzRange, inf: true, origin: s.origin, a: next, b: s.b}, true, nil, nil
			case lzRepeat:
				return s.a, s, true, nil, nil
			case lzCycle:
				vec := s.a.(*Vector)
				return vec.Index(s.i), &Lazy{kind: lzCycle, inf: true, origin: s.origin, a: vec, i: (s.i + 1) % vec.Len()}, true, nil, nil
			case lzCons:
				return s.a, s.b, true, nil, nil
			case lzRun:
				switch len(s.elems) {
				case 0:
					v = s.b
					continue
				case 1:
					return s.elems[0], s.b, true, nil, nil
				}
				return s.elems[0], &Lazy{kind: lzRun, inf: s.inf, origin: s.origin, elems: s.elems[1:], b: s.b}, true, nil, nil
			case lzThunk:
				return nil, nil, false, s, nil
			}
		default:
			// Sets, maps and strings step through their elements.
			elems, err := seqSlice(nil, v)
			if err != nil {
				return nil, nil, false, nil, typeError("a collection", v)
			}
			if len(elems) == 0 {
				return nil, nil, false, nil, nil
			}
			return elems[0], listOwned(elems[1:]), true, nil, nil
		}
	}
}

// addNumbers is x + y for a range's next element.
func addNumbers(x, y Value) (Value, error) {
	if a, ok := x.(Int); ok {
		if b, ok := y.(Int); ok {
			s := a + b
			if (s > a) != (b > 0) {
				return nil, errIntOverflow
			}
			return s, nil
		}
	}
	a, _ := toFloat(1, x)
	b, _ := toFloat(2, y)
	return Float(a + b), nil
}

// A needRealize is the error of a builtin that reached a thunk of the lazy
// sequence seq before it had the n elements it needs (n < 0: all of them).
// (*Builtin).call turns it into a redirect to the prelude's %lz-retry,
// which computes them and calls the builtin again.
type needRealize struct {
	seq *Lazy
	n   int
}

func (e *needRealize) Error() string { return "internal error: a lazy sequence was not realized" }

// errInfinite is the error of realizing an infinite sequence whole.
func errInfinite(v Value) error {
	return fmt.Errorf("cannot realize %s whole: it is infinite; take a bounded part first, e.g. (take n ...)", originOf(v))
}

// realize returns the first n elements of v (all of them when n < 0) and the
// sequence after them, computing what Go can and charging th for each
// element. An infinite v realized whole is an error; a thunk in the way is a
// *needRealize for the builtin to return.
func realize(th *Thread, v Value, n int) (elems []Value, rest Value, err error) {
	l, isLazy := v.(*Lazy)
	if n < 0 && isLazy && l.inf {
		return nil, nil, errInfinite(v)
	}
	m := meter{th: th, bytes: elemBytes}
	s := v
	for n < 0 || len(elems) < n {
		if lz, ok := s.(*Lazy); ok && n >= 0 && lz.kind >= lzRange && lz.kind <= lzCycle {
			// A range, repetition or cycle: its elements in a loop,
			// without a node per step.
			elems, rest, err := lz.fill(th, elems, n, &m)
			if err != nil {
				return nil, nil, err
			}
			return elems, rest, m.done()
		}
		x, r, ok, thunk, err := stepPure(s)
		if err != nil {
			return nil, nil, err
		}
		if thunk != nil {
			if isLazy {
				return nil, nil, &needRealize{seq: l, n: n}
			}
			return nil, nil, errors.New("internal error: a thunk outside a lazy sequence")
		}
		if !ok {
			return elems, Nil, m.done()
		}
		if n < 0 && isInfinite(r) {
			return nil, nil, errInfinite(r)
		}
		elems = append(elems, x)
		if err := th.checkSize(len(elems)); err != nil {
			return nil, nil, err
		}
		if err := m.tick(); err != nil {
			return nil, nil, err
		}
		s = r
	}
	return elems, s, m.done()
}

// fill appends the elements of l, a range, repetition or cycle (infinite),
// to elems until it holds n, counting each on m, and returns the sequence
// after them. What it appends is what stepPure would give.
func (l *Lazy) fill(th *Thread, elems []Value, n int, m *meter) ([]Value, Value, error) {
	// Room for what the budgets allow, up to a million (then append
	// doubles): one allocation for the usual take, and no huge one for a
	// take the budget stops.
	elems = slices.Grow(elems, min(th.room(n-len(elems), len(elems)), 1<<20))
	switch l.kind {
	case lzRange:
		x := l.a
		for len(elems) < n {
			next, err := addNumbers(x, l.b)
			if err != nil {
				return nil, nil, err
			}
			elems = append(elems, x)
			if err := th.checkSize(len(elems)); err != nil {
				return nil, nil, err
			}
			if err := m.tick(); err != nil {
				return nil, nil, err
			}
			x = next
		}
		return elems, &Lazy{kind: lzRange, inf: true, origin: l.origin, a: x, b: l.b}, nil
	case lzRepeat:
		for len(elems) < n {
			elems = append(elems, l.a)
			if err := th.checkSize(len(elems)); err != nil {
				return nil, nil, err
			}
			if err := m.tick(); err != nil {
				return nil, nil, err
			}
		}
		return elems, l, nil
	}
	vec, i := l.a.(*Vector), l.i
	for len(elems) < n {
		elems = append(elems, vec.Index(i))
		if err := th.checkSize(len(elems)); err != nil {
			return nil, nil, err
		}
		if err := m.tick(); err != nil {
			return nil, nil, err
		}
		i = (i + 1) % vec.Len()
	}
	return elems, &Lazy{kind: lzCycle, inf: true, origin: l.origin, a: vec, i: i}, nil
}

// room is how many of want more elements a builtin building a collection
// of have elements may allocate at once: no more than the collection-size
// limit, the memory budget and the step budget allow (want itself outside
// a run).
func (th *Thread) room(want, have int) int {
	if th == nil {
		return want
	}
	r := min(int64(want), int64(th.limits.MaxCollectionSize-have)+1,
		(th.limits.MaxMemory-th.mem)/elemBytes+1, th.limits.MaxSteps-th.steps-th.work+1)
	return int(max(r, 0))
}

// lazyConcat reports whether concat must keep its result lazy: some
// argument is a lazy sequence.
func lazyConcat(args []Value) bool {
	for _, a := range args {
		if _, ok := a.(*Lazy); ok {
			return true
		}
	}
	return false
}

// concatLazy is concat with a lazy argument: the elements of the arguments
// before the first infinite one or the last one, then that one as it is
// (the arguments after an infinite one are never reached).
func concatLazy(th *Thread, args []Value) (Value, error) {
	var elems []Value
	for i, a := range args {
		if i == len(args)-1 || isInfinite(a) {
			if _, ok := a.(*Lazy); !ok {
				xs, err := seqSlice(th, a)
				if err != nil {
					return nil, seqErr(err, argTypeError(i+1, "a collection", a))
				}
				return listOwned(append(elems, xs...)), th.checkSize(len(elems) + len(xs))
			}
			return lazyRun(elems, a), nil
		}
		xs, err := seqSlice(th, a)
		if err != nil {
			return nil, seqErr(err, argTypeError(i+1, "a collection", a))
		}
		elems = append(elems, xs...)
		if err := th.checkSize(len(elems)); err != nil {
			return nil, err
		}
	}
	return listOwned(elems), nil
}

// The prelude's side of lazy sequences (intrinsics).

// intrLzStep1 is (%lz-step1 s whole?): one step along s in Go, as
// [first rest], nil at the end, or the function of the thunk to run first.
// With whole set, a sequence known to be infinite is an error.
func intrLzStep1(th *Thread, args []Value) (Value, error) {
	s := args[0]
	if Truth(args[1]) && isInfinite(s) {
		return nil, errInfinite(s)
	}
	switch c := s.(type) {
	case *Map, *Set, String:
		// stepPure copies its elements once (the rest is a list).
		n, err := countOf(th, c)
		if err != nil {
			return nil, err
		}
		if err := th.chargeElems(n); err != nil {
			return nil, err
		}
	}
	x, rest, ok, thunk, err := stepPure(s)
	switch {
	case err != nil:
		return nil, err
	case thunk != nil:
		return thunk.a, nil
	case !ok:
		return Nil, nil
	}
	if err := th.charge(1, 2*elemBytes); err != nil {
		return nil, err
	}
	return NewVector(x, rest), nil
}

// intrLzRun is (%lz-run elems more): the computed elements, then more.
func intrLzRun(th *Thread, args []Value) (Value, error) {
	var v *Vector
	var more Value
	if err := unpackArgs(th, args, &v, &more); err != nil {
		return nil, err
	}
	if err := th.chargeElems(v.Len()); err != nil {
		return nil, err
	}
	return lazyRun(v.appendTo(nil, 0), more), nil
}

// intrLzSwap is (%lz-swap args s computed): the arguments of a builtin
// that stopped at a thunk of s (a vector), with s replaced by the sequence
// whose elements were computed. s must be one of them: a lazy sequence
// nested inside another argument cannot be replaced, so it is an error
// rather than a loop.
func intrLzSwap(th *Thread, args []Value) (Value, error) {
	var v *Vector
	var s, computed Value
	if err := unpackArgs(th, args, &v, &s, &computed); err != nil {
		return nil, err
	}
	out := v.appendTo(nil, 0)
	swapped := false
	for i, a := range out {
		if a == s {
			out[i] = computed
			swapped = true
		}
	}
	if !swapped {
		return nil, errors.New("cannot compute the elements of a lazy sequence held inside another value here; realize it first with (doall s) or (vec s)")
	}
	return vectorOwned(out), nil
}

// intrLazy is (%lazy f): the lazy sequence of the value of f, a function of
// no arguments (what (lazy-seq body...) compiles to).
func intrLazy(th *Thread, args []Value) (Value, error) {
	var f Value
	if err := unpackArgs(th, args, fn(&f)); err != nil {
		return nil, err
	}
	return &Lazy{kind: lzThunk, a: f}, nil
}

// intrLazyInf is (%lazy-inf f like): %lazy for a sequence known to be
// infinite, named like the infinite sequence like (or by the string like).
func intrLazyInf(th *Thread, args []Value) (Value, error) {
	var f, like Value
	if err := unpackArgs(th, args, fn(&f), &like); err != nil {
		return nil, err
	}
	origin := originOf(like)
	if s, ok := like.(String); ok {
		origin = string(s)
	}
	return &Lazy{kind: lzThunk, inf: true, origin: origin, a: f}, nil
}

func isFn(v Value) bool {
	switch v.(type) {
	case *Closure, *Builtin:
		return true
	}
	return false
}

// intrLazyLike is (%lazy-like s f): %lazy of f for a sequence made from
// the lazy sequence s, infinite when s is.
func intrLazyLike(th *Thread, args []Value) (Value, error) {
	var s, f Value
	if err := unpackArgs(th, args, &s, fn(&f)); err != nil {
		return nil, err
	}
	return &Lazy{kind: lzThunk, inf: isInfinite(s), origin: originOf(s), a: f}, nil
}

// intrLazyLikeAll is (%lazy-like-all ss f): %lazy of f for a sequence made
// from the lazy sequences ss in step, infinite when they all are.
func intrLazyLikeAll(th *Thread, args []Value) (Value, error) {
	var ss, f Value
	if err := unpackArgs(th, args, &ss, fn(&f)); err != nil {
		return nil, err
	}
	xs, err := items(th, ss)
	if err != nil {
		return nil, err
	}
	l := &Lazy{kind: lzThunk, inf: xs.Len() > 0, a: f}
	for i := 0; i < xs.Len(); i++ {
		if !isInfinite(xs.Index(i)) {
			l.inf = false
		} else if l.origin == "" {
			l.origin = originOf(xs.Index(i))
		}
	}
	return l, nil
}

// intrIsLazy is (%lazy? s ...): some argument is a lazy sequence.
func intrIsLazy(_ *Thread, args []Value) (Value, error) {
	for _, a := range args {
		if _, ok := a.(*Lazy); ok {
			return True, nil
		}
	}
	return False, nil
}

// intrAllLazy is (%all-lazy? colls): every element of colls is a lazy
// sequence.
func intrAllLazy(th *Thread, args []Value) (Value, error) {
	xs, err := items(th, args[0])
	if err != nil {
		return nil, err
	}
	for i := 0; i < xs.Len(); i++ {
		if _, ok := xs.Index(i).(*Lazy); !ok {
			return False, nil
		}
	}
	return True, nil
}

// intrEagerCount is (%eager-count colls): the smallest count of the
// elements of colls that are not lazy sequences.
func intrEagerCount(th *Thread, args []Value) (Value, error) {
	xs, err := items(th, args[0])
	if err != nil {
		return nil, err
	}
	n := -1
	for i := 0; i < xs.Len(); i++ {
		c := xs.Index(i)
		if _, ok := c.(*Lazy); ok {
			continue
		}
		k, err := countOf(th, c)
		if err != nil {
			return nil, err
		}
		if n < 0 || k < n {
			n = k
		}
	}
	return Int(max(n, 0)), nil
}

// intrItemsN is (%items-n coll n): the first n elements of coll (fewer if
// it has fewer) as a vector.
func intrItemsN(th *Thread, args []Value) (Value, error) {
	var coll Value
	var n int
	if err := unpackArgs(th, args, &coll, &n); err != nil {
		return nil, err
	}
	if l, ok := coll.(*Lazy); ok {
		elems, _, err := realize(th, l, n)
		return vectorOwned(elems), err
	}
	xs, err := items(th, coll)
	if err != nil {
		return nil, err
	}
	if xs.Len() <= n {
		return xs, nil
	}
	return intrSlice(th, []Value{xs, Int(0), Int(n)})
}

// allInfinite reports whether every one of colls is known to be infinite.
func allInfinite(colls []Value) bool {
	for _, c := range colls {
		if !isInfinite(c) {
			return false
		}
	}
	return true
}

// allLazy reports whether every one of colls is a lazy sequence.
func allLazy(colls []Value) bool {
	for _, c := range colls {
		if _, ok := c.(*Lazy); !ok {
			return false
		}
	}
	return true
}

// boundedSlices returns the elements of each of colls, the infinite ones
// computed only as far as the shortest finite one goes (what zipmap,
// interleave and map over several collections take of them). Some
// collection must be finite.
func boundedSlices(th *Thread, colls []Value) ([][]Value, error) {
	out := make([][]Value, len(colls))
	n := -1
	for i, c := range colls {
		if isInfinite(c) {
			continue
		}
		xs, err := seqSlice(th, c)
		if err != nil {
			return nil, seqErr(err, argTypeError(i+1, "a collection", c))
		}
		out[i] = xs
		if n < 0 || len(xs) < n {
			n = len(xs)
		}
	}
	for i, c := range colls {
		if l, ok := c.(*Lazy); ok && l.inf {
			elems, _, err := realize(th, l, n)
			if err != nil {
				return nil, err
			}
			out[i] = elems
		}
	}
	return out, nil
}

// Encoding: both codecs write a lazy sequence as its kind, whether it is
// infinite, its origin, the cycle index, and its parts as values (closures
// included, so a thunk needs the program's codec).

// parts returns the values a lazy sequence is made of, in encoding order.
func (l *Lazy) parts() []Value {
	switch l.kind {
	case lzRange, lzCons:
		return []Value{l.a, l.b}
	case lzRepeat, lzCycle, lzThunk:
		return []Value{l.a}
	case lzRun:
		return append(append([]Value(nil), l.elems...), l.b)
	}
	return nil
}

// lazyFromParts rebuilds a lazy sequence from its encoding, checking that
// the parts have the shape its kind needs.
func lazyFromParts(kind byte, inf bool, origin string, i int, parts []Value) (*Lazy, error) {
	l := &Lazy{kind: lazyKind(kind), inf: inf, origin: origin}
	bad := func() (*Lazy, error) {
		return nil, fmt.Errorf("malformed lazy sequence (kind %d, %d parts)", kind, len(parts))
	}
	switch l.kind {
	case lzRange:
		if len(parts) != 2 || !isNumber(parts[0]) || !isNumber(parts[1]) {
			return bad()
		}
		l.a, l.b = parts[0], parts[1]
	case lzCons:
		if len(parts) != 2 {
			return bad()
		}
		l.a, l.b = parts[0], parts[1]
	case lzRepeat:
		if len(parts) != 1 {
			return bad()
		}
		l.a = parts[0]
	case lzCycle:
		v, ok := at0(parts).(*Vector)
		if len(parts) != 1 || !ok || v.Len() == 0 || i < 0 || i >= v.Len() {
			return bad()
		}
		l.a, l.i = v, i
	case lzThunk:
		if len(parts) != 1 || !isFn(parts[0]) {
			return bad()
		}
		l.a = parts[0]
	case lzRun:
		if len(parts) == 0 {
			return bad()
		}
		l.elems, l.b = parts[:len(parts)-1], parts[len(parts)-1]
	default:
		return bad()
	}
	return l, nil
}

func at0(vs []Value) Value {
	if len(vs) == 0 {
		return nil
	}
	return vs[0]
}

// maxComputed bounds how many elements computedList walks: a longer lazy
// sequence is compared, hashed and encoded by identity (it is realized by
// the builtins that need it, which charge for it).
const maxComputed = 1 << 16

// computedList returns the elements of a finite lazy sequence as a list when
// Go can compute them all (no thunk in the way, not infinite, not longer
// than maxComputed), counting one unit per element it steps through; once
// m's budget is spent it reports false, and the caller returns m's error. A
// nil m counts nothing.
func (m *meter) computedList(l *Lazy) (*List, bool) {
	if l.inf {
		return nil, false
	}
	var elems []Value
	var s Value = l
	for len(elems) <= maxComputed {
		x, rest, ok, thunk, err := stepPure(s)
		if err != nil || thunk != nil {
			return nil, false
		}
		if !ok {
			return listOwned(elems), true
		}
		if isInfinite(rest) || !m.visit(1) {
			return nil, false
		}
		elems = append(elems, x)
		s = rest
	}
	return nil, false
}

// equalLazy is = with a lazy sequence: element by element when Go can
// compute them (an infinite sequence differs from every finite one), else
// identity. The = builtin computes a lazy argument's thunks first. It
// counts one unit on m per element pair, as equalSeq does.
func (m *meter) equalLazy(l *Lazy, b Value) bool {
	if Value(l) == b {
		return true
	}
	switch y := b.(type) {
	case *List, *Vector, *Lazy:
		if l.inf && isInfinite(y) {
			return false // never decided by stepping; identity above
		}
		var xs, ys Value = l, y
		for {
			x1, r1, ok1, t1, err1 := stepPure(xs)
			x2, r2, ok2, t2, err2 := stepPure(ys)
			if err1 != nil || err2 != nil || t1 != nil || t2 != nil {
				return false
			}
			if !ok1 || !ok2 {
				return ok1 == ok2
			}
			if !m.visit(1) || !m.equal(x1, x2) {
				return false
			}
			xs, ys = r1, r2
		}
	}
	return false
}

func isLazy(v Value) bool {
	_, ok := v.(*Lazy)
	return ok
}

// realizeLazyArgs computes the elements of the lazy sequences among args
// (returning a *needRealize for the builtin when a thunk must run), for the
// builtins that compare or print them whole. An infinite one is an error
// when print is set, and is left as it is otherwise (it differs from every
// finite sequence). To compare, it computes no more than one element beyond
// the shortest list or vector among args: that decides = already.
func realizeLazyArgs(th *Thread, args []Value, print bool) error {
	m := meter{th: th}
	bound := -1
	if !print {
		for _, a := range args {
			if s, ok := a.(sequential); ok && (bound < 0 || s.Len() < bound) {
				bound = s.Len()
			}
		}
	}
	for _, a := range args {
		l, ok := a.(*Lazy)
		if !ok {
			continue
		}
		if l.inf {
			if print {
				return fmt.Errorf("cannot print %s: it is infinite; take a bounded part first, e.g. (take n ...)", originOf(l))
			}
			continue
		}
		if _, ok := m.computedList(l); ok {
			continue
		}
		if err := m.done(); err != nil {
			return err
		}
		n := -1
		if bound >= 0 {
			n = bound + 1
		}
		if _, _, err := realize(th, l, n); err != nil {
			return err
		}
	}
	return m.done()
}

// intrRealized is (%realized x ...): the arguments, each lazy sequence
// among them with its elements computed (for the logging functions, whose
// host prints them).
func intrRealized(th *Thread, args []Value) (Value, error) {
	if err := realizeLazyArgs(th, args, true); err != nil {
		return nil, err
	}
	out := make([]Value, len(args))
	m := meter{th: th, bytes: elemBytes}
	for i, a := range args {
		if l, ok := a.(*Lazy); ok {
			if xs, ok := m.computedList(l); ok {
				a = xs
			}
		}
		out[i] = a
	}
	return listOwned(out), m.done()
}
