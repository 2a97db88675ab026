package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The dead letters of a stream: the chunks it set aside ("rtfshost resume
// ID --skip", :on-error {:then :skip}), listed by "rtfshost dead-letters
// ID" wherever the stream is (a desk's deadLetters): the data directory,
// read only (provider.StoredDeadLetters); the process that holds it,
// through its control socket (GET /v1/streams/{id}/dead-letters); a serve,
// through mcp.stream.dead-letters.

func (a *app) deadLettersCmd() *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{
		Use:   "dead-letters ID",
		Short: "List the chunks a stream set aside as dead letters",
		Long: `dead-letters lists every chunk stream ID set aside, oldest first: the chunks
"rtfshost resume ID --skip" set aside when the stream had failed on them,
and those its :on-error policy {:then :skip} set aside. Each is shown with
its seq (the chunk's number in the stream), its id (the cursor its source
gave it), the attempts that failed on it, when it was set aside, and the
error. --json prints one JSON object per dead letter, with the chunk and
its metadata as the processor got them.

A stream that set none aside says so (--json: no line) and exits 0; an
unknown stream is an error (exit 1). The data directory is only read.` + whereDoc,
		Example: `  rtfshost dead-letters sensor-1
  rtfshost dead-letters --data /var/lib/rtfshost --json sensor-1
  rtfshost dead-letters --server http://127.0.0.1:7070 s1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return a.listDeadLetters(cmd.Context(), o, ids[0])
		},
	}
	cmd.Flags().StringVar(&o.server, "server", "", "list the dead letters of a stream of the rtfshost serve at this URL")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per dead letter")
	return cmd
}

// deadLetterLine is a dead letter as dead-letters --json prints it.
type deadLetterLine struct {
	Type string `json:"type"` // "dead-letter"
	provider.DeadLetter
}

// listDeadLetters is the dead-letters command.
func (a *app) listDeadLetters(ctx context.Context, o controlOptions, id string) error {
	d, err := a.openReadDesk(ctx, o.server)
	if err != nil {
		return err
	}
	defer d.close()
	dls, err := d.deadLetters(ctx, id)
	if err != nil {
		a.tellManageErr(o.json, id, err)
		return printedWithCode(exitStreamFailed)
	}
	if o.json {
		for _, dl := range dls {
			b, err := json.Marshal(deadLetterLine{Type: "dead-letter", DeadLetter: dl})
			if err != nil {
				return withCode(exitStreamFailed, fmt.Errorf("dead letter %d of stream %q: %w", dl.Seq, id, err))
			}
			fmt.Fprintf(a.stdout, "%s\n", b)
		}
		return nil
	}
	printDeadLetters(a.stdout, id, dls)
	return nil
}

// printDeadLetters prints the dead letters of stream id as a table, one
// per row, or that there are none.
func printDeadLetters(w io.Writer, id string, dls []provider.DeadLetter) {
	if len(dls) == 0 {
		fmt.Fprintf(w, "stream %s has no dead letters: it set no chunk aside\n", id)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tID\tATTEMPTS\tSET ASIDE\tERROR")
	for _, dl := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", dl.Seq, clip(chunkID(dl), 24), dl.Attempts,
			time.UnixMilli(dl.AtEpochMs).UTC().Format(time.RFC3339), clip(shortError(dl.Error), 100))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d dead letter%s; --json shows each chunk whole\n", len(dls), plural(len(dls)))
}

// chunkID is the :id of a dead letter's metadata: the cursor its source
// gave the chunk ("" when it has none).
func chunkID(dl provider.DeadLetter) string {
	m, ok := dl.Metadata.V.(*rtfs.Map)
	if !ok {
		return ""
	}
	v, ok := m.Get(rtfs.Keyword("id"))
	if !ok || v == rtfs.Nil {
		return ""
	}
	return rtfs.TextOf(v)
}

// shortError is a failure's error without the "processor P failed on
// chunk N: " its table already says.
func shortError(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "processor "); ok {
		if _, after, found := strings.Cut(rest, ": "); found && strings.Contains(rest[:len(rest)-len(after)], " on chunk ") {
			return after
		}
	}
	return msg
}

func (d *storeDesk) deadLetters(ctx context.Context, id string) ([]provider.DeadLetter, error) {
	dls, err := provider.StoredDeadLetters(ctx, d.st, id)
	if errors.Is(err, provider.ErrNoStoredStream) {
		return nil, noStream(d, id)
	}
	return dls, err
}

func (d *holderDesk) deadLetters(ctx context.Context, id string) ([]provider.DeadLetter, error) {
	var dls []provider.DeadLetter
	err := d.c.call(ctx, http.MethodGet, "/v1/streams/"+url.PathEscape(id)+"/dead-letters", &dls)
	if errors.Is(err, errNoStream) {
		return nil, noStream(d, id)
	}
	return dls, err
}

func (d serverDesk) deadLetters(ctx context.Context, id string) ([]provider.DeadLetter, error) {
	text, err := callServer(ctx, d.url, mcpserver.ToolDeadLetters, map[string]any{"stream-id": id})
	if err != nil {
		if list, lerr := d.infos(ctx, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}); lerr == nil && !hasStream(list, id) {
			return nil, noStream(d, id)
		}
		return nil, err
	}
	var out struct {
		DeadLetters []provider.DeadLetter `json:"dead-letters"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("%s on %s answered something else than dead letters: %w", mcpserver.ToolDeadLetters, d.url, err)
	}
	return out.DeadLetters, nil
}

// deadLettersOf answers GET /v1/streams/{id}/dead-letters on the control
// socket: the dead letters of a stream the holder's host runs, or of one
// its store only holds (Provider.DeadLetters reads the store for those).
func (hd *holder) deadLettersOf(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	dls, err := hd.h.Provider().DeadLetters(r.Context(), id)
	if errors.Is(err, provider.ErrNoStream) || errors.Is(err, provider.ErrNoStoredStream) {
		err = fmt.Errorf("stream %q: %w", id, errNoStream)
	}
	if err != nil {
		replyError(w, err)
		return
	}
	if dls == nil {
		dls = []provider.DeadLetter{}
	}
	replyJSON(w, http.StatusOK, dls)
}
