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
// for a failed stream (held on a chunk its processor failed on, or by a
// source that gave up), retry, upgrade, cancel; for a paused one,
// resume and cancel.
func (h hints) repairs(id string, failed bool) string {
	if failed {
		return fmt.Sprintf(`"rtfshost resume --data %[1]s %[2]s" retries it, "rtfshost upgrade --data %[1]s %[2]s --program FIXED.rtfs" and then resume run the chunk with a fixed processor, "rtfshost cancel --data %[1]s %[2]s" ends it`, h.dataDir, id)
	}
	return fmt.Sprintf(`"rtfshost resume --data %[1]s %[2]s" resumes it, "rtfshost cancel --data %[1]s %[2]s" cancels it`, h.dataDir, id)
}

// sourceEnds says what became of the streams ids stopped with a run whose
// sources are programs that ended with it.
func (h hints) sourceEnds(ids []string) string {
	return fmt.Sprintf("the source of %s was a program that ended with this run: resuming processes the chunks it had sent (kept in %s) and then ends with source-lost; run the program again to start its source over",
		strings.Join(ids, ", "), h.dataDir)
}
