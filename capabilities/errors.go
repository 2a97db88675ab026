package capabilities

import (
	"errors"
	"strings"
)

// ErrUnknown is wrapped by the *Error that Dispatch returns for an id that no
// capability has.
var ErrUnknown = errors.New("no such capability")

// An Error is a failed host call: an unknown capability, arguments that do
// not fit the capability's schema, or the handler's own error (Err).
type Error struct {
	// Capability is the id without the colon.
	Capability string
	// Key is the map key the error is about, without the colon ("" if none).
	Key string
	// Msg describes the problem; empty when Err says it all.
	Msg string
	// Err is the cause, if any.
	Err error
}

// Error returns "capability :ID: key :KEY: MSG: ERR", leaving out the parts
// that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("capability :")
	b.WriteString(e.Capability)
	if e.Key != "" {
		b.WriteString(": key :")
		b.WriteString(e.Key)
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	if e.Err != nil && !errors.Is(e.Err, ErrUnknown) {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
