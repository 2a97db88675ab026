package capabilities

import (
	"context"
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A Server serves the host call that out is suspended at (out.Call) and
// returns its answer. An error is thrown into the program, where try/catch
// sees it, unless it is a Halt or the context has ended: then the run ends
// with it.
type Server func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error)

// Drive runs a program on th from out (the outcome of th.Run, th.Call or a
// Resume, with its error err) to its end: while the program is suspended at
// a host call, serve answers it and th resumes the program with the answer
// or throws serve's error into it. It returns the final outcome (its Value
// and Globals) or the error that ended the run. When serve fails with a
// Halt, Drive returns the halt's error and the outcome suspended at the
// call, not resumed; when ctx has ended, it returns an error wrapping
// ctx.Err() that names the call. Drive costs nothing beyond th's own work
// and serve's; it is as safe for concurrent use as th, which is to say one
// goroutine at a time.
func Drive(ctx context.Context, th *rtfs.Thread, out rtfs.Outcome, err error, serve Server) (rtfs.Outcome, error) {
	for err == nil && out.Call != nil {
		v, cerr := serve(ctx, out)
		switch {
		case cerr == nil:
			out, err = th.Resume(ctx, out.Continuation, v)
		case resumes(ctx, cerr):
			out, err = th.ResumeError(ctx, out.Continuation, cerr)
		default:
			var h *haltError
			if errors.As(cerr, &h) {
				return out, h.err
			}
			return out, fmt.Errorf("host call :%s at %s: %w", out.Call.Capability, out.Call.Pos, ctx.Err())
		}
	}
	return out, err
}

// resumes reports whether Drive resumes the program after serve returned
// err: with the answer (nil) or by throwing err into it, unless err is a
// Halt or ctx has ended.
func resumes(ctx context.Context, err error) bool {
	if err == nil {
		return true
	}
	var h *haltError
	return !errors.As(err, &h) && ctx.Err() == nil
}

// Halt wraps err so that Drive ends the run with err instead of throwing it
// into the program (e.g. a parked program interrupted by a shutdown, which
// must not see the interruption as an error it could catch).
func Halt(err error) error { return &haltError{err} }

type haltError struct{ err error }

func (h *haltError) Error() string { return h.err.Error() }
func (h *haltError) Unwrap() error { return h.err }
