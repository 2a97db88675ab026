package host

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The host's records (the provider uses kinds below 16). A parked record
// holds a program suspended on :mcp.stream.await; a resumed record the
// outcome of a program that Recover resumed.
const (
	kindParked  persistence.RecordKind = 16
	kindResumed persistence.RecordKind = 17
	hostVersion                        = 1
	// resumedVersion is the version of a resumed record: 2 adds the
	// program's value in the rtfs value codec; version 1 (earlier builds)
	// has only its printed form.
	resumedVersion = 2
	parkedPrefix   = "host/parked/"
	resumedPrefix  = "host/resumed/"
	// journalPrefix keys the journal of a parked program's run, kept
	// beside its parked record so that a release that does not know it
	// reads the parked record all the same: a reference to the run's
	// stored journal, ending with its await (capabilities.Journal.Head,
	// provider.PutRunJournal), or, written by earlier builds, a copy of it
	// (Journal.Snapshot).
	journalPrefix = "host/journal/"
)

// A run is one program run: Run's, or a parked program's that Recover
// resumed. parked says that its record is in the store; journal records
// its host calls (nil when nothing needs them: no store, no caller's
// journal).
type run struct {
	id      string
	prog    *rtfs.Program
	parked  bool
	opts    RunOptions
	journal *capabilities.Journal
}

func newRun(prog *rtfs.Program) *run {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &run{id: hex.EncodeToString(b[:]), prog: prog}
}

// parkedRecord is a program parked on :mcp.stream.await.
type parkedRecord struct {
	name, hash string
	source     []byte
	streamID   string
	parkedAt   int64 // unix ms
	cont       []byte
}

func (r *parkedRecord) encode() []byte {
	var b []byte
	for _, f := range [][]byte{[]byte(r.name), []byte(r.hash), r.source, []byte(r.streamID), r.cont} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendVarint(b, r.parkedAt)
	return persistence.EncodeRecord(kindParked, hostVersion, b)
}

func (r *parkedRecord) decode(key, data []byte) error {
	var name, hash, src, id []byte
	fields := []*[]byte{&name, &hash, &src, &id, &r.cont}
	return decodeFields(key, data, kindParked, hostVersion, func(uint64) []*[]byte { return fields }, &r.parkedAt, func() {
		r.name, r.hash, r.source, r.streamID = string(name), string(hash), src, string(id)
	})
}

// ResumedProgram is the outcome of a program that Recover resumed after its
// awaited stream ended. Exactly one of Value and Err is set: Value is the
// program's value in printed form (cut at 1 MiB), Err the message of the
// error that ended it. Result is the value itself, as the program returned
// it; it is nil when the program failed, when its value cannot be stored
// (it holds a function, or its encoding is larger than the host's output
// limit) and in the records of builds that stored only the printed form.
type ResumedProgram struct {
	RunID      string
	Program    string // the program's file name
	StreamID   string // the stream it awaited
	Value      string
	Result     rtfs.Value
	Err        string
	FinishedAt time.Time
}

// encodeResumed encodes r as a resumed record; result is r.Result in the
// rtfs value codec (empty: none).
func encodeResumed(r ResumedProgram, result []byte) []byte {
	var b []byte
	for _, f := range [][]byte{[]byte(r.Program), []byte(r.StreamID), []byte(r.Value), []byte(r.Err), result} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendVarint(b, r.FinishedAt.UnixMilli())
	return persistence.EncodeRecord(kindResumed, resumedVersion, b)
}

// decodeResumed reads a resumed record of either version.
func decodeResumed(key, data []byte) (ResumedProgram, error) {
	r := ResumedProgram{RunID: strings.TrimPrefix(string(key), resumedPrefix)}
	var prog, stream, val, msg, result []byte
	var at int64
	err := decodeFields(key, data, kindResumed, resumedVersion, func(version uint64) []*[]byte {
		if version < 2 {
			return []*[]byte{&prog, &stream, &val, &msg}
		}
		return []*[]byte{&prog, &stream, &val, &msg, &result}
	}, &at, func() {
		r.Program, r.StreamID, r.Value, r.Err = string(prog), string(stream), string(val), string(msg)
		r.FinishedAt = time.UnixMilli(at)
	})
	if err != nil || len(result) == 0 {
		return r, err
	}
	if r.Result, err = rtfs.UnmarshalValue(result); err != nil {
		return r, &persistence.CorruptRecordError{Key: append([]byte(nil), key...), Reason: "the program's value does not decode", Err: err}
	}
	return r, nil
}

// decodeFields reads length-prefixed fields (those fieldsOf gives for the
// record's version) and a final varint from a host record of a version up
// to max, then calls set. Damage is a *persistence.CorruptRecordError and a
// newer version a *persistence.UnknownVersionError, both naming key.
func decodeFields(key, data []byte, kind persistence.RecordKind, max uint64, fieldsOf func(version uint64) []*[]byte, last *int64, set func()) error {
	version, b, err := persistence.DecodeRecord(key, data, kind, max)
	if err != nil {
		return err
	}
	fields := fieldsOf(version)
	corrupt := func(what string) error {
		return &persistence.CorruptRecordError{Key: append([]byte(nil), key...), Reason: what}
	}
	for i, f := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return corrupt(fmt.Sprintf("field %d truncated", i))
		}
		*f = append([]byte(nil), b[k:k+int(n)]...)
		b = b[k+int(n):]
	}
	v, k := binary.Varint(b)
	if k <= 0 || k != len(b) {
		return corrupt("bad time stamp")
	}
	*last = v
	set()
	return nil
}

// park stores the program of r as parked on the await call out is
// suspended at, so that Recover resumes it after a restart.
func (h *Host) park(ctx context.Context, r *run, out rtfs.Outcome) error {
	cont, err := out.Continuation.MarshalBinaryOpts(rtfs.EncodeOptions{MaxBytes: h.limits.OutputLimit()})
	if err != nil {
		return fmt.Errorf("encode the parked program: %w", err)
	}
	rec := parkedRecord{name: r.prog.Name(), hash: r.prog.Hash(), source: r.prog.Source(),
		streamID: awaitedStream(out.Call.Args), parkedAt: time.Now().UnixMilli(), cont: cont}
	if h.cl != nil {
		if err := h.cl.Claim(ctx, runOwner(r.id)); err != nil {
			return fmt.Errorf("persist the parked program: %w", err)
		}
	}
	var b persistence.Batch
	b.Put([]byte(parkedPrefix+r.id), rec.encode())
	stored := func() {}
	if r.journal != nil {
		var head []byte
		head, stored = provider.PutRunJournal(&b, r.journal, "")
		b.Put([]byte(journalPrefix+r.id), head)
	}
	if err := h.store.Commit(ctx, &b); err != nil {
		return fmt.Errorf("persist the parked program: %w", err)
	}
	stored()
	r.parked = true
	return nil
}

// unpark removes r's parked record, writing the outcome of a resumed program
// in the same batch, and lets go of the run's stored journal (which goes
// when no stream it started refers to it). Failures are logged: the program
// has ended either way.
func (h *Host) unpark(r *run, outcome *ResumedProgram) {
	if !r.parked {
		h.releaseJournal(r)
		return
	}
	var b persistence.Batch
	b.Delete([]byte(parkedPrefix + r.id))
	b.Delete([]byte(journalPrefix + r.id))
	if outcome != nil {
		var result []byte
		if outcome.Result != nil {
			var err error
			if result, err = rtfs.MarshalValueOpts(outcome.Result, rtfs.EncodeOptions{MaxBytes: h.limits.OutputLimit()}); err != nil {
				h.log.Warn("resumed program's value stored in printed form only", "run", r.id, "err", err)
				result = nil
			}
		}
		b.Put([]byte(resumedPrefix+r.id), encodeResumed(*outcome, result))
	}
	if err := h.store.Commit(context.Background(), &b); err != nil {
		h.log.Error("parked program record not removed", "run", r.id, "err", err)
		return
	}
	r.parked = false
	h.releaseJournal(r)
	if h.cl != nil {
		_ = h.cl.Release(context.Background(), runOwner(r.id), true)
	}
}

// releaseJournal drops the ended run r's own reference to its stored
// journal (provider.ReleaseRunJournal), if it stored one.
func (h *Host) releaseJournal(r *run) {
	if h.store == nil || r.journal == nil || r.journal.Unstored().First == 0 {
		return
	}
	if err := h.prov.ReleaseRunJournal(context.Background(), r.journal.Head(), ""); err != nil {
		h.log.Error("the ended run's journal not released", "run", r.id, "err", err)
	}
}

// awaitedStream reads :stream-id from an await call's arguments.
func awaitedStream(args []rtfs.Value) string {
	if len(args) == 0 {
		return ""
	}
	if m, ok := args[0].(*rtfs.Map); ok {
		for _, k := range []rtfs.Value{rtfs.Keyword("stream-id"), rtfs.String("stream-id")} {
			if v, ok := m.Get(k); ok {
				if s, ok := v.(rtfs.String); ok {
					return string(s)
				}
			}
		}
	}
	return ""
}

// interrupted reports whether an await ended because the host is closing
// (ctx ended, or the provider closed under the stream), not because the
// stream ended: the program then stays parked.
func interrupted(ctx context.Context, err error) bool {
	var se *provider.StreamError
	return ctx.Err() != nil || (errors.As(err, &se) && !se.State.Terminal())
}

// Recover recovers the provider's persisted streams (provider.Recover) and
// resumes every program that was parked on :mcp.stream.await when the host
// stopped: each continues, on a goroutine of the host, once its stream
// ends, with the stream's result (or the error of a failed or cancelled
// stream, which the program can catch). A timeout of the await counts again
// from the recovery. The value of a resumed program, or its error, is logged
// and stored; ResumedPrograms lists them. Wait waits for resumed programs
// too; Close stops them (they stay parked for the next Recover).
//
// With manual connect (the provider's AutoConnect is false, as for
// rtfshost inspect) only the streams are loaded, and no program resumes.
//
// Errors of streams and parked records that cannot be recovered (corrupt,
// unknown version, a program that does not compile) are logged and returned
// joined; everything else is recovered. Recover fails at once without a
// store.
func (h *Host) Recover(ctx context.Context) error {
	if h.store == nil {
		return errors.New("host: Recover: no store is configured (Options.Store is nil)")
	}
	errs := []error{h.prov.Recover(ctx)}
	if !h.prov.AutoConnect() {
		// Manual connect: streams are loaded for inspection only, so
		// nothing may run; parked programs stay parked.
		return errors.Join(errs...)
	}
	progs := map[string]*rtfs.Program{}
	err := h.store.Scan(ctx, []byte(parkedPrefix), func(key, value []byte) error {
		if err := h.resumeRecord(progs, key, value); errors.Is(err, cluster.ErrOwned) {
			return nil // another host runs it
		} else if err != nil {
			h.log.Error("parked program not resumed", "key", string(key), "err", err)
			errs = append(errs, fmt.Errorf("host: resume parked program %q: %w", key, err))
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("host: Recover: %w", err))
	}
	return errors.Join(errs...)
}

// resumeRecord decodes one parked record and resumes its program.
func (h *Host) resumeRecord(progs map[string]*rtfs.Program, key, value []byte) error {
	var rec parkedRecord
	if err := rec.decode(key, value); err != nil {
		return err
	}
	prog := progs[rec.hash]
	if prog == nil {
		var err error
		if prog, err = rtfs.Compile(rec.name, rec.source); err != nil {
			return fmt.Errorf("recompile %s: %w", rec.name, err)
		}
		progs[rec.hash] = prog
	}
	r := &run{id: strings.TrimPrefix(string(key), parkedPrefix), prog: prog, parked: true}
	if h.cl != nil {
		if err := h.cl.Claim(h.ctx, runOwner(r.id)); err != nil {
			return err
		}
	}
	out, err := h.unparkedOutcome(r, &rec)
	if err != nil {
		if h.cl != nil {
			_ = h.cl.Release(h.ctx, runOwner(r.id), false) // another host may manage
		}
		return err
	}
	if !h.programs.add() {
		return errors.New("the host is closed")
	}
	go h.resumeParked(r, rec.streamID, out)
	return nil
}

// unparkedOutcome returns the outcome at which parked run r waits on its
// await, and sets r's journal to go on from the stored one. A program
// compiled to the stored hash resumes from its continuation; one that this
// build compiles to another hash (another compiler or prelude) is replayed
// from its source, its host calls answered from its stored journal, or,
// for a program stored by a release that kept none, from what is known of
// its calls (provider.LegacyReplay). A replay that goes another way than
// the stored run fails with a capabilities.NondeterminismError: the
// program stays parked.
func (h *Host) unparkedOutcome(r *run, rec *parkedRecord) (rtfs.Outcome, error) {
	jdata, err := h.store.Get(h.ctx, []byte(journalPrefix+r.id))
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		jdata = nil
	case err != nil:
		return rtfs.Outcome{}, fmt.Errorf("read the program's journal: %w", err)
	}
	var jrec *capabilities.Record
	if jdata != nil {
		if jrec, err = provider.LoadRunJournal(h.ctx, h.store, []byte(journalPrefix+r.id), jdata); err != nil {
			return rtfs.Outcome{}, err
		}
	}
	if r.prog.Hash() == rec.hash {
		k, err := rtfs.UnmarshalContinuation(r.prog, rec.cont)
		if err != nil {
			return rtfs.Outcome{}, fmt.Errorf("decode the continuation: %w", err)
		}
		if jrec != nil {
			r.journal = jrec.Journal()
		} else {
			r.journal = capabilities.NewBrokenJournal("the run was resumed from a continuation stored without a journal")
		}
		return rtfs.Outcome{Call: k.Call(), Continuation: k, Globals: k.Globals()}, nil
	}
	var next capabilities.ReplayFunc
	how := "legacy replay (the release that stored it kept no journal of its host calls)"
	if jrec != nil {
		next, how = jrec.Next, "replay of its journal"
		r.journal = jrec.Journal()
	} else {
		endpoint := ""
		if in, err := h.prov.Info(rec.streamID, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}); err == nil {
			endpoint = in.Endpoint
		}
		r.journal = &capabilities.Journal{}
		next = r.journal.Recording(provider.LegacyReplay(rec.streamID, endpoint, func(c *rtfs.HostCall) bool {
			return strings.TrimPrefix(c.Capability, ":") == provider.CapAwait && awaitedStream(c.Args) == rec.streamID
		}))
	}
	out, err := capabilities.Replay(h.ctx, rtfs.NewThread(h.limits), r.prog, next)
	if err == nil && out.Call == nil {
		err = errors.New("the run ended without coming back to its await")
	}
	if err != nil {
		return rtfs.Outcome{}, fmt.Errorf("program %s was compiled by another compiler; this one (%s) could not come back to its await on stream %q by %s: %w",
			rec.name, rtfs.CompileVersion(), rec.streamID, how, err)
	}
	h.log.Info("parked program recompiled by this compiler", "run", r.id, "program", rec.name, "compiler", rtfs.CompileVersion(), "by", how)
	return out, nil
}

// resumeParked serves a recovered program from its parked await (out) to
// its end.
func (h *Host) resumeParked(r *run, streamID string, out rtfs.Outcome) {
	defer h.programs.done()
	th := rtfs.NewThread(h.limits)
	out, err := h.drive(h.ctx, th, r, out, nil)
	if errors.Is(err, ErrParkInterrupted) {
		if h.ctx.Err() == nil { // the host goes on: the awaited stream does not run (unrecoverable)
			h.log.Warn("resumed program stays parked: its stream does not run", "run", r.id, "program", r.prog.Name(), "stream", streamID, "err", err)
		}
		return // still parked: the next Recover resumes it
	}
	res := ResumedProgram{RunID: r.id, Program: r.prog.Name(), StreamID: streamID, FinishedAt: time.Now()}
	if err != nil {
		res.Err = err.Error()
		h.log.Error("resumed program failed", "run", r.id, "program", res.Program, "err", err)
	} else {
		res.Value, res.Result = rtfs.Excerpt(out.Value, maxLogLine), out.Value
		h.log.Info("resumed program finished", "run", r.id, "program", res.Program, "value", res.Value)
	}
	h.unpark(r, &res)
}

// ResumedPrograms returns the outcomes of the programs that Recover resumed
// and that have finished, in the store (also those of earlier processes),
// ordered by run id. It fails without a store.
func (h *Host) ResumedPrograms(ctx context.Context) ([]ResumedProgram, error) {
	if h.store == nil {
		return nil, errors.New("host: ResumedPrograms: no store is configured")
	}
	var list []ResumedProgram
	var errs []error
	err := h.store.Scan(ctx, []byte(resumedPrefix), func(key, value []byte) error {
		r, err := decodeResumed(key, value)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		list = append(list, r)
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return list, errors.Join(errs...)
}

// programSet counts the resumed programs that run: Wait waits until none
// does, Close until all have returned.
type programSet struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed when n drops to 0
	closed bool
}

// add counts a new program; false after close.
func (s *programSet) add() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.n == 0 {
		s.idle = make(chan struct{})
	}
	s.n++
	return true
}

func (s *programSet) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	if s.n == 0 {
		close(s.idle)
	}
}

// idleNow reports whether no program runs.
func (s *programSet) idleNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n == 0
}

// wait waits until no program runs, or ctx ends.
func (s *programSet) wait(ctx context.Context) error {
	s.mu.Lock()
	if s.n == 0 {
		s.mu.Unlock()
		return nil
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close refuses new programs and waits for the running ones.
func (s *programSet) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	_ = s.wait(context.Background())
}
