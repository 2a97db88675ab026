package rtfs

import (
	"errors"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// A runtime error has a kind, the :kind of the error map a catch binds
// (:arithmetic, :index, :type, :nil, :arity, :argument, :state, :assert,
// :host, or :error for the VM's own), so that a catch naming a Clojure or
// Java exception class catches what Clojure would raise as that class
// (compile.ExceptionKinds; docs/continuations.md lists them).

// kindError gives an error its kind; Error and Unwrap are the wrapped
// error's, so messages and errors.Is/As are unchanged.
type kindError struct {
	kind string
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// withKind returns err with the kind.
func withKind(kind string, err error) error { return &kindError{kind: kind, err: err} }

// The kinds that are not exception classes' (compile's constants are).
const (
	kindHost = "host"  // a host error passed to ResumeError
	kindVM   = "error" // an error of the VM itself (a global not yet defined...)
)

// errorKind returns the kind of err: the innermost one given, else
// otherwise.
func errorKind(err error, otherwise string) string {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return otherwise
}

// hasKind reports whether err was given a kind, or must keep its own
// identity (a limit or a cancellation, which RTFS code cannot catch).
func hasKind(err error) bool {
	var ke *kindError
	var le *LimitError
	var fe *fatalError
	return errors.As(err, &ke) || errors.As(err, &le) || errors.As(err, &fe)
}

// classMatches reports whether an error value is of one of the kinds a
// catch of the exception class name catches: an ex-info is an error map
// with :data, the others carry their :kind.
func classMatches(name string, v Value) bool {
	m, ok := v.(*Map)
	if !ok {
		return false
	}
	kinds, _ := compile.ExceptionKinds(name)
	kind, _ := m.GetKeyword("kind")
	for _, k := range kinds {
		if k == compile.KindExInfo {
			if t, _ := m.GetKeyword("type"); t == Keyword("error") {
				if _, ok := m.GetKeyword("data"); ok {
					return true
				}
			}
			continue
		}
		if kind == Keyword(k) {
			return true
		}
	}
	return false
}
