package rtfs

import (
	"errors"
	"time"
)

// Charging: how a run pays for what it does beyond one step per VM
// instruction (docs/rtfs-values.md, "Budgets"). Every builtin pays for its
// work and for the memory it builds through the functions of this file and
// nothing else:
//
//	th.build(n)             before it builds a collection of n elements
//	th.buildText(n)         for a string of n bytes it built
//	th.scanText(n)          for reading n bytes of text (a search, a count)
//	th.alloc(bytes)         for the memory of an O(1) operation (a cons cell)
//	th.charge(steps, bytes) for any other amount it knows up front
//	meter                   for work it learns as it goes: m := meter{th: th};
//	                        m.tick() per element of a loop, or a deep walk
//	                        (m.equal, m.compare, m.hash, and the map and set
//	                        operations that take a *meter); then m.done()
//	th.equal, th.compare    one metered comparison
//
// A unit of work is one step: an element visited, copied or compared, or
// textStepBytes bytes of text. Memory is what the values built take on the
// heap (the sizes below, measured by TestMemoryChargeMatchesTheHeap), not
// the garbage made on the way. Each charge also checks the step and memory
// budgets, and every pollEvery steps it looks at the clock and the context,
// so a long builtin stops within a fraction of a millisecond of a limit or a
// cancel.

// What values take on the heap, as charged to Limits.MaxMemory.
const (
	// elemBytes is one element of a vector, list view or slice: a Value
	// (an interface header). A vector's trie adds a tenth to it.
	elemBytes = 16
	// boxBytes is a number boxed in a Value: an Int outside 0..255 or a
	// Float takes 8 bytes on the heap besides its slot.
	boxBytes = 8
	// consBytes is one cell of a list built by cons or conj.
	consBytes = 64
	// entryBytes is one entry of a hash map or set beyond 8 entries: key,
	// value, hash and its share of the trie's nodes.
	entryBytes = 64
	// textStepBytes is how many bytes of text one step reads or writes.
	textStepBytes = 16
	// freeText is the length below which reading a text is part of the
	// step that asked for it (a keyword, a short string): up to 16 steps'
	// worth, not worth a charge.
	freeText = 256
)

// pollEvery is how many steps a long builtin may charge between two looks
// at the clock and the context: about 10k elements stay well under a
// millisecond, so a limit or a cancel stops a builtin promptly.
const pollEvery = 1 << 13

// charge accounts for the work of a builtin beyond the one VM step of its
// call: steps step-equivalents (n for an O(n) builtin, n log n for a sort)
// and bytes of memory it allocates. It returns a *LimitError when the run's
// step or memory budget is spent, and a fatal cancellation error when the
// run's context is done, so a builtin that charges as it goes (every
// pollEvery elements at least) stops within a fraction of a millisecond of
// either. Builtins charge before they allocate where they know the size,
// so a budget refuses a huge collection before it exists. A nil thread
// (a builtin called outside a run) has no budget. Cost: a few additions
// and, every pollEvery steps or when steps is 0, a clock read and a
// non-blocking channel poll.
func (th *Thread) charge(steps, bytes int64) error {
	if th == nil {
		return nil
	}
	th.work += steps
	th.mem += bytes
	if th.steps+th.work > th.limits.MaxSteps {
		return &LimitError{Limit: LimitSteps, Max: th.limits.MaxSteps}
	}
	if th.mem > th.limits.MaxMemory {
		return &LimitError{Limit: LimitMemory, Max: th.limits.MaxMemory}
	}
	// Small charges (a literal, a short builtin) look at the clock and the
	// context only once enough work has added up; the VM's own checkpoint
	// covers them every 1,024 instructions anyway.
	if th.unpolled += steps; th.unpolled < pollEvery && steps > 0 {
		return nil
	}
	th.unpolled = 0
	if err := th.checkTime(); err != nil {
		return err
	}
	if th.done != nil {
		select {
		case <-th.done:
			return &fatalError{th.ctx.Err()}
		default:
		}
	}
	return nil
}

// alloc charges bytes of memory for an operation whose work is one step
// (the VM's): a cons cell, a hash map entry. It never looks at the clock.
func (th *Thread) alloc(bytes int64) error {
	if th == nil {
		return nil
	}
	if th.mem += bytes; th.mem > th.limits.MaxMemory {
		return &LimitError{Limit: LimitMemory, Max: th.limits.MaxMemory}
	}
	return nil
}

// checkTime returns a *LimitError once the run has taken longer than
// Limits.MaxDuration.
func (th *Thread) checkTime() error {
	if th.limits.MaxDuration > 0 && time.Since(th.started) > th.limits.MaxDuration {
		return &LimitError{Limit: LimitTime, Max: int64(th.limits.MaxDuration)}
	}
	return nil
}

// chargeElems charges a builtin that handles or builds n elements: n steps
// and n elements of memory.
func (th *Thread) chargeElems(n int) error {
	return th.charge(int64(n), int64(n)*elemBytes)
}

// build checks and charges a builtin about to build a collection of n
// elements from scratch: the size limit, then n steps and n elements of
// memory. Operations that add to a persistent collection (conj, assoc)
// call checkSize and alloc: their work does not grow with the collection.
func (th *Thread) build(n int) error {
	if err := th.checkSize(n); err != nil {
		return err
	}
	return th.chargeElems(n)
}

// buildText checks and charges a builtin that has built a string of n
// bytes: the size limit, n bytes of memory and the string's header, and
// one step per textStepBytes.
func (th *Thread) buildText(n int) error {
	if err := th.checkSize(n); err != nil {
		return err
	}
	return th.charge(int64(n)/textStepBytes, int64(n)+elemBytes)
}

// slotBytes is what storing x in a new slot of a collection takes: the
// slot, and the box of a number the VM computed (an Int outside 0..255 or
// a Float), which nothing charged when it was made.
func slotBytes(x Value) int64 {
	switch x := x.(type) {
	case Int:
		if x < 0 || x > 255 {
			return elemBytes + boxBytes
		}
	case Float:
		return elemBytes + boxBytes
	}
	return elemBytes
}

// scanText charges a builtin that reads n bytes of text without building
// any (a search, a count of code points): one step per textStepBytes.
func (th *Thread) scanText(n int) error {
	if n < freeText {
		return nil
	}
	return th.charge(int64(n)/textStepBytes, 0)
}

// textRoom is how many bytes a builtin may still print into one string
// before the size limit or the memory budget stops it: the limit given to
// writeLimited, so printing a huge collection stops early instead of
// building all of it first.
func (th *Thread) textRoom() int {
	if th == nil {
		return -1
	}
	room := int64(th.limits.MaxCollectionSize)
	if left := th.limits.MaxMemory - th.mem; left < room {
		room = max(left, 0)
	}
	return int(room)
}

// A meter charges work that a builtin learns only as it goes: a loop over
// elements, or a deep walk (equality, ordering, hashing, a trie edit).
// Count units with tick (in a loop: it returns the error) or visit (in a
// walk: it reports false once the budget is spent, and the walk unwinds);
// every pollEvery units the meter charges them, one step and bytes of
// memory each, and so looks at the clock and the context. done charges the
// rest and returns the first error: a builtin that uses a meter returns
// m.done() (or checks it) before it returns a value.
//
// A nil *meter counts nothing: it is what the unmetered Go API (Equal,
// Hash, Compare, Map.Get...) passes to the walks it shares with the
// builtins. A meter of a nil thread counts but never fails. A meter is used
// by one goroutine.
type meter struct {
	th    *Thread
	bytes int64 // memory per unit: 0 for a walk, elemBytes for a loop that builds an element per unit
	n     int64 // units not charged yet
	err   error // the first charge that failed
}

// visit counts n units of work and reports whether the run may go on; once
// it returns false it always does, and done returns the reason.
func (m *meter) visit(n int) bool {
	if m == nil {
		return true
	}
	if m.n += int64(n); m.n < pollEvery {
		return m.err == nil
	}
	return m.flush() == nil
}

// tick counts one unit of a loop and returns the charge's error, if any.
func (m *meter) tick() error {
	if m.visit(1) {
		return nil
	}
	return m.err
}

// failed reports whether a charge has failed (the walk must unwind).
func (m *meter) failed() bool { return m != nil && m.err != nil }

// flush charges the units counted so far.
func (m *meter) flush() error {
	if m == nil {
		return nil
	}
	if m.err == nil && m.n > 0 {
		m.err = m.th.charge(m.n, m.n*m.bytes)
	}
	m.n = 0
	return m.err
}

// done charges what is left and returns the first error of the meter.
func (m *meter) done() error {
	if m.n == 0 {
		return m.err
	}
	return m.flush()
}

// equal is Equal charged to the run: one step per element pair it compares
// (and per textStepBytes of long strings). The error is a limit or a cancel
// that stopped the comparison.
func (th *Thread) equal(a, b Value) (bool, error) {
	switch a.(type) {
	case *List, *Vector, *Map, *Set, String, *Lazy:
		m := meter{th: th}
		eq := m.equal(a, b)
		return eq, m.done()
	}
	return Equal(a, b), nil
}

// compare is Compare charged to the run, as equal is.
func (th *Thread) compare(a, b Value) (int, error) {
	m := meter{th: th}
	c, err := m.compare(a, b)
	if err := m.done(); err != nil {
		return 0, err
	}
	return c, err
}

// entryCost is the memory a map or set of n entries built at once takes
// per entry: a key and value slot in an array map, else a trie entry and,
// for a while, the scratch of buildMap.
func entryCost(n int) int64 {
	if n <= arrayMapMax {
		return 2 * elemBytes
	}
	return entryBytes + trieScratchBytes
}

// buildSteps is what building one entry of a map or set at once costs, in
// steps, besides hashing and placing it: its allocation and copies
// (BenchmarkStepCost).
const buildSteps = 8

// mapOf builds the map of the pairs in kvs for a builtin (MapOf), charged:
// the size limit, then buildSteps and entryCost per entry before it builds,
// and the hashing, comparing and placing of the keys as it goes.
func (th *Thread) mapOf(kvs []Value) (*Map, error) {
	n := (len(kvs) + 1) / 2
	if err := th.checkSize(n); err != nil {
		return nil, err
	}
	if err := th.charge(int64(n)*buildSteps, int64(n)*entryCost(n)); err != nil {
		return nil, err
	}
	m := meter{th: th}
	out := mapOf(kvs, &m)
	return out, m.done()
}

// setOf builds the set of elems for a builtin (NewSet), charged as mapOf.
func (th *Thread) setOf(elems []Value) (*Set, error) {
	n := len(elems)
	if err := th.checkSize(n); err != nil {
		return nil, err
	}
	if err := th.charge(int64(n)*buildSteps, int64(n)*(entryCost(n)+2*elemBytes)); err != nil {
		return nil, err
	}
	m := meter{th: th}
	out := setOf(elems, &m)
	return out, m.done()
}

// isFatal reports whether err ends the run whatever RTFS code does: a limit
// or a cancellation.
func isFatal(err error) bool {
	var le *LimitError
	var fe *fatalError
	return errors.As(err, &le) || errors.As(err, &fe)
}
