package rtfs

import (
	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// A frame is one active call of a compiled function. Its parameters and
// locals are th.stack[base : base+NumLocals]; its operand stack follows.
type frame struct {
	fn   *funcInfo
	cl   *Closure // the closure being run (a top level runs as a closure too)
	pc   int      // next instruction (for callers: the return address)
	base int
}

// A handler is an active try: on an error, the VM drops the frames above
// frame, resets the stack to sp, pushes the error and jumps to pc.
type handler struct {
	frame int
	pc    int
	sp    int
}

// checkInterval is the number of instructions between cancellation checks.
const checkInterval = 1024

// run executes from the innermost frame until the entry frame returns, the
// VM suspends at a host call (th.call is set), or an error escapes. pending,
// when non-nil, is raised at the current instruction first (ResumeError).
//
// The loop keeps the running frame's state (fr, code, pc, base, stack, sp,
// steps) in registers, and no value of it lives across a function call: an
// instruction that calls one writes the state back to the thread first
// (sync) and reads it again after (reload), and an error goes to raise
// with the state written. A value live across a call would be saved to
// memory at every instruction, since the compiler saves a loop's values
// where they are defined.
func (th *Thread) run(pending error) (Value, error) {
	if pending != nil {
		if h, ee := th.handle(pending); !h {
			return nil, ee
		}
	}
	var err error
	var ins uint32
	var arg int
	fr := &th.frames[len(th.frames)-1]
	code := fr.fn.code.Code
	pc, base, sp := fr.pc, fr.base, th.sp
	stack := th.stack
	steps := th.steps
	for {
		if steps >= th.nextCheck {
			fr.pc, th.sp, th.steps = pc, sp, steps
			if err = th.checkpoint(); err != nil {
				goto raise
			}
			goto reload
		}
		steps++
		ins = code[pc]
		pc++
		arg = int(ins >> 8)
		switch compile.Opcode(ins & 0xff) {
		case compile.NOP:
		case compile.CONST:
			stack[sp] = fr.fn.consts[arg]
			sp++
		case compile.BUILTIN:
			stack[sp] = fr.fn.builtins[arg]
			sp++
		case compile.NIL:
			stack[sp] = Nil
			sp++
		case compile.TRUE:
			stack[sp] = True
			sp++
		case compile.FALSE:
			stack[sp] = False
			sp++
		case compile.LOCAL:
			stack[sp] = stack[base+arg]
			sp++
		case compile.SETLOCAL:
			sp--
			stack[base+arg] = stack[sp]
		case compile.FREE:
			stack[sp] = fr.cl.free[arg]
			sp++
		case compile.SELF:
			stack[sp] = fr.cl
			sp++
		case compile.GLOBAL:
			v := th.globals[arg]
			if v == nil {
				fr.pc, th.sp, th.steps = pc, sp, steps
				err = errorf("%s is not defined yet", th.prog.globals[arg])
				goto raise
			}
			stack[sp] = v
			sp++
		case compile.SETGLOBAL:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.setGlobal(arg, stack[sp-1])
			goto reload
		case compile.POP:
			sp--
		case compile.JMP:
			pc = arg
		case compile.JMPF:
			sp--
			if falsy(stack[sp]) {
				pc = arg
			}
		case compile.JMPT:
			sp--
			if !falsy(stack[sp]) {
				pc = arg
			}
		case compile.JMPFK:
			if falsy(stack[sp-1]) {
				pc = arg
			} else {
				sp--
			}
		case compile.JMPTK:
			if !falsy(stack[sp-1]) {
				pc = arg
			} else {
				sp--
			}
		case compile.CALL:
			fr.pc, th.sp, th.steps = pc, sp, steps
			if b, ok := stack[sp-arg-1].(*Builtin); ok {
				v, e := b.call(th, stack[sp-arg:sp])
				th.sp -= arg
				th.stack[th.sp-1] = v
				if e != nil {
					err = e
					goto raise
				}
				goto reload
			}
			if _, isNil := stack[sp-arg-1].(NilType); isNil {
				if name, ok := fr.fn.code.CalleeNames[pc-1]; ok {
					// Name what held nil: (handler x) with handler nil.
					err = withKind(compile.KindNil, errorf("cannot call nil (%s): not a function", name))
					goto raise
				}
			}
			if err = th.callValue(arg); err != nil {
				goto raise
			}
			goto reload
		case compile.CALLSPREAD:
			fr.pc, th.sp, th.steps = pc, sp, steps
			if err = th.callSpread(); err != nil {
				goto raise
			}
			goto reload
		case compile.RETURN:
			v := stack[sp-1]
			fr.cl = nil // the frames past the top keep no closure (nor what it captured)
			th.frames = th.frames[:len(th.frames)-1]
			if len(th.frames) == 0 {
				th.sp, th.steps = 0, steps
				return v, nil
			}
			sp = base - 1
			stack[sp] = v
			sp++
			fr = &th.frames[len(th.frames)-1]
			pc, base = fr.pc, fr.base
			code = fr.fn.code.Code
		case compile.CLOSURE:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp = th.makeClosure(arg, sp)
			goto reload
		case compile.MKVEC, compile.MKSET:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp, err = th.makeCollection(compile.Opcode(ins&0xff), arg, sp, false)
			if err != nil {
				goto raise
			}
			goto reload
		case compile.MKMAP:
			// A map literal the entry frame returns at once goes to the
			// host, which may have it built in the thread's result box.
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp, err = th.makeCollection(compile.MKMAP, arg, sp, th.reuse && len(th.frames) == 1 && returnsNext(code, pc))
			if err != nil {
				goto raise
			}
			goto reload
		case compile.HOSTCALL, compile.HOSTSPREAD:
			fr.pc, th.sp, th.steps = pc, sp, steps
			if err = th.suspend(compile.Opcode(ins&0xff) == compile.HOSTSPREAD, arg); err != nil {
				goto raise
			}
			return nil, nil
		case compile.THROW:
			fr.pc, th.sp, th.steps = pc, sp, steps
			err = &thrownError{value: stack[sp-1]}
			goto raise
		case compile.PUSHTRY:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.handlers = append(th.handlers, handler{frame: len(th.frames) - 1, pc: arg, sp: sp})
			goto reload
		case compile.POPTRY:
			th.handlers = th.handlers[:len(th.handlers)-1]
		case compile.RERAISE, compile.ERRVAL, compile.CATCHES:
			fr.pc, th.sp, th.steps = pc, sp, steps
			nsp := sp // through a copy: a local whose address is taken lives in memory
			err = caughtOp(compile.Opcode(ins&0xff), fr.fn.consts, arg, stack, &nsp)
			th.sp = nsp
			if err != nil {
				goto raise
			}
			goto reload
		case compile.EQ:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp, err = th.eqOp(stack, sp)
			if err != nil {
				goto raise
			}
			goto reload
		case compile.NOT:
			stack[sp-1] = Bool(falsy(stack[sp-1]))
		case compile.ADD, compile.SUB, compile.LT, compile.GT, compile.LE, compile.GE:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp, err = th.arith(compile.Opcode(ins&0xff), fr.fn.builtins[arg].(*Builtin), stack, sp)
			if err != nil {
				goto raise
			}
			goto reload
		case compile.GET:
			fr.pc, th.sp, th.steps = pc, sp, steps
			if m, ok := stack[sp-2].(*Map); ok {
				if k, ok := stack[sp-1].(Keyword); ok {
					v, found := m.GetKeyword(string(k))
					if !found {
						v = Nil
					}
					th.sp--
					th.stack[th.sp-1] = v
					goto reload
				}
			}
			th.sp, err = th.callBuiltinOp(fr.fn.builtins[arg].(*Builtin), 2, stack, sp)
			if err != nil {
				goto raise
			}
			goto reload
		case compile.GETDEF:
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp, err = th.callBuiltinOp(fr.fn.builtins[arg].(*Builtin), 3, stack, sp)
			if err != nil {
				goto raise
			}
			goto reload
		case compile.COUNT:
			if n, ok := fastCount(stack[sp-1]); ok && n < len(smallInts) {
				stack[sp-1] = smallInts[n] // boxed already: Int(n) is a call
				break
			}
			fr.pc, th.sp, th.steps = pc, sp, steps
			th.sp, err = th.callBuiltinOp(fr.fn.builtins[arg].(*Builtin), 1, stack, sp)
			if err != nil {
				goto raise
			}
			goto reload
		default:
			fr.pc, th.sp, th.steps = pc, sp, steps
			nsp := sp // a copy, as for caughtOp
			err = th.destructOp(compile.Opcode(ins&0xff), arg, fr.fn, stack, &nsp)
			th.sp = nsp
			if err != nil {
				goto raise
			}
			goto reload
		}
		continue
	raise: // the state is written back
		if h, ee := th.handle(err); !h {
			return nil, ee
		}
		err = nil
	reload:
		fr = &th.frames[len(th.frames)-1]
		pc, base, steps = fr.pc, fr.base, th.steps
		code, stack, sp = fr.fn.code.Code, th.stack, th.sp
	}
}

// falsy reports whether v is nil or false, by its type: v == Nil compares
// through runtime.ifaceeq, a call the run loop would save its state for.
func falsy(v Value) bool {
	switch x := v.(type) {
	case NilType:
		return x == Nil
	case Bool:
		return !bool(x)
	}
	return false
}

// smallInts are the Ints 0 to 255 boxed as Values, for counts.
var smallInts = func() (a [256]Value) {
	for i := range a {
		a[i] = Int(i)
	}
	return a
}()

func fastCount(v Value) (int, bool) {
	switch c := v.(type) {
	case *Vector:
		return c.Len(), true
	case *Map:
		return c.Len(), true
	case *List:
		return c.Len(), true
	case NilType:
		return 0, true
	}
	return 0, false
}

// eqOp replaces the two values on top of the stack by whether they are
// equal, charging the comparison. When they differ and one is a lazy
// sequence, it calls the = builtin instead, which computes the sequence's
// thunks first (lazy.go). (The instruction's argument names no builtin:
// match emits it too.)
func (th *Thread) eqOp(stack []Value, sp int) (int, error) {
	a, b := stack[sp-2], stack[sp-1]
	r, err := th.equal(a, b)
	if !r && err == nil && (isLazy(a) || isLazy(b)) {
		return th.callBuiltinOp(lookupBuiltin("="), 2, stack, sp)
	}
	stack[sp-2] = Bool(r)
	return sp - 1, err
}

// callBuiltinOp calls b with the top n stack values, replacing them by the result.
func (th *Thread) callBuiltinOp(b *Builtin, n int, stack []Value, sp int) (int, error) {
	v, err := b.call(th, stack[sp-n:sp])
	sp -= n - 1
	stack[sp-1] = v
	return sp, err
}

// checkpoint enforces the step limit and notices cancellation.
func (th *Thread) checkpoint() error {
	if th.steps+th.work >= th.limits.MaxSteps {
		th.nextCheck = th.limits.MaxSteps + 1 // report once; the run ends
		return &LimitError{Limit: LimitSteps, Max: th.limits.MaxSteps}
	}
	if th.done != nil {
		select {
		case <-th.done:
			return &fatalError{th.ctx.Err()}
		default:
		}
	}
	if err := th.checkTime(); err != nil {
		th.nextCheck = th.limits.MaxSteps + 1 // report once; the run ends
		return err
	}
	th.nextCheck = min(th.steps+checkInterval, th.limits.MaxSteps-th.work)
	return nil
}

func (th *Thread) setGlobal(i int, v Value) {
	if th.gsnap != nil {
		th.globals = append([]Value(nil), th.globals...)
		th.gsnap = nil
	}
	th.globals[i] = v
}

// makeClosure pops the captured values and pushes the closure of function id.
func (th *Thread) makeClosure(id int, sp int) int {
	fi := th.prog.funcs[id]
	n := fi.code.NumFree
	if n == 0 {
		th.stack[sp] = fi.static
		return sp + 1
	}
	cl := &Closure{fn: fi}
	if n > 0 {
		cl.free = make([]Value, n)
		copy(cl.free, th.stack[sp-n:sp])
	}
	sp -= n
	th.stack[sp] = cl
	return sp + 1
}

// returnsNext reports whether the instruction at pc, after any jumps,
// returns from the frame: the value on top of the stack is the frame's
// result and nothing else will refer to it.
func returnsNext(code []uint32, pc int) bool {
	for range 4 { // a jump out of each enclosing branch, and no loops
		op, arg := compile.Decode(code[pc])
		if op != compile.JMP {
			return op == compile.RETURN
		}
		pc = arg
	}
	return false
}

// makeCollection pops the n elements (n entries for a map) of a literal
// and pushes the collection. result says that the literal is a map the
// host gets as the run's result and that the thread may build in its
// result box (ReuseResults).
func (th *Thread) makeCollection(op compile.Opcode, n int, sp int, result bool) (int, error) {
	elems := n
	if op == compile.MKMAP {
		elems = 2 * n
	}
	// A literal's elements were pushed by its own instructions, which the
	// step budget counted: it charges only its memory, inline, since every
	// processor result is a map literal.
	if th.mem += int64(elems) * elemBytes; th.mem > th.limits.MaxMemory {
		return sp, &LimitError{Limit: LimitMemory, Max: th.limits.MaxMemory}
	}
	if err := th.checkSize(elems); err != nil {
		return sp, err
	}
	var v Value
	m := meter{th: th} // the hashing and comparing of computed keys
	switch op {
	case compile.MKVEC:
		v = vectorOwned(append([]Value(nil), th.stack[sp-n:sp]...))
		sp -= n
	case compile.MKMAP:
		kvs := th.stack[sp-2*n : sp]
		var mp *Map
		if result {
			mp = th.res.build(kvs, &m)
		}
		if mp == nil {
			mp = mapOf(kvs, &m)
		}
		v = mp
		sp -= 2 * n
	case compile.MKSET:
		v = setOf(th.stack[sp-n:sp], &m)
		sp -= n
	}
	th.stack[sp] = v
	return sp + 1, m.done()
}

// arith runs + - < > <= >= on two operands: ints and floats inline, anything
// else through the builtin (which reports type errors and overflow).
func (th *Thread) arith(op compile.Opcode, b *Builtin, stack []Value, sp int) (int, error) {
	x, xok := stack[sp-2].(Int)
	y, yok := stack[sp-1].(Int)
	if xok && yok {
		var v Value
		switch op {
		case compile.ADD:
			s := x + y
			if (s > x) != (y > 0) {
				return th.callBuiltinOp(b, 2, stack, sp)
			}
			v = s
		case compile.SUB:
			d := x - y
			if (d < x) != (y > 0) {
				return th.callBuiltinOp(b, 2, stack, sp)
			}
			v = d
		case compile.LT:
			v = Bool(x < y)
		case compile.GT:
			v = Bool(x > y)
		case compile.LE:
			v = Bool(x <= y)
		case compile.GE:
			v = Bool(x >= y)
		}
		stack[sp-2] = v
		return sp - 1, nil
	}
	return th.callBuiltinOp(b, 2, stack, sp)
}
