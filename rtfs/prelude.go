package rtfs

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

//go:embed prelude.rtfs
var preludeSrc []byte

// The preludes of earlier compiler versions, kept so that a continuation
// parked under one of them still resumes (legacy.go). Each is frozen: it is
// the exact source that version hashed.
//
//go:embed prelude_compile2.rtfs
var preludeCompile2Src []byte

//go:embed prelude_compile3.rtfs
var preludeCompile3Src []byte

// prelude is the compiled prelude shared by every Program: the higher-order
// core functions written in RTFS (map, filter, reduce, update, sort-by...).
// It is built once per process, on first use, and never modified; its
// functions keep the same ids in every program, which continuations rely on.
type prelude struct {
	version string // the compiler version whose prelude this is
	src     []byte
	code    *compile.Program
	funcs   []*funcInfo
	globals []Value
}

// A preludeVersion is the prelude of one compiler version, built on first
// use and never modified.
type preludeVersion struct {
	version string
	src     []byte
	once    sync.Once
	value   *prelude
	err     error
}

// load builds the prelude once per process.
func (pv *preludeVersion) load() (*prelude, error) {
	pv.once.Do(func() { pv.value, pv.err = buildPrelude(pv.version, pv.src) })
	return pv.value, pv.err
}

var (
	currentPrelude  = &preludeVersion{version: compile.Version, src: preludeSrc}
	compile2Prelude = &preludeVersion{version: "rtfs-compile-2", src: preludeCompile2Src}
	compile3Prelude = &preludeVersion{version: "rtfs-compile-3", src: preludeCompile3Src}
)

// loadPrelude returns the prelude of the current compiler version.
func loadPrelude() (*prelude, error) { return currentPrelude.load() }

func buildPrelude(version string, src []byte) (*prelude, error) {
	nodes, err := syntax.Parse("<prelude>", src)
	if err != nil {
		return nil, fmt.Errorf("rtfs: prelude: %w", err)
	}
	isBuiltin := func(name string) bool { return builtinNamed(name) != nil }
	cp, err := compile.CompileVersion(version, nil, []compile.Unit{{Nodes: nodes, Internal: true}}, isBuiltin)
	if err != nil {
		return nil, fmt.Errorf("rtfs: prelude: %w", err)
	}
	p := &prelude{version: version, src: src, code: cp, funcs: make([]*funcInfo, len(cp.Funcs)), globals: make([]Value, len(cp.Globals))}
	for i, f := range cp.Funcs {
		fi, err := newFuncInfo(f, nil, builtinNamed)
		if err != nil {
			return nil, fmt.Errorf("rtfs: prelude: %w", err)
		}
		p.funcs[i] = fi
	}
	linkArities(p.funcs, p.funcs)
	// The prelude's top level is a sequence of (defn name ...) forms: each is
	// a CLOSURE of a function without free variables followed by SETGLOBAL.
	code := cp.Funcs[cp.Toplevel].Code
	for pc := 0; pc+1 < len(code); pc++ {
		op, arg := compile.Decode(code[pc])
		op2, slot := compile.Decode(code[pc+1])
		if op == compile.CLOSURE && op2 == compile.SETGLOBAL {
			p.globals[slot] = p.funcs[arg].static
		}
	}
	for i, v := range p.globals {
		if v == nil {
			return nil, fmt.Errorf("rtfs: prelude: global %s is not a plain defn", cp.Globals[i])
		}
	}
	return p, nil
}

// builtinNamed resolves a builtin name: the VM's intrinsics (names starting
// with %), then the core library.
func builtinNamed(name string) *Builtin {
	if len(name) > 0 && name[0] == '%' {
		return intrinsics[name]
	}
	return lookupBuiltin(name)
}
