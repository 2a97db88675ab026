package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

type inspectOptions struct {
	server  string
	stream  string
	json    bool
	noState bool
	noQueue bool
}

func (a *app) inspectCmd() *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:     "inspect",
		Aliases: []string{"streams"},
		Short:   "Show the streams: of the data directory, or live",
		Long: `inspect shows every stream with its state, processed and queued chunks,
cursor, end reason and result (a table), or one stream's whole inspect map
with --stream. --json prints the inspect map of :mcp.stream.inspect as JSON
instead.

A stream the data directory holds as running while nothing runs it shows as
interrupted: "rtfshost resume" carries it on.` + whereDoc + `
(its token, if it needs one, in $RTFSHOST_TOKEN).`,
		Example: `  rtfshost inspect
  rtfshost inspect --stream weather.monitor.v1-3fa1c2d0
  rtfshost inspect --data /var/lib/rtfshost --json
  rtfshost inspect --server http://127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.inspect(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.stream, "stream", "", "show this stream only")
	cmd.Flags().StringVar(&o.server, "server", "", "inspect the live streams of the rtfshost serve at this URL")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the inspect map as JSON")
	cmd.Flags().BoolVar(&o.noState, "no-state", false, "leave the current and initial states out")
	cmd.Flags().BoolVar(&o.noQueue, "no-queue", false, "leave the queued chunks out")
	return cmd
}

// inspect prints the streams of the desk where they are: a table, one
// stream's inspect map, or (--json) the inspect summary or map.
func (a *app) inspect(ctx context.Context, o inspectOptions) error {
	d, err := a.openReadDesk(ctx, o.server)
	if err != nil {
		return err
	}
	defer d.close()
	opts := provider.InspectOptions{OmitState: o.noState, OmitInitialState: o.noState, OmitQueue: o.noQueue}
	if o.stream != "" {
		in, err := d.info(ctx, o.stream, opts)
		if err != nil {
			return withCode(exitStreamFailed, err)
		}
		if o.json {
			fmt.Fprintf(a.stdout, "%s\n", in.JSON())
		} else {
			printInspectMap(a.stdout, in.Value(), a.rt.limits().OutputLimit())
			if in.Status.State == stateFailed {
				fmt.Fprintf(a.stdout, "(%s has failed: %s)\n", in.StreamID, shortRepairs(in))
			}
			if in.DeadLetters.Count > 0 {
				fmt.Fprintf(a.stdout, "(%d dead letter%s: rtfshost dead-letters %s)\n", in.DeadLetters.Count, plural(int(in.DeadLetters.Count)), in.StreamID)
			}
		}
		return unreadable(d)
	}
	if !o.json {
		opts = provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}
	}
	infos, err := d.infos(ctx, opts)
	if err != nil {
		return withCode(exitStreamFailed, err)
	}
	if o.json {
		b, err := json.Marshal(inspectSummary{Total: len(infos), Streams: infos, Where: d.where()})
		if err != nil {
			return withCode(exitStreamFailed, err)
		}
		fmt.Fprintf(a.stdout, "%s\n", b)
	} else {
		printStreamTable(a.stdout, infos)
	}
	return unreadable(d)
}

// unreadable is the error of a command that showed the streams of a data
// directory some of whose records could not be read (each error names its
// key; those streams are listed as unrecoverable): exit 1, after the rest.
func unreadable(d desk) error {
	if sd, ok := d.(*storeDesk); ok && sd.recErr != nil {
		return withCode(exitStreamFailed, fmt.Errorf("some streams could not be loaded: %w", sd.recErr))
	}
	return nil
}

// inspectSummary is what inspect --json prints for every stream: the
// streams' inspect maps, wherever they are.
type inspectSummary struct {
	Total   int                   `json:"total"`
	Streams []provider.StreamInfo `json:"streams"`
	Where   string                `json:"where"`
}

// printStreamTable prints the streams as a table, one per row (DEAD
// counts the chunks each set aside), and then, for each stream that needs
// a hand (failed, unrecoverable), what holds it and the commands that move
// it on.
func printStreamTable(w io.Writer, infos []provider.StreamInfo) {
	if len(infos) == 0 {
		fmt.Fprintln(w, "no streams")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tSTATE\tPROCESSED\tQUEUED\tAGE\tCURSOR\tENDED\tDEAD\tRESULT / MESSAGE")
	interrupted, dead := false, false
	for _, in := range infos {
		interrupted = interrupted || in.Status.State == StateInterrupted
		dead = dead || in.DeadLetters.Count > 0
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\n", in.StreamID, in.Status.State, in.Stats.ProcessedChunks, in.Stats.QueuedChunks,
			age(in), clip(cursorText(in), 28), in.Status.EndReason, in.DeadLetters.Count, clip(outcome(in), 60))
	}
	tw.Flush()
	if interrupted {
		fmt.Fprintln(w, "(interrupted streams carry on with: rtfshost resume)")
	}
	if dead {
		fmt.Fprintln(w, "(the chunks a stream set aside, DEAD: rtfshost dead-letters ID)")
	}
	for _, in := range infos {
		switch in.Status.State {
		case provider.StateUnrecoverable:
			fmt.Fprintf(w, "%s is unrecoverable: %s\n  (give it a processor again: rtfshost upgrade %s --program FILE; or drop it: rtfshost rm --force %s)\n",
				in.StreamID, in.Status.Message, in.StreamID, in.StreamID)
		case stateFailed:
			fmt.Fprintf(w, "%s has failed: %s\n  (%s)\n", in.StreamID, clip(failureSummary(failureOfState(in.Status.State, in.Failure)), 200), shortRepairs(in))
		}
	}
}

// shortRepairs names the commands that move the failed stream in on, as
// the stream table says them.
func shortRepairs(in provider.StreamInfo) string {
	id := in.StreamID
	if f := in.Failure; f != nil && f.Kind != provider.FailureProcessor {
		return fmt.Sprintf("carry it on %s: rtfshost resume %s; or end it: rtfshost cancel %s", onceBack(f.Kind), id, id)
	}
	return fmt.Sprintf("retry the chunk: rtfshost resume %[1]s; with a fixed processor: rtfshost upgrade %[1]s --program FIXED.rtfs, then resume; set it aside: rtfshost resume %[1]s --skip; or end it: rtfshost cancel %[1]s", id)
}

// age is how long the stream has run since it was first started, up to
// its end when it has ended and the end is known; "-" if unknown.
func age(in provider.StreamInfo) string {
	until := in.ObservedAtEpochMs
	if in.EndedAtEpochMs != nil {
		until = *in.EndedAtEpochMs
	}
	if in.StartedAtEpochMs <= 0 || until < in.StartedAtEpochMs {
		return "-"
	}
	d := time.Duration(until-in.StartedAtEpochMs) * time.Millisecond
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// cursorText is the stream's shown cursor, "" before its first chunk.
func cursorText(in provider.StreamInfo) string {
	if in.Cursor == nil {
		return ""
	}
	return *in.Cursor
}

// outcome is the result of a completed stream, the failure of a failed
// one in short, or the status message.
func outcome(in provider.StreamInfo) string {
	if in.Result.V != nil && in.Result.V != rtfs.Nil {
		return rtfs.Excerpt(in.Result.V, 240)
	}
	if in.Status.State == stateFailed && in.Failure != nil {
		return failureSummary(in.Failure)
	}
	return in.Status.Message
}

// printInspectMap prints one stream's inspect map, a key per line, each
// value cut past max bytes.
func printInspectMap(w io.Writer, v rtfs.Value, max int64) {
	m, ok := v.(*rtfs.Map)
	if !ok {
		fmt.Fprintln(w, printed(v, max))
		return
	}
	var keys []string
	vals := map[string]rtfs.Value{}
	m.Range(func(k, v rtfs.Value) bool {
		ks := rtfs.TextOf(k)
		keys = append(keys, ks)
		vals[ks] = v
		return true
	})
	sort.Strings(keys)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", k, printed(vals[k], max))
	}
	tw.Flush()
}

func clip(s string, n int) string {
	r := []rune(strings.ReplaceAll(s, "\n", " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
