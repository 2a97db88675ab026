// Package rtfs is the RTFS language runtime: values, the compiler's output
// (Program), the bytecode VM (Thread) and serializable continuations.
//
// Compile turns source into an immutable *Program. A *Thread runs it: Run
// executes the top level, Call calls a function value (a *Closure, a
// *Builtin, a keyword...) with a program's *Globals, and both return an
// Outcome. When RTFS code makes a host call, (call :capability args...), the
// VM does not call Go: the Outcome carries the *HostCall and a
// *Continuation, which the host resumes with Resume or ResumeError after
// performing the call, at once or after storing the continuation's bytes
// (MarshalBinary, UnmarshalContinuation). Runtime errors are *EvalError,
// limit overruns *LimitError. See docs/continuations.md for the execution
// model and docs/rtfs-values.md for the values.
//
// # Files, in the order data travels
//
// Source is read and compiled by the subpackages and program.go:
//
//	syntax/            the reader: source text to syntax.Node, with positions
//	types/             type expressions (:[:map {...}]) and Check
//	internal/compile/  syntax.Node to bytecode (compile.Program, Funcode),
//	                   macros and special forms, the opcodes
//	program.go         Compile, Program (immutable, identified by Hash),
//	                   Globals; the program hash
//	prelude.go         the prelude: the core functions written in RTFS
//	prelude.rtfs       (map, filter, reduce...), compiled once and placed
//	                   first in every program; prelude_intrinsics.go has the
//	                   Go helpers only it calls
//	legacy.go          the preludes of earlier compiler versions, kept so that
//	prelude_compile2.rtfs  their continuations still resume
//	prelude_compile3.rtfs
//	closure.go         Closure: a compiled function and its captured values
//
// A Thread runs a Program:
//
//	thread.go          Thread (one run at a time, owned by its caller) and
//	                   Limits
//	run.go             the public entry points: Run, Call, Resume,
//	                   ResumeError, and their Outcome and HostCall
//	vm.go              the VM's instruction loop: frames, try handlers
//	vm_call.go         the VM's calls: frames pushed, arity, calls of data
//	                   (keywords, maps), suspending at a host call
//	vm_destruct.go     destructuring and pattern-matching instructions
//	vm_error.go        throw, catch and rethrow inside the VM
//	errors.go          EvalError (position and RTFS stack), LimitError
//	errkind.go         the :kind of a runtime error, for catch
//	redirect.go        how a builtin hands work to a prelude function
//	                   (callbacks, lazy thunks) without a Go frame
//
// Values (docs/rtfs-values.md):
//
//	value.go           Value, Kind and the scalars: Nil, Bool, Int, Float,
//	                   String, Keyword, Symbol
//	list.go            List
//	vector.go          Vector
//	map.go             Map: an array map, a hash trie past a few keys
//	hamt.go            the hash trie; hamt_build.go builds one at once
//	set.go             Set, a Map of its elements
//	sorted.go          the order of sorted maps and sets, and their builtins
//	lazy.go            Lazy: the lazy sequences (range, iterate, lazy-seq...)
//	alloc.go box.go    allocation tricks: a value and its slice in one
//	                   allocation, floats boxed without one each
//	equal.go hash.go   Equal, Compare, Hash
//	print.go           printed forms, Excerpt, CheckOutputSize
//
// The core library, Go builtins that never call back into RTFS:
//
//	builtin.go         Builtin, NewBuiltin and the table of the core library
//	lib_args.go        argument checks and their errors
//	lib_num.go         arithmetic; lib_bit.go the bit operations
//	lib_cmp.go         comparison and logic; lib_pred.go predicates
//	lib_str.go         strings; lib_regex.go Regex and the re- functions
//	lib_seq.go         sequence access (first, rest, nth, take, butlast...)
//	lib_coll.go        collections built (vector, conj, concat, sort...)
//	lib_map.go         associative functions (get, assoc, merge, key, val)
//	lib_set.go         clojure.set
//	lib_conv.go        conversions (keyword, int, parse-*, to-json)
//	lib_reduced.go     reduced, for reduce and transducers
//	lib_clj.go         the rest of clojure.core: ex-info, math, format...
//	universe.go        Universe and LookupDoc: every function, documented;
//	universe_docs.go   its text
//	forms_docs.go      Forms and LookupForm: the special forms and macros
//
// Codecs, for values that leave the process:
//
//	continuation.go            Continuation: a run parked at a host call
//	continuation_codec.go      its binary form (and Globals'), written;
//	continuation_decode.go     and read back (docs/continuations.md)
//	program_codec.go           one value of a program, closures included
//	value_codec.go             the binary value codec (MarshalValue)
//	json.go json_intern.go     FromJSON and JSONDecoder (interned keys)
//	json_encode.go             ToJSON, OutputJSON, AppendJSON
//
// Budgets: charge.go is how builtins pay for their work (steps, memory,
// text) within the Thread's Limits, through th.build, th.charge and the
// meter; every builtin charges there and nowhere else (docs/security.md,
// "Budgets").
package rtfs
