package main

import (
	"fmt"
	"strings"

	"github.com/rtfshost/rtfshost/provider"
)

// What the commands tell a user about a stream that needs a hand (paused,
// failed, or stopped with a source that does not come back): the commands
// that move it on, each spelled out with the data directory, so that a
// hint never leads to loss.

// stateFailed is the state of a stream held by a failure.
const stateFailed = provider.StateFailed

// repairs names the commands that move stream id on from another shell:
// for a failed stream (f, held on a chunk its processor failed on, or by a
// source or a store that gave up), retry, upgrade and skip (for a chunk),
// cancel, and where its dead letters are listed; for a paused one (f nil),
// resume and cancel.
func (h hints) repairs(id string, f *provider.Failure) string {
	if f == nil {
		return fmt.Sprintf(`"rtfshost resume --data %[1]s %[2]s" resumes it, "rtfshost cancel --data %[1]s %[2]s" cancels it`, h.dataDir, id)
	}
	if f.Kind != provider.FailureProcessor {
		return fmt.Sprintf(`"rtfshost resume --data %[1]s %[2]s" carries it on %[3]s, "rtfshost cancel --data %[1]s %[2]s" ends it`, h.dataDir, id, onceBack(f.Kind))
	}
	return fmt.Sprintf(`"rtfshost resume --data %[1]s %[2]s" retries chunk %[3]d, "rtfshost upgrade --data %[1]s %[2]s --program FIXED.rtfs" and then resume run it with a fixed processor, "rtfshost resume --data %[1]s %[2]s --skip" sets it aside as a dead letter and goes on ("rtfshost dead-letters --data %[1]s %[2]s" lists them), "rtfshost cancel --data %[1]s %[2]s" ends it`, h.dataDir, id, f.Seq)
}

// failureOfState is the failure of a stream in state st (Status.Failure,
// f): nil unless it is failed; a failed stream whose failure is not known
// is taken as held on a chunk.
func failureOfState(st provider.State, f *provider.Failure) *provider.Failure {
	switch {
	case st != stateFailed:
		return nil
	case f == nil:
		return &provider.Failure{Kind: provider.FailureProcessor}
	}
	return f
}

// skippable says why the chunk stream id (as in shows it) is held on
// cannot be set aside (nil when it can): it is not failed, or it is held
// by its source or its store, not on a chunk. One policy for every desk.
func skippable(id string, in provider.StreamInfo) error {
	st := in.Status.State
	if st != stateFailed {
		return fmt.Errorf("stream %q is %s, not failed: --skip sets aside the chunk a failed stream is held on, and it is held on none", id, st)
	}
	if f := in.Failure; f != nil && f.Kind != provider.FailureProcessor {
		return fmt.Errorf("stream %q has failed by its %s (%s), not on a chunk: there is no chunk to set aside; rtfshost resume %s carries it on %s", id, f.Kind, f.Error, id, onceBack(f.Kind))
	}
	return nil
}

// onceBack says when a stream held by its source or its store (kind) can
// carry on.
func onceBack(kind string) string {
	if kind == provider.FailureStore {
		return "once space is freed"
	}
	return "once its source is back"
}

// skipNote says which chunk resume --skip set aside.
func skipNote(in provider.StreamInfo) string {
	if in.Failure == nil || in.Failure.Seq == 0 {
		return "its held chunk is set aside as a dead letter"
	}
	return fmt.Sprintf("chunk %d is set aside as a dead letter", in.Failure.Seq)
}

// failureSummary is a failure in short, for a table: its kind, its chunk
// and its error without the words the kind and chunk say already.
func failureSummary(f *provider.Failure) string {
	if f == nil {
		return ""
	}
	if f.Kind == provider.FailureProcessor {
		return fmt.Sprintf("processor failed on chunk %d (%d attempt%s): %s", f.Seq, f.Attempts, plural(int(f.Attempts)), shortError(f.Error))
	}
	return fmt.Sprintf("%s failed: %s", f.Kind, f.Error)
}

// sourceEnds says what became of the streams ids stopped with a run whose
// sources are programs that ended with it.
func (h hints) sourceEnds(ids []string) string {
	return fmt.Sprintf("the source of %s was a program that ended with this run: resuming processes the chunks it had sent (kept in %s) and then ends with source-lost; run the program again to start its source over",
		strings.Join(ids, ", "), h.dataDir)
}
