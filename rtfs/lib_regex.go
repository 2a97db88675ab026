package rtfs

import (
	"errors"
	"fmt"
	"regexp"
	resyntax "regexp/syntax"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// Regular expressions: the #"..." literal and re-pattern make a *Regex, which
// re-find, re-matches, re-seq and clojure.string's split, replace and
// replace-first take. They run on Go's regexp package: RE2 syntax, linear
// time in the input (no catastrophic backtracking), and no lookaround or
// backreferences (docs/rtfs-values.md lists the differences from Java's).

// A Regex is a compiled regular expression. It prints as #"pattern", which
// reads back as an equal Regex; two Regexes are = when their patterns are
// the same text. A Regex is immutable and safe to share between goroutines
// (Go's *regexp.Regexp is).
type Regex struct {
	src   string
	re    *regexp.Regexp
	whole *regexp.Regexp // the pattern anchored at both ends, for re-matches
}

// NewRegex compiles pattern (RE2 syntax). An invalid pattern is an error
// that says what RE2 lacks when that is the cause (syntax.CheckRegex).
func NewRegex(pattern string) (*Regex, error) {
	if err := syntax.CheckRegex(pattern); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	// The anchored form is built from the parsed pattern, not its text: a
	// \Q without \E would quote the anchor too.
	tree, err := resyntax.Parse(pattern, resyntax.Perl)
	if err != nil {
		return nil, err
	}
	whole, err := regexp.Compile(`\A(?:` + tree.String() + `)\z`)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression #\"%s\": %w", pattern, err)
	}
	return &Regex{src: pattern, re: re, whole: whole}, nil
}

// Kind implements Value.
func (*Regex) Kind() Kind { return types.KindRegex }

// String implements Value: #"pattern", a quote inside escaped so that it
// reads back.
func (r *Regex) String() string {
	var b strings.Builder
	b.WriteString(`#"`)
	for i := 0; i < len(r.src); i++ {
		switch c := r.src[i]; {
		case c == '\\' && i+1 < len(r.src):
			b.WriteByte(c)
			b.WriteByte(r.src[i+1])
			i++
		case c == '"':
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Pattern returns the pattern's source text.
func (r *Regex) Pattern() string { return r.src }

func addRegexBuiltins(t builtinTable) {
	t.add("re-pattern", 1, 1, func(th *Thread, args []Value) (Value, error) {
		if r, ok := args[0].(*Regex); ok {
			return r, nil
		}
		var s string
		err := unpackArgs(th, args, &s)
		if err == nil {
			err = th.scanRegex(len(s)) // compiling reads the pattern a few times
		}
		if err != nil {
			return nil, err
		}
		return NewRegex(s)
	})
	t.add("re-find", 2, 2, func(th *Thread, args []Value) (Value, error) {
		re, s, err := regexArgs(th, args)
		if err == nil {
			err = th.scanRegex(len(s))
		}
		if err != nil {
			return nil, err
		}
		return matchResult(th, re.re, s, re.re.FindStringSubmatchIndex(s))
	})
	t.add("re-matches", 2, 2, func(th *Thread, args []Value) (Value, error) {
		re, s, err := regexArgs(th, args)
		if err == nil {
			err = th.scanRegex(len(s))
		}
		if err != nil {
			return nil, err
		}
		return matchResult(th, re.re, s, re.whole.FindStringSubmatchIndex(s))
	})
	t.add("re-seq", 2, 2, func(th *Thread, args []Value) (Value, error) {
		re, s, err := regexArgs(th, args)
		if err != nil {
			return nil, err
		}
		all, err := th.findAll(re.re, s, -1)
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return Nil, nil
		}
		if err := th.build(len(all)); err != nil {
			return nil, err
		}
		out := make([]Value, len(all))
		for i, m := range all {
			if out[i], err = matchResult(th, re.re, s, m); err != nil {
				return nil, err
			}
		}
		return listOwned(out), nil
	})
	t.add("re-quote-replacement", 1, 1, strMap(func(s string) string {
		return strings.NewReplacer(`\`, `\\`, `$`, `\$`).Replace(s)
	}))
	t.alias("clojure.string/re-quote-replacement", "re-quote-replacement")
	t.alias("str/re-quote-replacement", "re-quote-replacement")
}

// What a regex search costs, in steps. RE2 is linear in its input, but it
// reads a byte several times slower than a plain text search
// (textStepBytes), and it starts its machine again for each match: so a
// search pays a step per byte of input, up front, and regexMatchSteps per
// match it finds (BenchmarkStepCost's regex programs measure both against
// the VM's instruction).
const regexMatchSteps = 20

// scanRegex charges a regex search over n bytes of input, before it runs.
func (th *Thread) scanRegex(n int) error {
	return th.charge(int64(n)+1, 0)
}

// findAll is re.FindAllStringSubmatchIndex(s, n) (n < 0: every match) for a
// builtin: it charges the search up front and each match it found, and
// looks for no more matches than the step budget pays for, so a pattern
// that matches at every byte stops at the budget rather than after the
// whole search.
func (th *Thread) findAll(re *regexp.Regexp, s string, n int) ([][]int, error) {
	if err := th.scanRegex(len(s)); err != nil {
		return nil, err
	}
	if th != nil {
		room := (th.limits.MaxSteps-th.steps-th.work)/regexMatchSteps + 1
		if n < 0 || int64(n) > room {
			n = int(max(room, 1))
		}
	}
	all := re.FindAllStringSubmatchIndex(s, n)
	return all, th.charge(int64(len(all))*regexMatchSteps, 0)
}

// regexArgs reads (f re s): a pattern and the string it searches.
func regexArgs(th *Thread, args []Value) (*Regex, string, error) {
	var re *Regex
	var s string
	err := unpackArgs(th, args, &re, &s)
	return re, s, err
}

// matchResult is what re-find and friends return for one match: nil for
// none, the matched text for a pattern without groups, else the vector of
// the match and each group (nil for a group that did not take part).
func matchResult(th *Thread, re *regexp.Regexp, s string, m []int) (Value, error) {
	if m == nil {
		return Nil, nil
	}
	if re.NumSubexp() == 0 {
		return String(s[m[0]:m[1]]), nil
	}
	if err := th.build(len(m) / 2); err != nil {
		return nil, err
	}
	out := make([]Value, len(m)/2)
	for i := range out {
		if m[2*i] < 0 {
			out[i] = Nil
		} else {
			out[i] = String(s[m[2*i]:m[2*i+1]])
		}
	}
	return vectorOwned(out), nil
}

// splitRegex is Java's String.split: the pieces of s around the matches of
// re, at most limit of them when limit > 0, all when limit < 0, and with
// trailing empty pieces dropped when limit is 0. A match of no width at the
// start makes no empty first piece, and no match at all leaves s whole.
func splitRegex(th *Thread, re *regexp.Regexp, s string, limit int) ([]string, error) {
	n := -1
	if limit > 0 {
		n = limit // limit-1 pieces before the rest, and a match of no width at the start
	}
	matches, err := th.findAll(re, s, n)
	if err != nil {
		return nil, err
	}
	var out []string
	index := 0
	for _, m := range matches {
		if limit > 0 && len(out) >= limit-1 {
			break
		}
		if m[1] == 0 {
			continue
		}
		out = append(out, s[index:m[0]])
		index = m[1]
	}
	if index == 0 && len(out) == 0 {
		return []string{s}, nil
	}
	out = append(out, s[index:])
	if limit == 0 {
		out = dropTrailingEmpty(out)
	}
	return out, nil
}

// expandReplacement appends to b the replacement text of one match, read
// as Java's Matcher.appendReplacement does: $n is group n (as many digits as
// make a group that exists), ${name} a named group, \c the character c.
func expandReplacement(b *strings.Builder, re *regexp.Regexp, repl, s string, m []int) error {
	group := func(i int) {
		if m[2*i] >= 0 {
			b.WriteString(s[m[2*i]:m[2*i+1]])
		}
	}
	for i := 0; i < len(repl); i++ {
		switch c := repl[i]; c {
		case '\\':
			i++
			if i == len(repl) {
				return errors.New("character to be escaped is missing")
			}
			b.WriteByte(repl[i])
		case '$':
			i++
			if i == len(repl) {
				return errors.New("illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				end := strings.IndexByte(repl[i:], '}')
				if end < 0 {
					return errors.New("named capturing group is missing trailing '}'")
				}
				name := repl[i+1 : i+end]
				g := re.SubexpIndex(name)
				if g < 0 {
					return fmt.Errorf("no group with name {%s}", name)
				}
				group(g)
				i += end
				continue
			}
			if repl[i] < '0' || repl[i] > '9' {
				return errors.New("illegal group reference")
			}
			g := int(repl[i] - '0')
			if g > re.NumSubexp() {
				return withKind(compile.KindIndex, fmt.Errorf("no group %d", g))
			}
			for i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' {
				next := g*10 + int(repl[i+1]-'0')
				if next > re.NumSubexp() {
					break
				}
				g = next
				i++
			}
			group(g)
		default:
			b.WriteByte(c)
		}
	}
	return nil
}

// replaceRegex replaces the first (or every) match of re in s by the
// expansion of repl.
func replaceRegex(th *Thread, re *regexp.Regexp, s, repl string, all bool) (Value, error) {
	n := 1
	if all {
		n = -1
	}
	matches, err := th.findAll(re, s, n)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	last := 0
	mt := meter{th: th}
	for _, m := range matches {
		if err := mt.tick(); err != nil {
			return nil, err
		}
		b.WriteString(s[last:m[0]])
		if err := expandReplacement(&b, re, repl, s, m); err != nil {
			return nil, err
		}
		last = m[1]
		if err := th.checkSize(b.Len()); err != nil {
			return nil, err
		}
	}
	b.WriteString(s[last:])
	if err := mt.done(); err != nil {
		return nil, err
	}
	return String(b.String()), th.buildText(b.Len())
}

// replacePattern is str/replace and str/replace-first when the match is a
// regex: the replacement is a string read as Java reads it ($1, ${name},
// \$), or a function of each match (what re-find would return) whose str
// replaces it, which runs in the prelude (%replace-fn). done is false when
// the match is not a regex (a literal string replacement).
func replacePattern(th *Thread, args []Value, all bool) (done bool, v Value, err error) {
	re, ok := args[1].(*Regex)
	if !ok {
		return false, nil, nil
	}
	s, err := toText(1, args[0])
	if err != nil {
		return true, nil, err
	}
	switch repl := args[2].(type) {
	case String:
		v, err := replaceRegex(th, re.re, s, string(repl), all)
		return true, v, err
	case *Closure, *Builtin, Keyword, *Map, *Set:
		return true, nil, th.redirectTo("%replace-fn", args[0], re, repl, Bool(all))
	}
	return true, nil, argTypeError(3, "a string or a function", args[2])
}

// intrReAll is (%re-all re s all?): the matches of re in s (the first only
// unless all) as [start end match] vectors, match as re-find returns it and
// start and end byte offsets.
func intrReAll(th *Thread, args []Value) (Value, error) {
	re, s, err := regexArgs(th, args[:2])
	if err != nil {
		return nil, err
	}
	n := 1
	if Truth(args[2]) {
		n = -1
	}
	all, err := th.findAll(re.re, s, n)
	if err != nil {
		return nil, err
	}
	if err := th.build(len(all)); err != nil {
		return nil, err
	}
	out := make([]Value, len(all))
	for i, m := range all {
		mv, err := matchResult(th, re.re, s, m)
		if err != nil {
			return nil, err
		}
		out[i] = NewVector(Int(m[0]), Int(m[1]), mv)
	}
	return vectorOwned(out), nil
}

// intrReSplice is (%re-splice s matches replacements): s with each match
// (from %re-all) replaced by the str of its replacement.
func intrReSplice(th *Thread, args []Value) (Value, error) {
	s, err := toText(1, args[0])
	ms, ok := args[1].(*Vector)
	reps, ok2 := args[2].(*Vector)
	if err != nil || !ok || !ok2 || ms.Len() != reps.Len() {
		return nil, fmt.Errorf("internal: bad splice")
	}
	var b strings.Builder
	last := 0
	mt := meter{th: th}
	for i := 0; i < ms.Len(); i++ {
		m, _ := ms.Index(i).(*Vector)
		start, _ := m.Index(0).(Int)
		end, _ := m.Index(1).(Int)
		if int(start) < last || int(end) > len(s) || end < start {
			return nil, fmt.Errorf("internal: bad splice")
		}
		b.WriteString(s[last:start])
		if err := strInto(th, &b, reps.Index(i), &mt); err != nil {
			return nil, err
		}
		last = int(end)
		if err := mt.tick(); err != nil {
			return nil, err
		}
	}
	b.WriteString(s[last:])
	if err := mt.done(); err != nil {
		return nil, err
	}
	return String(b.String()), th.buildText(b.Len())
}
