package rtfs

import (
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// destructOp runs the destructuring and pattern-matching instructions.
func (th *Thread) destructOp(op compile.Opcode, arg int, fi *funcInfo, stack []Value, sp *int) error {
	top := *sp - 1
	v := stack[top]
	switch op {
	case compile.INDEX:
		x, err := indexValue(v, arg)
		stack[top] = x
		return err
	case compile.RESTFROM:
		x, err := restFrom(v, arg)
		stack[top] = x
		return err
	case compile.LOOKUP, compile.LOOKUPD, compile.HASKEY:
		if fi.code.SeqLookup {
			return lookupOpSeq(op, fi.consts[arg], stack, sp)
		}
		return th.lookupOp(op, fi.consts[arg], stack, sp)
	case compile.MAPARG:
		x, err := th.seqToMap(v)
		stack[top] = x
		return err
	case compile.ISSEQ:
		n, rest := arg>>1, arg&1 == 1
		l := -1
		switch c := v.(type) {
		case *Vector:
			l = c.Len()
		case *List:
			l = c.Len()
		}
		stack[top] = Bool(l >= 0 && (l == n || (rest && l >= n)))
	case compile.ISMAP:
		_, ok := v.(*Map)
		stack[top] = Bool(ok)
	case compile.NOMATCH:
		return fmt.Errorf("match: no clause matches %s", describe(v))
	default:
		return fmt.Errorf("internal error: bad opcode %s", op)
	}
	return nil
}

func indexValue(v Value, i int) (Value, error) {
	switch c := v.(type) {
	case *Vector:
		if i < c.Len() {
			return c.Index(i), nil
		}
	case *List:
		if i < c.Len() {
			return c.Index(i), nil
		}
	case *Lazy:
		elems, _, err := realize(nil, c, i+1)
		if err != nil {
			return nil, destructLazyErr(err)
		}
		if i < len(elems) {
			return elems[i], nil
		}
	case NilType:
	default:
		return nil, fmt.Errorf("cannot destructure %s as a sequence", describe(v))
	}
	return Nil, nil
}

// destructLazyErr is the error of destructuring a lazy sequence whose
// elements need RTFS code to compute: the VM's destructuring instructions
// cannot hand their work to the prelude as builtins do.
func destructLazyErr(err error) error {
	var nr *needRealize
	if errors.As(err, &nr) {
		return fmt.Errorf("cannot destructure a lazy sequence whose elements are not computed yet: compute the part you need first, e.g. (take n s)")
	}
	return err
}

// restFrom is the rest of a sequential destructuring, [a b & r]: the
// elements from index i on, or nil when there are none (as Clojure's nthnext,
// so that (if r ...) tests for more).
func restFrom(v Value, i int) (Value, error) {
	switch c := v.(type) {
	case *Vector:
		if i >= c.Len() {
			return Nil, nil
		}
		return listView(c, i), nil
	case *List:
		l := c
		for ; i > 0 && l.Len() > 0; i-- {
			l = l.Rest()
		}
		if l.Len() == 0 {
			return Nil, nil
		}
		return l, nil
	case NilType:
		return Nil, nil
	case *Lazy:
		elems, rest, err := realize(nil, c, i+1)
		if err != nil {
			return nil, destructLazyErr(err)
		}
		if len(elems) <= i {
			return Nil, nil
		}
		return lazyRun(elems[i:], rest), nil
	}
	return nil, fmt.Errorf("cannot destructure %s as a sequence", describe(v))
}

// seqToMap is Clojure 1.11's seq-to-map-for-destructuring, what a map
// pattern makes of the value it destructures: a list or lazy sequence
// (keyword arguments) of two or more elements becomes a map of its
// key/value pairs, later keys winning and a trailing map merged in; a
// sequence of one element is that element; an empty one is the empty map.
// Anything else (a map, a vector, nil) is destructured as it is.
func (th *Thread) seqToMap(v Value) (Value, error) {
	var elems []Value
	switch c := v.(type) {
	case *List:
		if c.Len() == 0 {
			return emptyMap, nil
		}
		var err error
		if elems, err = seqSlice(th, c); err != nil {
			return nil, err
		}
	case *Lazy:
		var err error
		if elems, _, err = realize(th, c, -1); err != nil {
			return nil, destructLazyErr(err)
		}
	default:
		return v, nil
	}
	switch len(elems) {
	case 0:
		return emptyMap, nil
	case 1:
		return elems[0], nil
	}
	var trailing Value
	if n := len(elems); n%2 != 0 {
		trailing, elems = elems[n-1], elems[:n-1]
	}
	m := MapOf(elems...)
	switch t := trailing.(type) {
	case nil, NilType:
	case *Map:
		if err := th.chargeElems(t.Len()); err != nil {
			return nil, err
		}
		t.Range(func(k, v Value) bool { m = m.Assoc(k, v); return true })
	default:
		return nil, withKind(compile.KindArgument, fmt.Errorf("cannot destructure %s as keyword arguments: it has an odd number of elements and its last, %s, is not a map", describe(v), describe(t)))
	}
	return m, nil
}

// lookupOp is a map pattern's lookup: get's, so that a key a value does
// not hold, or a value that holds no keys (a vector, a number), gives nil
// as in Clojure. Match's HASKEY is false for anything but a map.
func (th *Thread) lookupOp(op compile.Opcode, key Value, stack []Value, sp *int) error {
	top := *sp - 1
	m := meter{th: th}
	var v Value = Nil
	found := false
	if _, isMap := stack[top].(*Map); isMap || op != compile.HASKEY {
		if x, ok := lookup(stack[top], key, &m); ok {
			v, found = x, true
		}
	}
	switch op {
	case compile.LOOKUP:
		stack[top] = v
	case compile.HASKEY:
		stack[top] = Bool(found)
	case compile.LOOKUPD:
		stack[top] = v
		stack[top+1] = Bool(found)
		*sp++
	}
	return m.done()
}

// lookupOpSeq is the lookup of the code of versions before
// rtfs-compile-4, which read a list as key/value pairs here.
func lookupOpSeq(op compile.Opcode, key Value, stack []Value, sp *int) error {
	top := *sp - 1
	var v Value = Nil
	found := false
	if l, ok := stack[top].(*List); ok {
		// A sequence destructured as a map is read as key/value pairs,
		// as Clojure does for keyword arguments: (let [[& {:keys [k]}] [:k 1]] k);
		// as in Clojure 1.11, a trailing map is merged in, and a lone
		// element is the map itself ((f {:k 1}) for (defn f [& {:keys [k]}])).
		elems, _ := seqSlice(nil, l)
		var trailing *Map
		if n := len(elems); n%2 != 0 {
			m, isMap := elems[n-1].(*Map)
			if n == 1 && (isMap || elems[0] == Nil) {
				stack[top] = elems[0]
				elems = nil
			} else if !isMap {
				return fmt.Errorf("cannot destructure %s as a map: it has an odd number of elements", describe(l))
			} else {
				trailing, elems = m, elems[:n-1]
			}
		}
		if elems != nil || trailing != nil {
			m := MapOf(elems...)
			if trailing != nil {
				trailing.Range(func(k, v Value) bool { m = m.Assoc(k, v); return true })
			}
			stack[top] = m
		}
	}
	switch m := stack[top].(type) {
	case *Map:
		if x, ok := m.Get(key); ok {
			v, found = x, true
		}
	case NilType:
	default:
		if op == compile.HASKEY {
			stack[top] = False
			return nil
		}
		return fmt.Errorf("cannot destructure %s as a map", describe(stack[top]))
	}
	switch op {
	case compile.LOOKUP:
		stack[top] = v
	case compile.HASKEY:
		stack[top] = Bool(found)
	case compile.LOOKUPD:
		stack[top] = v
		stack[top+1] = Bool(found)
		*sp++
	}
	return nil
}
