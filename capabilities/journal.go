package capabilities

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// Recording a run's host calls, and replaying the run from its source
// (docs/continuations.md, "Replay"). RTFS code is deterministic between two
// host calls, so a program run is fully described by its source and the
// answers to its host calls, in order. A continuation is the fast way back
// into a suspended run, but it holds compiled code (function ids, pcs), which
// another compiler does not understand; a journal of the answers is the way
// back that any compiler understands: run the program again from its start
// and answer each host call from the journal instead of performing it.

// A Journal records the host calls of one program run and the answer that
// resumed the program from each: the capability, a digest of the arguments
// and the value or the error's message. Serve wraps a Server so that every
// answer is recorded. A Journal is used by the run's goroutine only (it is
// not safe for concurrent use); Snapshot's bytes may be handed anywhere.
// Recording a call costs a hash of its arguments (rtfs.Hash, cached by
// collections) and the encoding of its answer (rtfs.AppendValue).
//
// A journal is stored by appending: Unstored returns the entries recorded
// since the last Stored, which the caller writes once under the journal's
// ID, and Head returns a reference to the journal as it stands, whose size
// does not depend on how many entries it holds. So a run that stores its
// journal at every host call writes each answer once.
type Journal struct {
	buf     []byte         // the encoded entries
	n       int            // entries in buf
	pending *rtfs.HostCall // the call being served, between Serve's begin and record
	broken  string         // why the journal cannot replay the run; "" while it can

	id          string // names the stored entries; made by ID
	stored      int    // entries already stored (Stored)
	storedBytes int    // their length in buf
}

// Limits of a journal: a run that makes more host calls, or whose answers
// take more room, is not recorded further and cannot be replayed (its
// continuation still resumes it).
const (
	MaxJournalCalls = 100_000
	MaxJournalBytes = 8 << 20
)

// The journal's binary layout (Snapshot, DecodeJournal).
const (
	journalFormat = 1
	// headFormat is Head's: the entries are not in the bytes but stored
	// apart, named by the journal's id (Unstored).
	headFormat = 2
	// digestVersion names the digest of the arguments (argsDigest over
	// rtfs.Hash). A replay compares digests only when the record's
	// version is this one; otherwise it compares capabilities only.
	digestVersion = 1

	answerValue = 0 // the call answered a value
	answerError = 1 // the call failed: the error's message
	pendingNone = 0
	pendingCall = 1
)

// Serve returns serve wrapped so that j records each call and the answer
// that resumes the program from it, following Drive's rules: an answer or a
// thrown error is recorded, a Halt or an ended context (which end the run)
// is not. While serve runs, Snapshot includes the call being served as the
// pending one. A nil j returns serve unchanged.
func (j *Journal) Serve(serve Server) Server {
	if j == nil {
		return serve
	}
	return func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		j.pending = out.Call
		v, err := serve(ctx, out)
		j.pending = nil
		if resumes(ctx, err) {
			j.record(out.Call, v, err)
		}
		return v, err
	}
}

// Len returns how many answers j recorded.
func (j *Journal) Len() int {
	if j == nil {
		return 0
	}
	return j.n
}

// record appends one entry.
func (j *Journal) record(c *rtfs.HostCall, v rtfs.Value, err error) {
	if j.broken != "" {
		return
	}
	if j.n >= MaxJournalCalls || len(j.buf) >= MaxJournalBytes {
		j.broken = fmt.Sprintf("the run made more host calls (%d) or got longer answers (%d bytes) than a journal holds (%d calls, %d bytes)", j.n, len(j.buf), MaxJournalCalls, MaxJournalBytes)
		return
	}
	if cap(j.buf)-len(j.buf) < 512 {
		// Doubling: append grows a large slice by a quarter, which would
		// copy a long journal many more times.
		j.buf = slices.Grow(j.buf, max(len(j.buf), 512))
	}
	start := len(j.buf)
	j.buf = appendCall(j.buf, c)
	if err != nil {
		j.buf = append(j.buf, answerError)
		j.buf = bytecodec.AppendStr(j.buf, err.Error())
	} else {
		if v == nil {
			v = rtfs.Nil
		}
		j.buf = append(j.buf, answerValue)
		lenAt := len(j.buf)
		j.buf = append(j.buf, 0, 0, 0, 0) // the answer's length, fixed width, set below
		var eerr error
		if j.buf, eerr = rtfs.AppendValue(j.buf, v); eerr != nil {
			j.buf = j.buf[:start]
			j.broken = fmt.Sprintf("the answer of :%s at %s cannot be recorded: %v", c.Capability, c.Pos, eerr)
			return
		}
		binary.LittleEndian.PutUint32(j.buf[lenAt:], uint32(len(j.buf)-lenAt-4))
	}
	j.n++
}

func appendCall(b []byte, c *rtfs.HostCall) []byte {
	b = bytecodec.AppendStr(b, c.Capability)
	return binary.LittleEndian.AppendUint64(b, argsDigest(c.Args))
}

// argsDigest hashes a call's arguments in order. rtfs.Hash is deterministic
// and content-based (a map's order does not matter, a function hashes by
// kind), so the same arguments computed by another compiler hash alike.
func argsDigest(args []rtfs.Value) uint64 {
	h := uint64(0x9e3779b97f4a7c15) ^ uint64(len(args))
	for _, a := range args {
		h = bits.RotateLeft64(h, 7)*31 + rtfs.Hash(a)
	}
	return h
}

// Snapshot returns the journal as bytes (DecodeJournal reads them): every
// recorded answer and, while Serve serves a call, that call as the pending
// one, at which a replay stops. Cost: a copy of the entries.
func (j *Journal) Snapshot() []byte {
	if j == nil {
		return nil
	}
	b := make([]byte, 0, len(j.buf)+32+len(j.broken))
	b = append(b, journalFormat, digestVersion)
	b = binary.AppendUvarint(b, uint64(j.n))
	b = append(b, j.buf...)
	return j.appendTail(b)
}

// ID returns the name of j's entries in a store, made the first time (16
// random hex digits) unless j goes on from a stored journal
// (Record.Journal), whose name it keeps.
func (j *Journal) ID() string {
	if j.id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		j.id = hex.EncodeToString(b[:])
	}
	return j.id
}

// A JournalSegment is a run of consecutive entries of a journal, as a store
// keeps them: the caller writes Entries under (ID, First) and a reader
// gives back the segments of an ID in order of First (DecodeJournalFrom).
type JournalSegment struct {
	ID      string
	First   int    // the run's index of its first entry, from 0
	Calls   int    // how many entries it holds
	Entries []byte // their encoding; shared with the journal, not to be modified
}

// Unstored returns the entries j recorded since the last Stored (Calls 0
// when there are none). It costs no copy: the bytes are j's, which never
// change once recorded.
func (j *Journal) Unstored() JournalSegment {
	return JournalSegment{ID: j.ID(), First: j.stored, Calls: j.n - j.stored, Entries: j.buf[j.storedBytes:len(j.buf):len(j.buf)]}
}

// Stored records that s, returned by Unstored, is in the store: the next
// Unstored begins after it. A segment of another journal, or one that
// does not begin where j's stored entries end, changes nothing.
func (j *Journal) Stored(s JournalSegment) {
	if s.ID != j.id || s.First != j.stored || s.First+s.Calls > j.n {
		return
	}
	j.stored += s.Calls
	j.storedBytes += len(s.Entries)
}

// Serving reports whether j's run is serving a host call (Serve's server
// runs): the run goes on, and will record more.
func (j *Journal) Serving() bool { return j != nil && j.pending != nil }

// Head returns a reference to j as it stands, for DecodeJournalFrom: its
// ID, how many entries it holds, the pending call (as Snapshot) and why it
// is broken, without the entries, which must be stored (Unstored) by the
// time the reference is read. Its size does not depend on the number of
// entries: about 40 bytes and the pending call's capability.
func (j *Journal) Head() []byte {
	b := make([]byte, 0, 48+len(j.broken))
	b = append(b, headFormat, digestVersion)
	b = bytecodec.AppendStr(b, j.ID())
	b = binary.AppendUvarint(b, uint64(j.n))
	return j.appendTail(b)
}

// JournalHeadID returns the ID of the journal whose Head's bytes are b,
// and whether it holds entries (stored apart). Snapshot's bytes, and
// anything else, give false. It reads only the first fields.
func JournalHeadID(b []byte) (string, bool) {
	d := bytecodec.NewDecoder(b)
	if d.Byte("format") != headFormat {
		return "", false
	}
	d.Byte("digest version")
	id := d.Str("id")
	n := headCount(d)
	return id, d.Err() == nil && n > 0
}

// headCount reads a head's entry count, which no journal makes larger
// than MaxJournalCalls.
func headCount(d *bytecodec.Decoder) int {
	n := d.Uint("entry count")
	if n > MaxJournalCalls {
		d.Fail("entry count", fmt.Errorf("%d entries, a journal holds at most %d", n, MaxJournalCalls))
		return 0
	}
	return int(n)
}

// appendTail appends the pending call and the broken reason.
func (j *Journal) appendTail(b []byte) []byte {
	if j.pending != nil {
		b = append(b, pendingCall)
		b = appendCall(b, j.pending)
	} else {
		b = append(b, pendingNone)
	}
	return bytecodec.AppendStr(b, j.broken)
}

// A Record is a decoded journal: what a replay answers the run's host
// calls with. It is immutable after DecodeJournal and safe to share.
type Record struct {
	raw     []byte // the entries as encoded (Journal)
	entries []recordEntry
	pending *recordCall // the call the replay stops at; nil: the run's end
	broken  string
	digests bool   // the record's digests are comparable with this build's
	id      string // the stored entries' name (Head's bytes); "" for Snapshot's
}

type recordCall struct {
	capability string
	digest     uint64
}

type recordEntry struct {
	recordCall
	isErr bool
	msg   string // the error's message
	value []byte // the answer's encoding (rtfs.UnmarshalValue), decoded on replay
}

// Journal returns a Journal that goes on from r: it holds r's answers,
// and a run resumed at r's pending call records its next answers after
// them, so that its later snapshots describe the whole run. A record read
// from a Head goes on under the same ID, its entries already stored; one
// read from a Snapshot gets an ID of its own, nothing stored yet.
func (r *Record) Journal() *Journal {
	j := &Journal{buf: append([]byte(nil), r.raw...), n: len(r.entries), broken: r.broken, id: r.id}
	if r.id != "" {
		j.stored, j.storedBytes = j.n, len(j.buf)
	}
	return j
}

// NewBrokenJournal returns a Journal that records nothing and says why its
// run cannot be replayed (a run resumed from a continuation whose earlier
// answers were not kept).
func NewBrokenJournal(reason string) *Journal { return &Journal{broken: reason} }

// Recording returns next wrapped so that j records the answers it gives (a
// replay's answers, for a journal that goes on from the replayed run). A
// nil j returns next unchanged.
func (j *Journal) Recording(next ReplayFunc) ReplayFunc {
	if j == nil {
		return next
	}
	return func(i int, c *rtfs.HostCall) (ReplayStep, error) {
		step, err := next(i, c)
		if err == nil && c != nil && !step.Stop {
			j.record(c, step.Value, step.Err)
		}
		return step, err
	}
}

// Calls returns how many answered calls r holds.
func (r *Record) Calls() int { return len(r.entries) }

// Pending returns the capability of the call a replay of r stops at, ""
// when it runs to the end.
func (r *Record) Pending() string {
	if r.pending == nil {
		return ""
	}
	return r.pending.capability
}

// Broken says why r cannot replay its run ("" when it can).
func (r *Record) Broken() string { return r.broken }

// DecodeJournal decodes Snapshot's bytes. Truncated or corrupt input is an
// error naming the field and its byte offset; it never panics. Head's bytes
// are an error: they need the stored entries (DecodeJournalFrom).
func DecodeJournal(b []byte) (*Record, error) { return DecodeJournalFrom(b, nil) }

// DecodeJournalFrom decodes Snapshot's or Head's bytes. For Head's, it
// calls segments with the journal's ID and the number of entries the head
// holds; segments returns the journal's stored segments in order of First
// (more of them, or longer ones, than needed do no harm). The entries are
// taken from them in order from the first, each segment beginning where
// the one before ended. A segment missing is an error, as is damage, which
// names the field; it never panics.
func DecodeJournalFrom(b []byte, segments func(id string, calls int) ([]JournalSegment, error)) (*Record, error) {
	d := bytecodec.NewDecoder(b)
	format := d.Byte("format")
	if d.Err() == nil && format != journalFormat && format != headFormat {
		return nil, fmt.Errorf("decode journal: format version %d, this build reads %d and %d", format, journalFormat, headFormat)
	}
	r := &Record{digests: d.Byte("digest version") == digestVersion}
	var n int
	if format == headFormat {
		r.id = d.Str("id")
		n = headCount(d)
	} else {
		n = d.Count("entry count")
		start := d.Offset()
		r.entries = decodeEntries(d, n, 0)
		if d.Err() == nil {
			r.raw = b[start:d.Offset():d.Offset()]
		}
	}
	switch marker := d.Byte("pending marker"); {
	case d.Err() != nil, marker == pendingNone:
	case marker == pendingCall:
		c := decodeCall(d)
		r.pending = &c
	default:
		d.Fail("pending marker", fmt.Errorf("unknown marker %d", marker))
	}
	r.broken = d.Str("broken reason")
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("decode journal: %w", err)
	}
	if format == headFormat {
		if err := r.readSegments(n, segments); err != nil {
			return nil, fmt.Errorf("decode journal %s: %w", r.id, err)
		}
	}
	return r, nil
}

// readSegments reads the first n entries of journal r.id from its stored
// segments.
func (r *Record) readSegments(n int, segments func(id string, calls int) ([]JournalSegment, error)) error {
	if n == 0 {
		return nil
	}
	if segments == nil {
		return fmt.Errorf("it refers to %d stored entries, and none were read", n)
	}
	segs, err := segments(r.id, n)
	if err != nil {
		return err
	}
	var raw []byte
	r.entries = make([]recordEntry, 0, n)
	for _, s := range segs {
		at := len(r.entries)
		if at == n {
			break
		}
		if s.First < at {
			continue // written by a run that went on from an earlier point, and since replaced
		}
		if s.First > at {
			return fmt.Errorf("the stored entries from %d are missing (a segment begins at %d)", at, s.First)
		}
		d := bytecodec.NewDecoder(s.Entries)
		r.entries = append(r.entries, decodeEntries(d, min(s.Calls, n-at), at)...)
		if d.Err() != nil {
			return fmt.Errorf("segment at %d: %w", s.First, d.Err())
		}
		raw = append(raw, s.Entries[:d.Offset()]...)
	}
	if len(r.entries) < n {
		return fmt.Errorf("it refers to %d entries, the store holds %d", n, len(r.entries))
	}
	r.raw = raw[:len(raw):len(raw)]
	return nil
}

// decodeEntries reads n entries, the first being the run's entry first.
func decodeEntries(d *bytecodec.Decoder, n, first int) []recordEntry {
	entries := make([]recordEntry, 0, min(n, 1024))
	for i := 0; i < n && d.Err() == nil; i++ {
		e := recordEntry{recordCall: decodeCall(d)}
		switch kind := d.Byte("answer kind"); {
		case d.Err() != nil:
		case kind == answerValue:
			e.value = d.Next("answer", int(d.Uint32("answer length")))
		case kind == answerError:
			e.isErr, e.msg = true, d.Str("error message")
		default:
			d.Fail("answer kind", fmt.Errorf("entry %d: unknown kind %d", first+i, kind))
		}
		entries = append(entries, e)
	}
	return entries
}

// decodeCall reads what appendCall wrote.
func decodeCall(d *bytecodec.Decoder) recordCall {
	return recordCall{capability: d.Str("capability"), digest: d.Uint64("arguments digest")}
}

// A ReplayStep is how a replay answers one host call of the run: Stop
// ends the replay with the run suspended at the call; otherwise the run
// resumes with Value, or with Err thrown into it at the call.
type ReplayStep struct {
	Stop  bool
	Value rtfs.Value
	Err   error
}

// A ReplayFunc answers the i-th host call (from 0) of a replayed run, c. It
// is called once more with c nil when the run ends, to say whether the end
// is expected (a nil error) or not. An error ends the replay.
type ReplayFunc func(i int, c *rtfs.HostCall) (ReplayStep, error)

// Replay runs prog from its start on th, answering its host calls with
// next instead of performing them, and returns the outcome at which next
// said Stop (suspended at that call, to be resumed or served as usual), or
// the run's final outcome. It fails with next's error, or the run's.
// Nothing outside th is touched: a replay has no effects.
func Replay(ctx context.Context, th *rtfs.Thread, prog *rtfs.Program, next ReplayFunc) (rtfs.Outcome, error) {
	out, err := th.Run(ctx, prog)
	for i := 0; err == nil; i++ {
		if out.Call == nil {
			if _, nerr := next(i, nil); nerr != nil {
				return out, nerr
			}
			return out, nil
		}
		step, nerr := next(i, out.Call)
		switch {
		case nerr != nil:
			return out, nerr
		case step.Stop:
			return out, nil
		case step.Err != nil:
			out, err = th.ResumeError(ctx, out.Continuation, step.Err)
		default:
			out, err = th.Resume(ctx, out.Continuation, step.Value)
		}
	}
	return out, err
}

// A NondeterminismError says that a replayed run did not make the host
// calls its record holds: the program, the compiler or a builtin behaves
// differently from the run that was recorded. The replay stops there; the
// stored run is left as it was.
type NondeterminismError struct {
	// Index is the host call's number in the run, from 0.
	Index int
	// Recorded is the call the record holds ("" when the record ended),
	// Got the one the replay made ("" when the run ended).
	Recorded, Got string
	// SameCapability says that the capabilities matched but the
	// arguments did not.
	SameCapability bool
	// Pos is where the replay made the call (zero at the run's end).
	Pos syntax.Pos
}

// Error says which call differed, and how.
func (e *NondeterminismError) Error() string {
	switch {
	case e.Got == "":
		return fmt.Sprintf("non-deterministic replay: the run ended after %d host calls, the record holds more (:%s next)", e.Index, e.Recorded)
	case e.Recorded == "":
		return fmt.Sprintf("non-deterministic replay: host call %d, :%s at %s, is beyond the record's end", e.Index+1, e.Got, e.Pos)
	case e.SameCapability:
		return fmt.Sprintf("non-deterministic replay: host call %d, :%s at %s, has other arguments than the recorded one", e.Index+1, e.Got, e.Pos)
	}
	return fmt.Sprintf("non-deterministic replay: host call %d is :%s at %s, the record holds :%s", e.Index+1, e.Got, e.Pos, e.Recorded)
}

// ErrBrokenJournal is wrapped by a replay's error when the record could not
// hold the whole run (Record.Broken says why).
var ErrBrokenJournal = errors.New("the run's journal is incomplete")

// Next is r's ReplayFunc: it answers the recorded calls in order, checking
// each against the record (capability, and the digest of its arguments),
// then stops at the pending call (which must match too), or expects the
// run's end when there is none. A mismatch is a *NondeterminismError.
func (r *Record) Next(i int, c *rtfs.HostCall) (ReplayStep, error) {
	if r.broken != "" && i >= len(r.entries) {
		return ReplayStep{}, fmt.Errorf("%w: %s", ErrBrokenJournal, r.broken)
	}
	var want *recordCall
	switch {
	case i < len(r.entries):
		want = &r.entries[i].recordCall
	case i == len(r.entries):
		want = r.pending
	}
	if c == nil {
		if want == nil {
			return ReplayStep{}, nil
		}
		return ReplayStep{}, &NondeterminismError{Index: i, Recorded: want.capability}
	}
	if want == nil {
		return ReplayStep{}, &NondeterminismError{Index: i, Got: c.Capability, Pos: c.Pos}
	}
	if want.capability != c.Capability {
		return ReplayStep{}, &NondeterminismError{Index: i, Recorded: want.capability, Got: c.Capability, Pos: c.Pos}
	}
	if r.digests && want.digest != argsDigest(c.Args) {
		return ReplayStep{}, &NondeterminismError{Index: i, Recorded: want.capability, Got: c.Capability, SameCapability: true, Pos: c.Pos}
	}
	if i == len(r.entries) {
		return ReplayStep{Stop: true}, nil
	}
	e := &r.entries[i]
	if e.isErr {
		return ReplayStep{Err: errors.New(e.msg)}, nil
	}
	v, err := rtfs.UnmarshalValue(e.value)
	if err != nil {
		return ReplayStep{}, fmt.Errorf("the recorded answer of host call %d (:%s): %w", i+1, e.capability, err)
	}
	return ReplayStep{Value: v}, nil
}
