package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A stream outlives the compiler that compiled its program
// (docs/upgrading.md). Its durable truth is its program's source, its
// processor, its state and its cursor; the compiled code, the globals
// snapshot and the processor's function value in its definition record are
// a cache of what that compiler made. When the program recompiles to
// another hash (another compiler version, another prelude), recovery
// replays the program from its source to the call that started the stream,
// answering the host calls before it from the journal its origin record
// refers to (runjournal.go), and binds the processor found there. A stream stored by a
// release that kept no origin record comes back the same way when the
// answers of its program's host calls before its start are known (legacy
// replay below); otherwise it is unrecoverable, with the reason.

// OriginPrefix is the prefix of origin records, "origin/<stream id>". They
// live outside "stream/" so that a release that does not know them (and
// refuses unknown records of a stream) recovers the stream all the same.
const OriginPrefix = "origin/"

func OriginKey(id string) []byte { return []byte(OriginPrefix + id) }

// An OriginRecord says how a stream's processor came to be: the source hash
// of its program, the journal of the run that started it (up to the start
// call, or the whole run for a processor looked up in the run's final
// globals: a reference to the run's stored journal, or for a record of an
// earlier build a copy of it), and the history of its programs.
type OriginRecord struct {
	SourceHash string // hex SHA-256 of the program's source
	Journal    []byte // capabilities.Journal's Head (or, stored by earlier builds, its Snapshot); empty: none kept
	History    []ProgramVersion
}

func (r *OriginRecord) Encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 96+len(r.Journal)+64*len(r.History))}
	e.Str(r.SourceHash)
	e.Bytes(r.Journal)
	e.Uint(uint64(len(r.History)))
	for _, h := range r.History {
		e.Str(h.Hash)
		e.Str(h.File)
		e.Str(h.Processor)
		e.Str(h.Compiler)
		e.Int(h.AtEpochMs)
	}
	return persistence.EncodeRecord(kindOrigin, RecordVersion, e.B)
}

func (r *OriginRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, kindOrigin, func(d *bytecodec.Decoder) {
		r.SourceHash = d.Str("source hash")
		r.Journal = append([]byte(nil), d.Bytes("journal")...)
		n := d.Count("history count")
		for i := 0; i < n && d.Err() == nil; i++ {
			r.History = append(r.History, ProgramVersion{Hash: d.Str("hash"), File: d.Str("file"), Processor: d.Str("processor"),
				Compiler: d.Str("compiler"), AtEpochMs: d.Int("time")})
		}
	})
}

// SourceHash is the hex SHA-256 of a program's source: what checks the
// stored source when the program hash, which covers the compiler too,
// cannot.
func SourceHash(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// newOrigin is the origin record of a stream that starts with prog.
func newOrigin(prog *rtfs.Program, procName string, journal []byte, at time.Time) *OriginRecord {
	return &OriginRecord{
		SourceHash: SourceHash(prog.Source()),
		Journal:    journal,
		History:    []ProgramVersion{VersionOf(prog, procName, at)},
	}
}

// VersionOf is the ProgramVersion of prog, compiled by this build, with
// processor ProcName since at.
func VersionOf(prog *rtfs.Program, procName string, at time.Time) ProgramVersion {
	return ProgramVersion{Hash: prog.Hash(), File: prog.Name(), Processor: procName, Compiler: rtfs.CompileVersion(), AtEpochMs: at.UnixMilli()}
}

// HistoryOf returns the programs of a stream defined by d: those its origin
// record lists, or for a stream stored without one, the program it names
// (its compiler unknown).
func (r *OriginRecord) HistoryOf(d *DefRecord, programFile string) []ProgramVersion {
	if r != nil && len(r.History) > 0 {
		return r.History
	}
	if d.ProgHash == "" {
		return nil
	}
	return []ProgramVersion{{Hash: d.ProgHash, File: programFile, Processor: d.ProcName, AtEpochMs: d.Order / int64(time.Millisecond)}}
}

// LoadOrigin reads stream id's origin record; nil when the store has none
// (a stream stored by an older release, or one without a program).
func LoadOrigin(ctx context.Context, st persistence.Store, id string) (*OriginRecord, error) {
	key := OriginKey(id)
	data, err := st.Get(ctx, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("origin record: %w", err)
	}
	r := &OriginRecord{}
	if err := r.Decode(key, data); err != nil {
		return nil, err
	}
	return r, nil
}

// StartArgs is the map argument of a :mcp.stream.start call, or nil.
func StartArgs(c *rtfs.HostCall) *rtfs.Map {
	if len(c.Args) != 1 {
		return nil
	}
	m, _ := c.Args[0].(*rtfs.Map)
	return m
}

// StartAnswer is what :mcp.stream.start answers for stream id, started
// with endpoint: its handle.
func StartAnswer(id, endpoint string) rtfs.Value {
	return rtfs.MapOf(
		rtfs.Keyword("stream-id"), rtfs.String(id),
		rtfs.Keyword("endpoint"), rtfs.String(endpoint),
		rtfs.Keyword("status"), rtfs.Keyword(StateActive),
	)
}

// ErrUnknownAnswer is wrapped by a legacy replay's error for a host call
// whose answer the release that stored the run did not keep.
var ErrUnknownAnswer = errors.New("its answer was not kept by the release that stored the run")

// ErrCannotUpgrade is wrapped by the error of a swap that the stream or
// the new program does not allow; nothing changed.
var ErrCannotUpgrade = errors.New("the processor cannot be swapped")

// Reprogram gives stored stream id the program prog, in one commit of its
// records: define runs prog's top level, given the name of the stream's
// processor, and returns prog's globals and the name of the new processor.
// The stream's state, last output, result, initial state and config are
// carried over to prog's values; its cursor, journal and statistics stay
// as they are. It returns the program the stream had and has now (from is
// zero for a stream with no history), and the stream's state. The journal
// of the run that started the stream is let go. An ended stream, one with a
// Go processor, or a value that cannot be carried over is refused with
// ErrCannotUpgrade, a stream the store does not hold with
// ErrNoStoredStream; either way nothing changed.
func Reprogram(ctx context.Context, st persistence.Store, id string, prog *rtfs.Program, define func(stored string) (*rtfs.Globals, string, error)) (from, to ProgramVersion, state State, err error) {
	fail := func(err error) (ProgramVersion, ProgramVersion, State, error) { return from, to, state, err }

	dkey := StreamKey(id, SuffixDef)
	data, err := st.Get(ctx, dkey)
	if errors.Is(err, persistence.ErrNotFound) {
		return fail(ErrNoStoredStream)
	}
	if err != nil {
		return fail(err)
	}
	var d DefRecord
	if err := d.Decode(dkey, data); err != nil {
		return fail(err)
	}
	r, err := LoadProgress(ctx, st, id)
	if err != nil {
		return fail(err)
	}
	state = State(r.Status)
	if state.Terminal() {
		return fail(fmt.Errorf("%w: it has ended (%s)", ErrCannotUpgrade, state))
	}
	if d.ProcRef == ProcGo {
		return fail(fmt.Errorf("%w: its processor %s is a Go function", ErrCannotUpgrade, d.ProcName))
	}
	g, name, err := define(d.ProcName)
	if err != nil {
		return fail(err)
	}
	origin, err := LoadOrigin(ctx, st, id)
	if err != nil {
		return fail(err)
	}
	oldCodec, oldFile := storedCodec(ctx, st, d.ProgHash)
	history := origin.HistoryOf(&d, oldFile)
	if len(history) > 0 {
		from = history[len(history)-1]
	}
	newCodec := Codec{Prog: prog} // values already stored: no bound of a run applies
	recode := func(what string, b []byte) ([]byte, error) {
		if len(b) == 0 {
			return b, nil
		}
		v, err := oldCodec.Unmarshal(b)
		if err == nil {
			b, err = newCodec.Marshal(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: its %s cannot be carried over to %s (does it hold a function of the old program?): %w", ErrCannotUpgrade, what, prog.Name(), err)
		}
		return b, nil
	}
	for _, f := range []struct {
		what string
		b    *[]byte
	}{{"state", &r.State}, {"last output", &r.LastOut}, {"result", &r.Result}, {"initial state", &d.Initial}, {"config", &d.Config}} {
		if *f.b, err = recode(f.what, *f.b); err != nil {
			return fail(err)
		}
	}
	if d.Globals, err = g.MarshalBinary(); err != nil {
		return fail(err)
	}
	d.ProgHash, d.ProcName, d.ProcRef, d.ProcData = prog.Hash(), name, ProcByName, []byte(name)
	to = VersionOf(prog, name, time.Now())
	o := &OriginRecord{SourceHash: SourceHash(prog.Source()), Journal: (&capabilities.Journal{}).Snapshot(),
		History: append(append([]ProgramVersion(nil), history...), to)}

	b := &persistence.Batch{}
	b.Put(ProgramKey(prog.Hash()), (&ProgramRecord{Name: prog.Name(), Source: prog.Source()}).Encode())
	b.Put(dkey, d.Encode())
	b.Put(StreamKey(id, SuffixProg), r.Encode())
	b.Put(OriginKey(id), o.Encode())
	if err := st.Commit(ctx, b); err != nil {
		return fail(err)
	}
	if origin != nil {
		// The new origin keeps no journal of the run that started the
		// stream: the stream lets go of it. The upgrade is done either
		// way; a journal not released costs room only.
		_ = ReleaseRunJournal(ctx, st, origin.Journal, id)
	}
	return from, to, state, nil
}

// storedCodec returns the codec that decodes the values of a stream whose
// program is stored under hash, and the program's file name: that
// program's, when this build compiles it to that hash; else the plain
// value codec (values without functions: those of another compiler cannot
// be read, nor those of a program missing or not compiling any more).
func storedCodec(ctx context.Context, st persistence.Store, hash string) (Codec, string) {
	if hash == "" {
		return Codec{}, ""
	}
	key := ProgramKey(hash)
	data, err := st.Get(ctx, key)
	if err != nil {
		return Codec{}, ""
	}
	var rec ProgramRecord
	if err := rec.Decode(key, data); err != nil {
		return Codec{}, ""
	}
	prog, err := rtfs.Compile(rec.Name, rec.Source)
	if err != nil || prog.Hash() != hash {
		return Codec{}, rec.Name
	}
	return Codec{Prog: prog}, rec.Name
}
