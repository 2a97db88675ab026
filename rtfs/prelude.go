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

// prelude is the compiled prelude shared by every Program: the higher-order
// core functions written in RTFS (map, filter, reduce, update, sort-by...).
// It is built once per process, on first use, and never modified; its
// functions keep the same ids in every program, which continuations rely on.
type prelude struct {
	code    *compile.Program
	funcs   []*funcInfo
	globals []Value
}

var (
	preludeOnce  sync.Once
	preludeValue *prelude
	preludeErr   error
)

func loadPrelude() (*prelude, error) {
	preludeOnce.Do(func() { preludeValue, preludeErr = buildPrelude() })
	return preludeValue, preludeErr
}

func buildPrelude() (*prelude, error) {
	nodes, err := syntax.Parse("<prelude>", preludeSrc)
	if err != nil {
		return nil, fmt.Errorf("rtfs: prelude: %w", err)
	}
	isBuiltin := func(name string) bool { return builtinNamed(name) != nil }
	cp, err := compile.Compile(nil, []compile.Unit{{Nodes: nodes, Internal: true}}, isBuiltin)
	if err != nil {
		return nil, fmt.Errorf("rtfs: prelude: %w", err)
	}
	p := &prelude{code: cp, funcs: make([]*funcInfo, len(cp.Funcs)), globals: make([]Value, len(cp.Globals))}
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
