package syntax

// An Error is a reader error: a one-line message and the position it concerns.
// Parse returns it as the error value (a *Error); errors.As reaches it through
// any wrapping a caller adds.
type Error struct {
	Pos Pos    // where the problem is: file, line and column
	Msg string // the one-line message, without the position
}

// Error formats the error as "file:line:col: message".
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }
