package stream

import (
	"time"
)

// Dead letters: the chunks a stream set aside (Skip, or :on-error {:then
// :skip}) with why. Each is stored with the stream, in the same commit as
// the progress record whose cursor passes it, so that a chunk is either
// still to process or a dead letter, never neither nor both; they survive
// restarts and upgrades, and go when the stream is removed.

// A DeadLetter is a chunk a stream set aside: its :seq, the chunk and its
// metadata as the processor got them, and the failure that set it aside.
// It is a copy the caller owns.
type DeadLetter struct {
	StreamID string    `json:"stream-id"`
	Seq      int64     `json:"seq"`
	Chunk    JSONValue `json:"chunk"`
	Metadata JSONValue `json:"metadata"`
	// Kind is the Failure's kind (FailureProcessor).
	Kind     string `json:"kind" rtfs:"keyword"`
	Error    string `json:"error"`
	Attempts int64  `json:"attempts"`
	// At is when the chunk was set aside; AtEpochMs the same in Unix
	// milliseconds (the JSON and RTFS form).
	At        time.Time `json:"-"`
	AtEpochMs int64     `json:"at-epoch-ms"`
}

// DeadLettersInfo is inspect's :dead-letters: how many chunks the stream
// set aside, and the last few (at most deadLettersShown, oldest first).
type DeadLettersInfo struct {
	Count int64        `json:"count"`
	Last  []DeadLetter `json:"last"`
}

// deadLettersShown is how many dead letters inspect shows; DeadLetters
// lists them all.
const deadLettersShown = 5

// maxMemDeadLetters bounds the dead letters a stream without a store keeps
// (the newest); a store keeps every one.
const maxMemDeadLetters = 1000

// deadLetters is a stream's dead letters in memory, guarded by its mu.
type deadLetters struct {
	count int64
	last  []DeadLetter // the newest: deadLettersShown, or maxMemDeadLetters without a store
}

func (d *deadLetters) Add(dl DeadLetter, keep int) {
	d.count++
	if len(d.last) >= keep {
		d.last = append(d.last[:0], d.last[len(d.last)-keep+1:]...)
	}
	d.last = append(d.last, dl)
}

// Info is inspect's :dead-letters.
func (d *deadLetters) Info() DeadLettersInfo {
	n := min(len(d.last), deadLettersShown)
	return DeadLettersInfo{Count: d.count, Last: append([]DeadLetter{}, d.last[len(d.last)-n:]...)}
}

// deadLetterLocked sets chunk it aside for failure f: it becomes a dead
// letter (stored with the next progress record), and the stream is done
// with it as with a processed chunk: the cursor passes it and its journal
// entry may go.
func (s *Stream) deadLetterLocked(it *Item, f *Failure) {
	now := time.Now()
	bound := s.Env.OutputLimit
	it.shown = true // kept: its map is never reused
	mb := NewMetaBuilder(s.idVal, s.epVal)
	dl := DeadLetter{StreamID: s.ID, Seq: it.Number(), Chunk: JSONValue{it.Chunk, bound}, Metadata: JSONValue{mb.Build(it), bound},
		Kind: f.Kind, Error: f.Error, Attempts: f.Attempts, At: now, AtEpochMs: now.UnixMilli()}
	keep := maxMemDeadLetters
	if s.Ps != nil {
		keep = deadLettersShown
		s.Ps.deadLetterLocked(dl)
	}
	s.Dead.Add(dl, keep)
	s.Cursor = it.cursor()
	if it.Seq >= s.procNext {
		s.procNext = it.Seq + 1
	}
	if it.journaled {
		s.Ps.processedLocked(it.Seq)
	}
	s.obs.DeadLettered(dl.Seq)
	s.noteLocked(TimelineEvent{Kind: "dead-letter", Chunk: dl.Seq, Message: f.Error})
	s.Env.Log.Warn("chunk set aside as a dead letter", "stream", s.ID, "chunk", dl.Seq, "err", f.Error)
}

// KeptDeadLetters returns the newest maxMemDeadLetters dead letters the
// stream kept, oldest first (a stream without a store).
func (s *Stream) KeptDeadLetters() []DeadLetter {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return append([]DeadLetter(nil), s.Dead.last...)
}
