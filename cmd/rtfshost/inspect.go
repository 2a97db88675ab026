package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/persistence"
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
		Short:   "Show the streams persisted in the data directory",
		Long: `inspect shows what the data directory holds: every stream with its status,
processed and queued chunks, cursor, end reason and result (a table), or one
stream's whole inspect map with --stream. --json prints the inspect map of
:mcp.stream.inspect as JSON instead.

The data directory can be read only while no other rtfshost uses it. To see
the live streams of a running "rtfshost serve", pass its URL with --server
(its token, if it needs one, in $RTFSHOST_TOKEN).`,
		Example: `  rtfshost inspect
  rtfshost inspect --stream weather.monitor.v1-3fa1c2d0
  rtfshost inspect --data /var/lib/rtfshost --json
  rtfshost inspect --server http://127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.inspect(cmd, o)
		},
	}
	cmd.Flags().StringVar(&o.stream, "stream", "", "show this stream only")
	cmd.Flags().StringVar(&o.server, "server", "", "inspect the live streams of the rtfshost serve at this URL instead of the data directory")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the inspect map as JSON")
	cmd.Flags().BoolVar(&o.noState, "no-state", false, "leave the current and initial states out")
	cmd.Flags().BoolVar(&o.noQueue, "no-queue", false, "leave the queued chunks out")
	return cmd
}

// inspect loads the persisted streams without connecting them and prints
// their inspect maps.
func (a *app) inspect(cmd *cobra.Command, o inspectOptions) error {
	table := !o.json && o.stream == ""
	if o.server != "" {
		if table {
			infos, err := infosLive(cmd.Context(), o.server)
			if err != nil {
				return withCode(exitStreamFailed, err)
			}
			printStreamTable(a.stdout, infos, false)
			return nil
		}
		m, err := inspectLive(cmd.Context(), o.server, o)
		if err != nil {
			return withCode(exitStreamFailed, err)
		}
		a.printInspect(m, o)
		return nil
	}
	logger, err := a.logger()
	if err != nil {
		return err
	}
	st, err := a.openExistingStore(logger)
	if errors.As(err, new(*persistence.LockedError)) {
		fmt.Fprintln(a.stderr, "rtfshost:", err)
		fmt.Fprintln(a.stderr, "rtfshost: a running \"rtfshost serve\" shows its live streams with: rtfshost inspect --server URL")
		return printedWithCode(exitStreamFailed)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	// Loaded streams must not run: hide the variable that would turn
	// auto-connect back on.
	lookupEnv := func(name string) (string, bool) {
		if name == provider.EnvStreamAutoConnect {
			return "", false
		}
		return os.LookupEnv(name)
	}
	p := provider.New(provider.Options{Store: st, ManualConnect: true, LookupEnv: lookupEnv, Logger: logger})
	defer p.Close()
	recErr := p.Recover(cmd.Context())
	if recErr != nil && len(p.StreamIDs()) == 0 {
		return withCode(exitStreamFailed, fmt.Errorf("reading %s: %w", a.flags.dataDir, recErr))
	}
	if recErr != nil {
		// Some records could not be read (each error names its key); the
		// others are still shown.
		fmt.Fprintln(a.stderr, "rtfshost: some streams could not be loaded:", recErr)
	}
	opts := provider.InspectOptions{OmitState: o.noState, OmitInitialState: o.noState, OmitQueue: o.noQueue}
	var m rtfs.Value
	switch {
	case table:
		printStreamTable(a.stdout, p.Infos(opts), true)
	case o.stream != "":
		m, err = p.Inspect(o.stream, opts)
		if err != nil {
			return withCode(exitStreamFailed, err)
		}
		a.printInspect(m, o)
	default:
		a.printInspect(p.Summary(opts), o)
	}
	if recErr != nil {
		return printedWithCode(exitStreamFailed)
	}
	return nil
}

// printInspect prints an inspect map as --json asks, else a key per line
// (--stream).
func (a *app) printInspect(m rtfs.Value, o inspectOptions) {
	if o.json {
		fmt.Fprintf(a.stdout, "%s\n", valueJSON(m))
		return
	}
	printInspectMap(a.stdout, m)
}

// printStreamTable prints the streams as a table, one per row; stored says
// they come from a data directory (none of them is running).
func printStreamTable(w io.Writer, infos []provider.StreamInfo, stored bool) {
	if len(infos) == 0 {
		fmt.Fprintln(w, "no streams")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tSTATE\tPROCESSED\tQUEUED\tAGE\tCURSOR\tENDED\tRESULT / MESSAGE")
	interrupted := false
	for _, in := range infos {
		state := string(in.Status.State)
		if stored && in.Status.State == provider.StateActive {
			// Nothing runs a stream of a data directory inspect holds: an
			// active one was interrupted (Ctrl-C, a crash, a full disk).
			state, interrupted = "interrupted", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", in.StreamID, state, in.Stats.ProcessedChunks, in.Stats.QueuedChunks,
			age(in), clip(cursorText(in), 28), in.Status.EndReason, clip(outcome(in), 60))
	}
	tw.Flush()
	if interrupted {
		fmt.Fprintln(w, "(interrupted streams carry on with: rtfshost resume)")
	}
	for _, in := range infos {
		if in.Status.State == provider.StateUnrecoverable {
			fmt.Fprintf(w, "%s is unrecoverable: %s\n  (give it a processor again: rtfshost upgrade %s --program FILE; or drop it: rtfshost rm --force %s)\n",
				in.StreamID, in.Status.Message, in.StreamID, in.StreamID)
		}
	}
}

// age is how long ago the stream was first started, "-" if unknown.
func age(in provider.StreamInfo) string {
	if in.StartedAtEpochMs <= 0 || in.ObservedAtEpochMs < in.StartedAtEpochMs {
		return "-"
	}
	d := time.Duration(in.ObservedAtEpochMs-in.StartedAtEpochMs) * time.Millisecond
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

// outcome is the result of a completed stream, or the status message.
func outcome(in provider.StreamInfo) string {
	if in.Result.V != nil && in.Result.V != rtfs.Nil {
		return in.Result.V.String()
	}
	return in.Status.Message
}

// printInspectMap prints one stream's inspect map, a key per line.
func printInspectMap(w io.Writer, v rtfs.Value) {
	m, ok := v.(*rtfs.Map)
	if !ok {
		fmt.Fprintln(w, v)
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
		fmt.Fprintf(tw, "%s\t%s\n", k, vals[k])
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
