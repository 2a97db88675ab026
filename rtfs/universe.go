package rtfs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// A FuncDoc describes one function every program can call: a Go builtin or
// a prelude function. Universe lists them all.
type FuncDoc struct {
	Name    string // as programs call it, e.g. "map" or "str/join"
	Usage   string // the call's shape, e.g. "(map f coll ...)"
	Doc     string // one line
	Prelude bool   // written in RTFS (a callback it calls may make host calls)
	AliasOf string // for another name of a function: that function's name
	// Constant marks a value that is not a function (Math/PI,
	// Long/MAX_VALUE): Usage is its name.
	Constant bool
}

// Universe returns every function a program can call without defining it,
// sorted by name: the one index of RTFS's core library (as starlark-go's
// Universe is). Special forms and macros (if, let, case, ...) are not
// functions and are not listed. The result is the caller's; computing it
// costs a few microseconds per entry.
func Universe() []FuncDoc {
	var out []FuncDoc
	inPrelude := map[string]bool{}
	if p, err := loadPrelude(); err == nil {
		for _, name := range p.code.Globals {
			if !strings.HasPrefix(name, "%") {
				inPrelude[name] = true
				out = append(out, docOf(name, "", true))
			}
		}
	}
	for name, b := range coreBuiltins {
		if !inPrelude[name] { // a prelude function of the same name is the one programs call
			out = append(out, docOf(name, b.aliasOf, false))
		}
	}
	for _, name := range compile.Constants() {
		d := docOf(name, "", false) // Math/PI, Long/MAX_VALUE: values, not functions
		d.Constant = true
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupDoc returns the FuncDoc of the function called name.
func LookupDoc(name string) (FuncDoc, bool) {
	for _, d := range Universe() {
		if d.Name == name {
			return d, true
		}
	}
	return FuncDoc{}, false
}

func docOf(name, aliasOf string, prelude bool) FuncDoc {
	d := FuncDoc{Name: name, Prelude: prelude, AliasOf: aliasOf}
	key := name
	if aliasOf != "" {
		key = aliasOf
	}
	if e, ok := funcDocs[key]; ok {
		d.Usage, d.Doc = e[0], e[1]
		if aliasOf != "" {
			d.Usage = strings.ReplaceAll(d.Usage, "("+aliasOf+" ", "("+name+" ")
			d.Doc = fmt.Sprintf("%s (another name for %s)", d.Doc, aliasOf)
		}
	}
	return d
}
