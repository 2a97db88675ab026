package rtfs

import (
	"fmt"
	"maps"
	"slices"
)

// Continuations and globals outlive the binary that wrote them. A
// continuation names the compiler version that compiled its program, and
// its function ids, pcs and stack depths are only meaningful for the code
// that version produced: the prelude's functions come first in every
// program. So when a continuation of an earlier version is decoded, the
// program's source is compiled again on that version's prelude (kept,
// frozen, as prelude_compile2.rtfs, prelude_compile3.rtfs ...), its hash is checked against the one
// the continuation holds, and the continuation resumes in that program: a
// run parked under an earlier release finishes under the code it started
// with (the language library of today serves both; only the prelude and the
// compiler's output are versioned). See docs/continuations.md, "Versioning".

// earlierPreludes are the compiler versions whose continuations this one
// still reads, with their preludes.
var earlierPreludes = map[string]*preludeVersion{
	"rtfs-compile-2": compile2Prelude,
	"rtfs-compile-3": compile3Prelude,
}

// underVersion returns p compiled under the compiler version named version:
// p itself for its own version, else p's source compiled again on that
// version's prelude (once per program and version).
func (p *Program) underVersion(version string) (*Program, error) {
	if version == p.version {
		return p, nil
	}
	pv, ok := earlierPreludes[version]
	if !ok {
		return nil, fmt.Errorf("compiled by %q, this is %q, which reads only %s", version, p.version, knownVersions())
	}
	p.legacyMu.Lock()
	defer p.legacyMu.Unlock()
	if lp := p.legacy[version]; lp != nil {
		return lp, nil
	}
	lp, err := compileWith(p.name, p.src, p.cfg, pv)
	if err != nil {
		return nil, fmt.Errorf("compiled by %q: the program does not compile under that version's prelude: %w", version, err)
	}
	if p.legacy == nil {
		p.legacy = make(map[string]*Program)
	}
	p.legacy[version] = lp
	return lp, nil
}

func knownVersions() string {
	s := fmt.Sprintf("%q", currentPrelude.version)
	for _, v := range slices.Sorted(maps.Keys(earlierPreludes)) {
		s += fmt.Sprintf(" and %q", v)
	}
	return s
}
