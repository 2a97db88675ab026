package provider

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

// originPrefix is the prefix of origin records, "origin/<stream id>". They
// live outside "stream/" so that a release that does not know them (and
// refuses unknown records of a stream) recovers the stream all the same.
const originPrefix = "origin/"

func originKey(id string) []byte { return []byte(originPrefix + id) }

// An originRecord says how a stream's processor came to be: the source hash
// of its program, the journal of the run that started it (up to the start
// call, or the whole run for a processor looked up in the run's final
// globals: a reference to the run's stored journal, or for a record of an
// earlier build a copy of it), and the history of its programs.
type originRecord struct {
	sourceHash string // hex SHA-256 of the program's source
	journal    []byte // capabilities.Journal's Head (or, stored by earlier builds, its Snapshot); empty: none kept
	history    []ProgramVersion
}

func (r *originRecord) encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 96+len(r.journal)+64*len(r.history))}
	e.Str(r.sourceHash)
	e.Bytes(r.journal)
	e.Uint(uint64(len(r.history)))
	for _, h := range r.history {
		e.Str(h.Hash)
		e.Str(h.File)
		e.Str(h.Processor)
		e.Str(h.Compiler)
		e.Int(h.AtEpochMs)
	}
	return persistence.EncodeRecord(kindOrigin, recordVersion, e.B)
}

func (r *originRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindOrigin, func(d *bytecodec.Decoder) {
		r.sourceHash = d.Str("source hash")
		r.journal = append([]byte(nil), d.Bytes("journal")...)
		n := d.Count("history count")
		for i := 0; i < n && d.Err() == nil; i++ {
			r.history = append(r.history, ProgramVersion{Hash: d.Str("hash"), File: d.Str("file"), Processor: d.Str("processor"),
				Compiler: d.Str("compiler"), AtEpochMs: d.Int("time")})
		}
	})
}

// sourceHash is the hex SHA-256 of a program's source: what checks the
// stored source when the program hash, which covers the compiler too,
// cannot.
func sourceHash(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// newOrigin is the origin record of a stream that starts with prog.
func newOrigin(prog *rtfs.Program, procName string, journal []byte, at time.Time) *originRecord {
	return &originRecord{
		sourceHash: sourceHash(prog.Source()),
		journal:    journal,
		history:    []ProgramVersion{versionOf(prog, procName, at)},
	}
}

// versionOf is the ProgramVersion of prog, compiled by this build, with
// processor procName since at.
func versionOf(prog *rtfs.Program, procName string, at time.Time) ProgramVersion {
	return ProgramVersion{Hash: prog.Hash(), File: prog.Name(), Processor: procName, Compiler: rtfs.CompileVersion(), AtEpochMs: at.UnixMilli()}
}

// history returns the programs of a stream defined by d: those its origin
// record lists, or for a stream stored without one, the program it names
// (its compiler unknown).
func (r *originRecord) historyOf(d *defRecord, programFile string) []ProgramVersion {
	if r != nil && len(r.history) > 0 {
		return r.history
	}
	if d.progHash == "" {
		return nil
	}
	return []ProgramVersion{{Hash: d.progHash, File: programFile, Processor: d.procName, AtEpochMs: d.order / int64(time.Millisecond)}}
}

// loadOrigin reads stream id's origin record; nil when the store has none
// (a stream stored by an older release, or one without a program).
func loadOrigin(ctx context.Context, st persistence.Store, id string) (*originRecord, error) {
	key := originKey(id)
	data, err := st.Get(ctx, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("origin record: %w", err)
	}
	r := &originRecord{}
	if err := r.decode(key, data); err != nil {
		return nil, err
	}
	return r, nil
}

// replayProcessor rebinds the processor of stream l, whose program prog
// was recompiled by this build to another hash than the stored one: it
// replays prog to the call that started the stream (or to the end of the
// run whose final globals hold the processor) and takes the processor and
// the globals there. The stored globals and function value are another
// compiler's and are not read.
func (ld *loader) replayProcessor(ctx context.Context, l *loaded, prog *rtfs.Program, origin *originRecord) (processor, error) {
	d := l.def
	if origin != nil && origin.sourceHash != "" && origin.sourceHash != sourceHash(prog.Source()) {
		return nil, fmt.Errorf("the stored source of %s does not match its hash %s: it is damaged", prog.Name(), origin.sourceHash)
	}
	var next capabilities.ReplayFunc
	how := "legacy replay (the release that stored it kept no journal of its host calls)"
	if origin != nil && len(origin.journal) > 0 {
		rec, err := loadRunJournal(ctx, ld.ps.store, originKey(l.id), origin.journal, &ld.ps.journals)
		if err != nil {
			return nil, err
		}
		next, how = rec.Next, "replay of its journal"
	} else {
		next = LegacyReplay(l.id, d.endpoint, func(c *rtfs.HostCall) bool { return startsStream(c, l.id, d.endpoint) })
	}
	out, err := capabilities.Replay(ctx, rtfs.NewThread(ld.set.opts.Limits), prog, next)
	if err != nil {
		return nil, fmt.Errorf("program %s was compiled by another compiler; this one (%s) could not come back to the stream's start by %s: %w", prog.Name(), rtfs.CompileVersion(), how, err)
	}
	var fnArg rtfs.Value
	switch {
	case out.Call != nil:
		fnArg = field(startArgs(out.Call), "processor")
	case d.procRef == procByName:
		fnArg = rtfs.String(d.procData)
	default:
		return nil, fmt.Errorf("program %s was compiled by another compiler, and its processor %s is a function value that the run's end does not name", prog.Name(), d.procName)
	}
	fn, _, err := resolveProcessor(fnArg, out.Globals)
	if err != nil {
		return nil, fmt.Errorf("program %s, replayed: %w", prog.Name(), err)
	}
	ld.env.log.Info("stream's program recompiled by this compiler", "stream", l.id, "program", prog.Name(), "compiler", rtfs.CompileVersion(), "by", how)
	return newRTFSProcessor(d.procName, fn, out.Globals, ld.set.opts.Limits, ld.set.opts.Capabilities), nil
}

// startArgs is the map argument of a :mcp.stream.start call, or nil.
func startArgs(c *rtfs.HostCall) *rtfs.Map {
	if len(c.Args) != 1 {
		return nil
	}
	m, _ := c.Args[0].(*rtfs.Map)
	return m
}

// startsStream reports whether c is the :mcp.stream.start call that
// started stream id of endpoint: it names the id, or names none and has
// that endpoint (the id was generated).
func startsStream(c *rtfs.HostCall, id, endpoint string) bool {
	if c.Capability != CapStart {
		return false
	}
	m := startArgs(c)
	if given := stringField(m, "stream-id"); given != "" {
		return given == id
	}
	return endpoint != "" && stringField(m, "endpoint") == endpoint
}

// startAnswer is what :mcp.stream.start answers for stream id, started
// with endpoint: its handle.
func startAnswer(id, endpoint string) rtfs.Value {
	return rtfs.MapOf(
		rtfs.Keyword("stream-id"), rtfs.String(id),
		rtfs.Keyword("endpoint"), rtfs.String(endpoint),
		rtfs.Keyword("status"), rtfs.Keyword(StateActive),
	)
}

// ErrUnknownAnswer is wrapped by a legacy replay's error for a host call
// whose answer the release that stored the run did not keep.
var ErrUnknownAnswer = errors.New("its answer was not kept by the release that stored the run")

// LegacyReplay returns the capabilities.ReplayFunc that replays a program
// run stored by a release that kept no journal of its host calls (0.2.0
// and earlier; docs/upgrading.md). It knows the answers every such release
// gave: nil for println and log (:ccos.io.log), and, for the first
// :mcp.stream.start that started stream id (of endpoint), the stream's
// handle. The replay ends at the first call stop accepts, or at the run's
// end. Any other call fails with an error wrapping ErrUnknownAnswer that
// names it. It is for one replay (it remembers the start it answered).
func LegacyReplay(id, endpoint string, stop func(c *rtfs.HostCall) bool) capabilities.ReplayFunc {
	started := false
	return func(i int, c *rtfs.HostCall) (capabilities.ReplayStep, error) {
		switch {
		case c == nil:
			return capabilities.ReplayStep{}, nil
		case stop(c):
			return capabilities.ReplayStep{Stop: true}, nil
		case c.Capability == capabilities.LogCapability:
			return capabilities.ReplayStep{Value: rtfs.Nil}, nil
		case !started && startsStream(c, id, endpoint):
			started = true
			return capabilities.ReplayStep{Value: startAnswer(id, stringField(startArgs(c), "endpoint"))}, nil
		}
		return capabilities.ReplayStep{}, fmt.Errorf("host call %d, :%s at %s: %w", i+1, c.Capability, c.Pos, ErrUnknownAnswer)
	}
}
