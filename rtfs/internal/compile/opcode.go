package compile

import "fmt"

// An Opcode is a VM instruction. Each instruction is one uint32: the opcode in
// the low 8 bits and an unsigned argument in the high 24 bits.
type Opcode uint8

// The opcodes. Stack effects are given as (before -- after).
const (
	NOP        Opcode = iota
	CONST             // arg=k: ( -- consts[k])
	BUILTIN           // arg=k: ( -- builtins[k])
	NIL               // ( -- nil)
	TRUE              // ( -- true)
	FALSE             // ( -- false)
	LOCAL             // arg=i: ( -- locals[i])
	SETLOCAL          // arg=i: (v -- ); locals[i] = v
	FREE              // arg=i: ( -- free[i])
	SELF              // ( -- the running closure)
	GLOBAL            // arg=i: ( -- globals[i]); an undefined global is an error
	SETGLOBAL         // arg=i: (v -- v); globals[i] = v
	POP               // (v -- )
	JMP               // arg=pc
	JMPF              // arg=pc: (v -- ); jump if v is falsy
	JMPT              // arg=pc: (v -- ); jump if v is truthy
	JMPFK             // arg=pc: (v -- v) and jump if v is falsy, else (v -- )
	JMPTK             // arg=pc: (v -- v) and jump if v is truthy, else (v -- )
	CALL              // arg=n: (f a1..an -- result)
	CALLSPREAD        // (f seq -- result): calls f with the elements of seq
	RETURN            // (v -- ) returns v to the caller
	CLOSURE           // arg=fnid: (free1..freek -- closure)
	MKVEC             // arg=n: (v1..vn -- vector)
	MKMAP             // arg=n: (k1 v1..kn vn -- map)
	MKSET             // arg=n: (v1..vn -- set)
	HOSTCALL          // arg=n: (cap a1..an -- result) suspends the VM
	HOSTSPREAD        // (cap seq -- result) suspends with the elements of seq as args
	THROW             // (v -- ) raises v
	PUSHTRY           // arg=pc: installs a handler that jumps to pc with the error on the stack
	POPTRY            // removes the innermost handler of this frame
	RERAISE           // (err -- ) raises the caught error again
	ERRVAL            // (err -- v): the value a catch binds for a caught error
	CATCHES           // arg=k: (err -- bool): does the catch pattern consts[k] match err?
	EQ                // (a b -- bool) structural equality
	INDEX             // arg=i: (coll -- coll[i] or nil)
	RESTFROM          // arg=i: (coll -- list of the elements from i)
	LOOKUP            // arg=k: (map -- map[consts[k]] or nil)
	LOOKUPD           // arg=k: (map -- value found?)
	HASKEY            // arg=k: (map -- bool)
	ISSEQ             // arg=n<<1|rest: (v -- bool) v is a list or vector of n (or >= n) elements
	ISMAP             // (v -- bool) v is a map
	NOMATCH           // (v -- ) raises "match: no clause matches"
	ADD               // (a b -- a+b), fast path of the builtin +
	SUB               // (a b -- a-b)
	LT                // (a b -- a<b)
	GT                // (a b -- a>b)
	LE                // (a b -- a<=b)
	GE                // (a b -- a>=b)
	GET               // (m k -- (get m k))
	GETDEF            // (m k d -- (get m k d))
	COUNT             // (coll -- (count coll))
	NOT               // (v -- (not v))
	MAPARG            // (v -- m): a sequence about to be destructured as a map becomes one (keyword arguments)
	numOpcodes
)

var opNames = [...]string{
	NOP: "nop", CONST: "const", BUILTIN: "builtin", NIL: "nil", TRUE: "true", FALSE: "false",
	LOCAL: "local", SETLOCAL: "setlocal", FREE: "free", SELF: "self", GLOBAL: "global",
	SETGLOBAL: "setglobal", POP: "pop", JMP: "jmp", JMPF: "jmpf", JMPT: "jmpt",
	JMPFK: "jmpfk", JMPTK: "jmptk", CALL: "call", CALLSPREAD: "callspread", RETURN: "return",
	CLOSURE: "closure", MKVEC: "mkvec", MKMAP: "mkmap", MKSET: "mkset", HOSTCALL: "hostcall",
	HOSTSPREAD: "hostspread", THROW: "throw", PUSHTRY: "pushtry", POPTRY: "poptry",
	RERAISE: "reraise", ERRVAL: "errval", CATCHES: "catches", EQ: "eq", INDEX: "index",
	RESTFROM: "restfrom", LOOKUP: "lookup", LOOKUPD: "lookupd", HASKEY: "haskey",
	ISSEQ: "isseq", ISMAP: "ismap", NOMATCH: "nomatch", ADD: "add", SUB: "sub", LT: "lt",
	GT: "gt", LE: "le", GE: "ge", GET: "get", GETDEF: "getdef", COUNT: "count", NOT: "not",
	MAPARG: "maparg",
}

// String returns the opcode's mnemonic.
func (op Opcode) String() string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return fmt.Sprintf("op%d", uint8(op))
}

// MaxArg is the largest instruction argument.
const MaxArg = 1<<24 - 1

// Encode packs an instruction.
func Encode(op Opcode, arg int) uint32 { return uint32(op) | uint32(arg)<<8 }

// Decode unpacks an instruction.
func Decode(ins uint32) (Opcode, int) { return Opcode(ins & 0xff), int(ins >> 8) }

// stackEffect returns the net stack change of an instruction.
func stackEffect(op Opcode, arg int) int {
	switch op {
	case CONST, BUILTIN, NIL, TRUE, FALSE, LOCAL, FREE, SELF, GLOBAL:
		return 1
	case SETLOCAL, POP, JMPF, JMPT, RETURN, THROW, RERAISE, NOMATCH, CALLSPREAD, HOSTSPREAD,
		EQ, ADD, SUB, LT, GT, LE, GE, GET:
		return -1
	case GETDEF:
		return -2
	case CALL, HOSTCALL:
		return -arg
	case MKVEC, MKSET:
		return 1 - arg
	case MKMAP:
		return 1 - 2*arg
	case LOOKUPD:
		return 1
	}
	return 0
}
