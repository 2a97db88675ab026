package rtfs

import (
	"fmt"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// A LimitError reports that a run exceeded one of its Thread's Limits. It
// reaches the host wrapped in an *EvalError (use errors.As); RTFS code cannot
// catch it. The Thread stays usable for the next run.
type LimitError struct {
	// Limit names the limit that was exceeded: LimitSteps, LimitDepth,
	// LimitCollectionSize, LimitMemory, LimitTime or LimitOutput.
	Limit string
	// Max is the limit's value on the Thread that ran: Limits.MaxSteps,
	// Limits.MaxDepth, Limits.MaxCollectionSize or Limits.MaxMemory (after
	// defaults).
	Max int64
}

// The values of LimitError.Limit, one per field of Limits.
const (
	// LimitSteps: a call ran more than Limits.MaxSteps VM instructions.
	LimitSteps = "steps"
	// LimitDepth: RTFS calls nested deeper than Limits.MaxDepth frames.
	LimitDepth = "depth"
	// LimitCollectionSize: a builtin would have built a collection (or
	// string, in bytes) longer than Limits.MaxCollectionSize.
	LimitCollectionSize = "collection size"
	// LimitMemory: builtins and literals of a call allocated more than
	// Limits.MaxMemory bytes.
	LimitMemory = "memory"
	// LimitTime: a call ran longer than Limits.MaxDuration (Max is in
	// nanoseconds).
	LimitTime = "time"
	// LimitOutput: an encoding of a value (its JSON, or the store's codec)
	// would pass its bound, Limits.OutputLimit of the run that produced
	// the value or EncodeOptions.MaxBytes. A value that shares structure
	// is written in full, so it can take far more bytes encoded than in
	// memory.
	LimitOutput = "output"
)

// Error returns "steps limit of 1000 exceeded" and the like.
func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitTime:
		return fmt.Sprintf("time limit of %s exceeded", time.Duration(e.Max))
	case LimitMemory:
		return fmt.Sprintf("memory limit of %d bytes exceeded", e.Max)
	case LimitOutput:
		return fmt.Sprintf("output limit of %d bytes exceeded", e.Max)
	}
	return fmt.Sprintf("%s limit of %d exceeded", e.Limit, e.Max)
}

// An EvalError is an RTFS runtime error: an error raised by the VM or a
// builtin, a (throw v) that nothing caught, a host error passed to
// ResumeError that nothing caught, a limit or a cancellation. Unwrap returns
// the cause, so errors.Is and errors.As reach a host's own error, a
// *LimitError or context.Canceled.
type EvalError struct {
	// Msg is the error message without position.
	Msg string
	// Pos is the position of the innermost frame of the program's own code.
	Pos syntax.Pos
	// Stack is the RTFS call stack, outermost first.
	Stack []StackFrame
	// Value is what a catch clause would bind: the thrown value for
	// (throw v), else a map {:type :error :message "..."}.
	Value Value
	cause error
}

// A StackFrame is one active RTFS function call.
type StackFrame struct {
	Name string     // function name; "<toplevel>" or "fn" for an anonymous fn
	Pos  syntax.Pos // the position being executed in that function
}

// Error returns "file:line:col: message".
func (e *EvalError) Error() string {
	if !e.Pos.IsValid() {
		return e.Msg
	}
	return e.Pos.String() + ": " + e.Msg
}

// Unwrap returns the underlying cause (nil for a throw or a VM error).
func (e *EvalError) Unwrap() error { return e.cause }

// Backtrace returns the error and its RTFS call stack, innermost call last.
func (e *EvalError) Backtrace() string {
	var b strings.Builder
	b.WriteString("RTFS traceback (most recent call last):\n")
	for _, f := range e.Stack {
		fmt.Fprintf(&b, "  %s: in %s\n", f.Pos, f.Name)
	}
	b.WriteString("Error: ")
	b.WriteString(e.Msg)
	return b.String()
}
