package sse

import (
	"strconv"
	"strings"
)

// position is where a stream stands: base is the last event ID the server sent
// (the SSE "last event ID"), and k counts the chunks without an id field that
// followed it. A chunk's cursor is base when k is 0 and "base+k" otherwise, so
// an id-less chunk still gets a cursor that is the same on every replay.
type position struct {
	base string
	k    int
}

// cursor returns the position's cursor string.
func (p position) cursor() string {
	if p.k == 0 {
		return p.base
	}
	return p.base + "+" + strconv.Itoa(p.k)
}

// parseCursor is the inverse of position.cursor. A cursor whose text after the
// last '+' is not a canonical positive decimal number is a plain server id.
func parseCursor(c string) position {
	i := strings.LastIndexByte(c, '+')
	if i < 0 {
		return position{base: c}
	}
	digits := c[i+1:]
	k, err := strconv.Atoi(digits)
	if err != nil || k <= 0 || strconv.Itoa(k) != digits {
		return position{base: c}
	}
	return position{base: c[:i], k: k}
}

// replayFilter drops what a reconnect replays. After connecting with
// Last-Event-ID = from.base, the server sends the events after from.base; the
// first from.k id-less chunks among them were delivered before. A server that
// also resends the event with id from.base (an off-by-one replay) is handled the
// same way: that event has position {from.base, 0}. Filtering stops at the first
// chunk whose position is past from.
type replayFilter struct {
	from   position
	active bool
}

// newReplayFilter returns a filter for a connection made from position from.
// From the very start (the zero position) nothing was delivered, so nothing is
// filtered.
func newReplayFilter(from position) replayFilter {
	return replayFilter{from: from, active: from != position{}}
}

// seen reports whether the chunk at p was delivered before.
func (f *replayFilter) seen(p position) bool {
	if !f.active {
		return false
	}
	if p.base == f.from.base && p.k <= f.from.k {
		return true
	}
	f.active = false
	return false
}
