package rtfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/rtfshost/rtfshost/rtfs/suggest"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Program is a compiled RTFS source file: its functions (the file's own and
// the prelude's, which implements the higher-order core functions in RTFS),
// their constants and the names of its global variables. A Program is
// immutable and safe to share between goroutines; it is identified by Hash.
type Program struct {
	name     string
	src      []byte
	hash     string
	hashRaw  [32]byte
	funcs    []*funcInfo // by function id
	globals  []string    // global slot names
	index    map[string]int
	init     []Value // initial global values (the prelude's functions); nil means undefined
	toplevel *funcInfo
	extra    map[string]*Builtin // host-internal builtins (tests); nil normally
	cfg      *compileConfig      // what it was compiled with besides src, to compile it again
	version  string              // the compiler version whose prelude it uses

	// legacy holds the program compiled again under earlier compiler
	// versions, by version, built when a continuation of one is decoded
	// (legacy.go).
	legacyMu sync.Mutex
	legacy   map[string]*Program
	keywords map[string]Value // the keyword constants, boxed once (for decoding)

	// lastGlobals is the globals section of the continuation this program
	// decoded last, decoded: the next continuation whose section has the
	// same bytes shares it (continuation_decode.go).
	lastGlobals atomic.Pointer[decodedGlobals]
	// lastKeywords are the keywords of the continuation of this program
	// decoded last, in order (decoder.keyword).
	lastKeywords atomic.Pointer[[]Value]
	// contSize is the length of the continuation of this program last
	// marshalled: the next one, usually about as long, is encoded into a
	// buffer of that size rather than a fixed one.
	contSize atomic.Int64
	// dataKeywords are keywords that continuations of the program held and
	// its code does not name (a chunk's keys), boxed once (internKeyword).
	// The map is replaced, never changed, so readers need no lock.
	kwMu         sync.Mutex
	dataKeywords atomic.Pointer[map[string]Value]
}

// maxDataKeywords bounds Program.dataKeywords: data with ever new keys
// costs a box per decode beyond it, never unbounded memory (and a copy of
// the map per new key below it).
const maxDataKeywords = 4096

func lenOf(m *map[string]Value) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// internKeyword returns the keyword named b, boxed: one of the program's
// constants, or one a continuation of it held before, so that the keys of
// the data a processor keeps are boxed once rather than at every decode.
// It is safe for concurrent use.
func (p *Program) internKeyword(b []byte) Value {
	if v, ok := p.keywords[string(b)]; ok {
		return v
	}
	if m := p.dataKeywords.Load(); m != nil {
		if v, ok := (*m)[string(b)]; ok {
			return v
		}
	}
	v := Keyword(b)
	p.kwMu.Lock()
	old := p.dataKeywords.Load()
	if old != nil {
		if x, ok := (*old)[string(b)]; ok { // another decoder boxed it meanwhile
			p.kwMu.Unlock()
			return x
		}
	}
	if old == nil || len(*old) < maxDataKeywords {
		m := make(map[string]Value, 1+lenOf(old))
		if old != nil {
			for k, x := range *old {
				m[k] = x
			}
		}
		m[string(b)] = v
		p.dataKeywords.Store(&m)
	}
	p.kwMu.Unlock()
	return v
}

// funcInfo is a compiled function with its constants turned into values.
type funcInfo struct {
	code     *compile.Funcode
	consts   []Value
	builtins []Value
	arities  []*funcInfo
	prog     *Program // the program that defined it; nil for the prelude's
	retType  types.Type
	internal bool
	static   *Closure // the shared closure of a function without free variables
}

// Compile compiles an RTFS source file. filename is used in positions. Reader,
// type annotation and compile errors are a *syntax.Error whose message reads
// "file:line:col: message", on one line. The program's globals get their values
// when a Thread runs it.
func Compile(filename string, src []byte) (*Program, error) {
	return compileUnits(filename, src, nil)
}

// compileConfig adds host-internal definitions to a compilation (the
// language-test driver's assertions).
type compileConfig struct {
	units    []compile.Unit      // compiled before the file, marked internal
	builtins map[string]*Builtin // extra Go builtins
	// rewrite, when not nil, replaces the file's forms before they compile.
	rewrite func([]syntax.Node) ([]syntax.Node, error)
}

// CompileOptions gives one compilation what only some hosts give their
// programs: functions besides the core ones, and forms of their own,
// expanded before the file compiles. The test runner (`rtfshost test`)
// compiles test files with them; an ordinary program never sees them, so
// its code, hash and continuations do not depend on them.
type CompileOptions struct {
	// Builtins are functions the program may call by their names; a
	// builtin of a core function's name hides it.
	Builtins []*Builtin
	// Rewrite, when not nil, gets the file's top-level forms as read and
	// returns the forms to compile instead. It may add forms read from
	// other files (their positions name their own files).
	Rewrite func(forms []syntax.Node) ([]syntax.Node, error)
}

// CompileWith is Compile with the additions of o. A program compiled with
// options is for the process that compiled it: a continuation of it decodes
// only against the same Program value's options.
func CompileWith(filename string, src []byte, o CompileOptions) (*Program, error) {
	cfg := &compileConfig{rewrite: o.Rewrite}
	if len(o.Builtins) > 0 {
		cfg.builtins = make(map[string]*Builtin, len(o.Builtins))
		for _, b := range o.Builtins {
			cfg.builtins[b.name] = b
		}
	}
	return compileUnits(filename, src, cfg)
}

// compileUnits compiles src after the internal units and builtins of cfg.
func compileUnits(filename string, src []byte, cfg *compileConfig) (*Program, error) {
	return compileWith(filename, src, cfg, currentPrelude)
}

// compileWith compiles src on the prelude of one compiler version (the
// current one, or an earlier one for legacy.go).
func compileWith(filename string, src []byte, cfg *compileConfig, pv *preludeVersion) (*Program, error) {
	nodes, err := syntax.Parse(filename, src)
	if err != nil {
		return nil, err
	}
	pre, err := pv.load()
	if err != nil {
		return nil, err
	}
	var units []compile.Unit
	var extra map[string]*Builtin
	if cfg != nil {
		units = append(units, cfg.units...)
		extra = cfg.builtins
		if cfg.rewrite != nil {
			if nodes, err = cfg.rewrite(nodes); err != nil {
				return nil, err
			}
		}
	}
	units = append(units, compile.Unit{Nodes: nodes})
	resolve := func(name string) *Builtin {
		if b := extra[name]; b != nil {
			return b
		}
		return builtinNamed(name)
	}
	cp, err := compile.CompileVersion(pre.version, pre.code, units, func(name string) bool { return resolve(name) != nil })
	if err != nil {
		return nil, didYouMean(err, nodes)
	}
	p, err := newProgram(filename, src, cp, pre, resolve, extra)
	if p != nil {
		p.cfg = cfg
	}
	return p, err
}

// didYouMean adds to an "undefined symbol" error the nearest name the
// program could mean: a core function or one of its own top-level
// definitions.
func didYouMean(err error, nodes []syntax.Node) error {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return err
	}
	name, ok := strings.CutPrefix(se.Msg, "undefined symbol ")
	if !ok || strings.ContainsRune(name, ' ') {
		return err
	}
	var names []string
	for _, d := range Universe() {
		names = append(names, d.Name)
	}
	for _, d := range Forms() {
		names = append(names, d.Name)
	}
	for _, n := range nodes {
		if l, ok := n.(*syntax.List); ok && len(l.Elems) > 1 {
			if h, ok := l.Elems[0].(*syntax.Symbol); ok && (h.Name == "def" || h.Name == "defn" || h.Name == "defn-") {
				if s, ok := l.Elems[1].(*syntax.Symbol); ok {
					names = append(names, s.Name)
				}
			}
		}
	}
	if why, ok := unreplayable[name]; ok {
		return &syntax.Error{Pos: se.Pos, Msg: fmt.Sprintf("%s: %s", se.Msg, why)}
	}
	if near, ok := suggest.Closest(name, names); ok {
		return &syntax.Error{Pos: se.Pos, Msg: fmt.Sprintf("%s (did you mean %s?)", se.Msg, near)}
	}
	if fn, ok := javaEquivalents[name]; ok {
		return &syntax.Error{Pos: se.Pos, Msg: fmt.Sprintf("%s: RTFS has no Java; the RTFS function for it is %s (rtfshost doc %s)", se.Msg, fn, fn)}
	}
	if looksJava(name) {
		return &syntax.Error{Pos: se.Pos, Msg: fmt.Sprintf("%s: RTFS has no Java, only the names docs/rtfs-values.md lists under \"Java names\" (rtfshost doc Math/ lists Math's)", se.Msg)}
	}
	return err
}

// looksJava reports whether name is written as Java interop: a method
// (.trim), a constructor (Exception.) or a class's static member
// (Character/isDigit).
func looksJava(name string) bool {
	if strings.HasPrefix(name, ".") || (strings.HasSuffix(name, ".") && len(name) > 1) {
		return true
	}
	ns, _, ok := strings.Cut(name, "/")
	return ok && ns != "" && ns[0] >= 'A' && ns[0] <= 'Z' || strings.HasPrefix(ns, "java.")
}

// unreplayable names what would read the clock, randomness or the
// environment: a replay must compute the values the first run did.
var unreplayable = map[string]string{
	"Math/random":               "RTFS has no randomness (a replay must compute the same values); get random numbers from the host with a call",
	"rand":                      "RTFS has no randomness (a replay must compute the same values); get random numbers from the host with a call",
	"rand-int":                  "RTFS has no randomness (a replay must compute the same values); get random numbers from the host with a call",
	"rand-nth":                  "RTFS has no randomness (a replay must compute the same values); get random numbers from the host with a call",
	"shuffle":                   "RTFS has no randomness (a replay must compute the same values); get random numbers from the host with a call",
	"random-uuid":               "RTFS has no randomness (a replay must compute the same values); get ids from the host with a call",
	"java.util.UUID/randomUUID": "RTFS has no randomness (a replay must compute the same values); get ids from the host with a call",
	"System/currentTimeMillis":  "RTFS has no clock (a replay must compute the same values); take times from the chunks or the host",
	"System/nanoTime":           "RTFS has no clock (a replay must compute the same values); take times from the chunks or the host",
	"System/getenv":             "RTFS does not read the environment (a replay must compute the same values); pass settings in the program or its start call",
	"System/getProperty":        "RTFS does not read the environment (a replay must compute the same values); pass settings in the program or its start call",
	"Thread/sleep":              "RTFS does not block; a processor returns :pause or waits with (call :await ...)",
}

// javaEquivalents are the RTFS functions for Java names people type that
// RTFS does not alias.
var javaEquivalents = map[string]string{
	".split": "str/split", ".replace": "str/replace", ".charAt": "nth", ".concat": "str",
	".toString": "str", ".matches": "re-matches", ".size": "count", ".get": "get",
	".isBlank": "str/blank?", ".strip": "str/trim", ".compareTo": "compare", ".hashCode": "hash",
	".getMessage": "ex-message", ".getData": "ex-data", ".getCause": "ex-cause",
	"String/valueOf": "str", "String/join": "str/join", "String/format": "format",
	"Integer/toString": "str", "Long/toString": "str", "Double/toString": "str",
	"Boolean/parseBoolean": "parse-boolean", "Character/isDigit": "re-matches",
	"Character/isWhitespace": "str/blank?",
}

// newProgram links compiled code into a Program: it turns constants into
// values, resolves builtins and type annotations, and sets the initial
// globals.
func newProgram(filename string, src []byte, cp *compile.Program, pre *prelude,
	resolve func(string) *Builtin, extra map[string]*Builtin) (*Program, error) {
	p := &Program{
		name:     filename,
		src:      append([]byte(nil), src...),
		hashRaw:  programHash(pre, src),
		version:  pre.version,
		globals:  cp.Globals,
		index:    make(map[string]int, len(cp.Globals)),
		extra:    extra,
		funcs:    make([]*funcInfo, len(cp.Funcs)),
		init:     make([]Value, len(cp.Globals)),
		keywords: make(map[string]Value),
	}
	p.hash = hex.EncodeToString(p.hashRaw[:])
	for i, g := range cp.Globals {
		p.index[g] = i
	}
	copy(p.funcs, pre.funcs)
	for _, f := range cp.Funcs[cp.NumBase:] {
		fi, err := newFuncInfo(f, p, resolve)
		if err != nil {
			return nil, err
		}
		p.funcs[f.ID] = fi
	}
	linkArities(p.funcs[cp.NumBase:], p.funcs)
	for _, fi := range p.funcs {
		for _, c := range fi.consts {
			if k, ok := c.(Keyword); ok {
				p.keywords[string(k)] = c
			}
		}
	}
	copy(p.init, pre.globals)
	p.toplevel = p.funcs[cp.Toplevel]
	return p, nil
}

func linkArities(fs []*funcInfo, all []*funcInfo) {
	for _, fi := range fs {
		for _, id := range fi.code.Arities {
			fi.arities = append(fi.arities, all[id])
		}
	}
}

// programHash is the identity of a program: its compiler version, the
// prelude it was compiled with and its source.
func programHash(pre *prelude, src []byte) (sum [32]byte) {
	h := sha256.New()
	h.Write([]byte(pre.version))
	h.Write([]byte{0})
	h.Write(pre.src)
	h.Write([]byte{0})
	h.Write(src)
	h.Sum(sum[:0])
	return sum
}

func newFuncInfo(f *compile.Funcode, p *Program, resolve func(string) *Builtin) (*funcInfo, error) {
	fi := &funcInfo{code: f, prog: p, internal: f.Internal}
	if f.NumFree == 0 {
		fi.static = &Closure{fn: fi}
	}
	fi.consts = make([]Value, len(f.Consts))
	for i, n := range f.Consts {
		v, err := constValue(n)
		if err != nil {
			return nil, err
		}
		fi.consts[i] = v
	}
	fi.builtins = make([]Value, len(f.Builtins))
	for i, name := range f.Builtins {
		b := resolve(name)
		if b == nil {
			return nil, fmt.Errorf("%s: undefined builtin %s", f.Pos, name)
		}
		fi.builtins[i] = b
	}
	if f.ReturnType != nil {
		t, err := parseType(f.ReturnType)
		if err != nil {
			return nil, err
		}
		fi.retType = t
	}
	for _, n := range f.TypeForms {
		if _, err := parseType(n); err != nil {
			return nil, err
		}
	}
	return fi, nil
}

// builtin resolves a builtin name for the continuation decoder.
func (p *Program) builtin(name string) *Builtin {
	if b := p.extra[name]; b != nil {
		return b
	}
	return builtinNamed(name)
}

// constValue turns a constant form into its value (quoted forms included).
func constValue(n syntax.Node) (Value, error) {
	switch n := n.(type) {
	case *syntax.Nil:
		return Nil, nil
	case *syntax.Bool:
		return Bool(n.Value), nil
	case *syntax.Int:
		return Int(n.Value), nil
	case *syntax.Float:
		return Float(n.Value), nil
	case *syntax.String:
		return String(n.Value), nil
	case *syntax.Keyword:
		return Keyword(n.Name), nil
	case *syntax.Regex:
		return NewRegex(n.Pattern)
	case *syntax.Symbol:
		return Symbol(n.Name), nil
	case *syntax.List:
		elems, err := constValues(n.Elems)
		return NewList(elems...), err
	case *syntax.Vector:
		elems, err := constValues(n.Elems)
		return NewVector(elems...), err
	case *syntax.Map:
		elems, err := constValues(n.Elems)
		return MapOf(elems...), err
	case *syntax.Set:
		elems, err := constValues(n.Elems)
		return NewSet(elems...), err
	case *syntax.TypeExpr:
		return constValue(n.Vec)
	}
	return nil, fmt.Errorf("%s: cannot quote %s", n.Pos(), n)
}

func constValues(ns []syntax.Node) ([]Value, error) {
	out := make([]Value, len(ns))
	for i, n := range ns {
		v, err := constValue(n)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// CompileVersion returns the version of the compiler's output (bytecode,
// function ids, the prelude's layout) that program hashes and continuations
// carry: a continuation decodes only with the compiler version that encoded
// it (docs/continuations.md, Versioning).
func CompileVersion() string { return compile.Version }

// Name returns the file name the program was compiled from.
func (p *Program) Name() string { return p.name }

// Hash returns the hex SHA-256 of the compiler version, the prelude and the
// source. Equal hashes mean the same code; continuations record it.
func (p *Program) Hash() string { return p.hash }

// Source returns the program's source text. The caller must not modify it.
func (p *Program) Source() []byte { return p.src }

// A Globals is an immutable snapshot of a program run's global variables
// (those defined by def and defn). It is safe to share between goroutines.
type Globals struct {
	prog   *Program
	values []Value // nil entries are undefined
	// enc is the globals section of a continuation, as encoded the first
	// time: a Globals is never written once made (a thread copies it on
	// its first def), so every continuation that holds it encodes the
	// same section (continuation_codec.go).
	enc atomic.Pointer[encodedGlobals]
}

// Program returns the program the globals belong to.
func (g *Globals) Program() *Program { return g.prog }

// Get returns the value of the global variable name, if it is defined.
func (g *Globals) Get(name string) (Value, bool) {
	i, ok := g.prog.index[name]
	if !ok || g.values[i] == nil {
		return nil, false
	}
	return g.values[i], true
}
