// Package capabilities is the registry of host capabilities that RTFS programs
// reach with (call :capability-id args...).
//
// The main types are Registry, Capability, Call, Answer, Schema and Error. A
// Capability has an id (such as "mcp.stream.start", written without the
// colon), a description, an input Schema, its effects and a Handler. The host
// suspends a program at each (call ...), hands the call to Registry.Dispatch,
// and resumes the program with the answer, or throws the error into RTFS,
// where try/catch sees it. Dispatch checks the arguments against the schema
// first, so a handler sees only well-formed input, and every dispatch error is
// an *Error naming the capability and, where it applies, the key.
//
// A handler answers at once (Now) or later (Later): a parked answer, such as
// the one of :mcp.stream.await, carries a wait function that the host calls
// when it is ready to block the program until the answer exists.
//
// Typed makes a capability over Go types, deriving its schemas from them
// and converting the argument and the answer with ToGo and FromGo, which an
// embedder can also use on their own.
//
// Drive is the one loop that takes a suspended program from host call to
// host call: the host's programs, the provider's processors and the MCP
// server's programs all run through it, each with its own way of serving a
// call.
package capabilities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// A Call is one host call: the capability id without the colon, the arguments
// as the program passed them, where the call is in the source, and the global
// variables of the calling program at that moment (nil when the call comes
// from Go). Handlers must not modify Args.
type Call struct {
	ID      string
	Args    []rtfs.Value
	Pos     syntax.Pos
	Globals *rtfs.Globals
	// Stream is the id of the stream whose processor made the call; empty
	// for a program's call and a call from Go.
	Stream string
	// Seq and ChunkID name the chunk whose processing made the call: its
	// :seq (from 1) and the id its source gave it ("" when none); Index
	// is the call's place among the host calls of that chunk's processing
	// (from 0). They are zero for a program's call. A chunk is processed
	// again after a crash, or when a failed stream retries it, and its
	// calls then come again with the same Stream, Seq, ChunkID and Index:
	// Key joins them into one idempotency key.
	Seq     int64
	ChunkID string
	Index   int
	// Journal is the calling run's journal, nil when the run records none.
	// Its Snapshot, taken while the handler runs, ends with this call as
	// the pending one: what a replay of the run needs to come back to this
	// call under another compiler (:mcp.stream.start keeps it with the
	// stream it starts).
	Journal *Journal
}

// Key returns the call's idempotency key, "STREAM/SEQ/INDEX", the same for
// the same call of the same chunk however often the chunk is processed
// (a processor is a pure function of its state and chunk, so it makes the
// same calls in the same order); "" for a call no chunk made. A handler
// with effects outside rtfshost keeps the keys it has served to act once.
func (c *Call) Key() string {
	if c.Stream == "" || c.Seq == 0 {
		return ""
	}
	return c.Stream + "/" + strconv.FormatInt(c.Seq, 10) + "/" + strconv.Itoa(c.Index)
}

// LogCapability is the id of the capability that RTFS's println and log
// call; it answers nil.
const LogCapability = "ccos.io.log"

// A Handler serves a capability. It runs on the goroutine of the program or
// stream that made the call, must honour ctx, and returns an Answer or an
// error; the error reaches RTFS as a catchable error wrapped in an *Error.
//
// A handler is registered before the host recovers its streams (a recovered
// processor that calls an unregistered capability fails as on any error),
// and may be called again with the same call: a stream's chunks whose
// processing had not committed when the process died are processed again
// after recovery, and a failed stream's retry processes its chunk again,
// with the same host calls. Call.Key identifies such a repeated call.
type Handler func(ctx context.Context, c *Call) (Answer, error)

// A Capability is a host function that RTFS programs may call.
type Capability struct {
	// ID is the capability id without the leading colon, e.g. "ccos.io.log".
	ID string
	// Description says what the capability does, for listings and MCP tools.
	Description string
	// Input describes the accepted arguments; nil accepts any arguments.
	Input *Schema
	// Output describes the answer, for listings (Typed derives it from
	// the Go type of the answer); nil says nothing about it. It is not
	// checked at run time.
	Output *Schema
	// Effects names the capability's effects, e.g. ":network".
	Effects []string
	// Handler serves the calls.
	Handler Handler
}

// An Answer is a handler's result: a value available now, or a parked answer
// that the caller obtains by waiting. The zero Answer is the value nil.
type Answer struct {
	value rtfs.Value
	wait  func(ctx context.Context) (rtfs.Value, error)
}

// Now returns an Answer holding v (nil means RTFS nil).
func Now(v rtfs.Value) Answer { return Answer{value: v} }

// Later returns a parked Answer: its value is what wait returns. wait must
// honour ctx and may be called at most once.
func Later(wait func(ctx context.Context) (rtfs.Value, error)) Answer {
	return Answer{wait: wait}
}

// Parked reports whether the answer comes later, from Wait.
func (a Answer) Parked() bool { return a.wait != nil }

// Wait returns the answer's value, blocking for a parked answer until it
// exists or ctx ends. It never returns a nil Value with a nil error.
func (a Answer) Wait(ctx context.Context) (rtfs.Value, error) {
	if a.wait == nil {
		if a.value == nil {
			return rtfs.Nil, nil
		}
		return a.value, nil
	}
	v, err := a.wait(ctx)
	if err == nil && v == nil {
		v = rtfs.Nil
	}
	return v, err
}

// A Registry holds capabilities by id. The zero value is an empty registry
// ready to use. It is safe for concurrent use; a dispatch costs one
// read-locked map lookup plus the schema check.
type Registry struct {
	mu   sync.RWMutex
	caps map[string]Capability
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{caps: make(map[string]Capability)} }

// Register adds c. It fails if the id is empty or malformed, the handler is
// nil, the schema is invalid, or the id is already registered.
func (r *Registry) Register(c Capability) error {
	c.ID = strings.TrimPrefix(c.ID, ":")
	if err := checkID(c.ID); err != nil {
		return err
	}
	if c.Handler == nil {
		return fmt.Errorf("register capability :%s: nil handler", c.ID)
	}
	if err := c.Input.validate(); err != nil {
		return fmt.Errorf("register capability :%s: %w", c.ID, err)
	}
	if err := c.Output.validate(); err != nil {
		return fmt.Errorf("register capability :%s: output %w", c.ID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.caps == nil {
		r.caps = make(map[string]Capability)
	}
	if _, dup := r.caps[c.ID]; dup {
		return fmt.Errorf("register capability :%s: already registered", c.ID)
	}
	r.caps[c.ID] = c
	return nil
}

func checkID(id string) error {
	if id == "" {
		return errors.New("register capability: empty id")
	}
	for _, r := range id {
		if r <= ' ' || strings.ContainsRune("()[]{}\",;'`", r) {
			return fmt.Errorf("register capability %q: id contains %q", id, r)
		}
	}
	return nil
}

// Lookup returns the capability with the given id (with or without the colon).
func (r *Registry) Lookup(id string) (Capability, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.caps[strings.TrimPrefix(id, ":")]
	return c, ok
}

// List returns the registered capabilities sorted by id.
func (r *Registry) List() []Capability {
	r.mu.RLock()
	list := make([]Capability, 0, len(r.caps))
	for _, c := range r.caps {
		list = append(list, c)
	}
	r.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list
}

// Dispatch serves c: it finds the capability, checks the arguments against its
// schema and runs its handler. Every error it returns is an *Error naming the
// capability (and the key for a bad map argument); a handler's error is
// wrapped, so errors.Is and errors.As reach it. A panicking handler becomes an
// error too.
func (r *Registry) Dispatch(ctx context.Context, c *Call) (Answer, error) {
	if c == nil {
		return Answer{}, &Error{Msg: "nil call", Err: ErrUnknown}
	}
	id := strings.TrimPrefix(c.ID, ":")
	capb, ok := r.Lookup(id)
	if !ok {
		return Answer{}, &Error{Capability: id, Msg: "unknown capability", Err: ErrUnknown}
	}
	if err := capb.Input.check(id, c.Args); err != nil {
		return Answer{}, err
	}
	return runHandler(ctx, capb, c)
}

// Call is Dispatch followed by waiting for a parked answer.
func (r *Registry) Call(ctx context.Context, c *Call) (rtfs.Value, error) {
	a, err := r.Dispatch(ctx, c)
	if err != nil {
		return nil, err
	}
	if !a.Parked() {
		return a.Wait(ctx)
	}
	v, err := a.Wait(ctx)
	if err != nil {
		return nil, wrapHandlerError(strings.TrimPrefix(c.ID, ":"), err)
	}
	return v, nil
}

func runHandler(ctx context.Context, capb Capability, c *Call) (a Answer, err error) {
	defer func() {
		if p := recover(); p != nil {
			a, err = Answer{}, &Error{Capability: capb.ID, Msg: fmt.Sprintf("handler panicked: %v", p)}
		}
	}()
	a, err = capb.Handler(ctx, c)
	if err != nil {
		return Answer{}, wrapHandlerError(capb.ID, err)
	}
	return a, nil
}

// wrapHandlerError wraps a handler's error in an *Error, unless it already is
// one for this capability.
func wrapHandlerError(id string, err error) error {
	var ce *Error
	if errors.As(err, &ce) && ce.Capability == id {
		return err
	}
	return &Error{Capability: id, Err: err}
}
