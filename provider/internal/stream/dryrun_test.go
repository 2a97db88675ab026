package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// TestDryRun: chunks given as values or as a source's bytes reach the
// processor as a stream's do (decoded, with their metadata); a pause holds
// ordinary chunks back until a control chunk resumes; complete ends with
// its output as the result; an error holds the run as failed (the state a
// stream takes), with the chunk and the processor's message, the chunks
// after it waiting.
func TestDryRun(t *testing.T) {
	g := compileGlobals(t, `
(defn p [state chunk meta]
  (cond
    (= (:n chunk) 99) (throw (ex-info "bad chunk" {}))
    (:stop chunk) {:state state :action :complete :output {:done (count state)}}
    (:wait chunk) {:state state :action :pause}
    (:action chunk) {:state state}
    :else {:state (conj state [(:seq meta) (:event meta) (:id meta) (:fd meta) chunk])
           :output (:seq meta)}))
(defn two [state chunk] {:state (inc state)})
(defn shapeless [state chunk] 42)`)
	ctx := context.Background()
	res, err := DryRun(ctx, DryRunRequest{Processor: rtfs.Symbol("p"), Globals: g, InitialState: rtfs.NewVector(),
		Chunks: []DryChunk{
			{Data: []byte(`{"n":1}`), Event: "message", ID: "c1", FD: "stdout", ReceivedAt: time.UnixMilli(5)},
			{Value: rtfs.MapOf(rtfs.Keyword("wait"), rtfs.True)},
			{Data: []byte("plain text")},
			{Data: []byte(`{"action":"resume"}`)},
			{Data: []byte(`{"stop":true}`)},
			{Data: []byte(`{"n":2}`)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range res.Steps {
		order = append(order, s.Chunk.String()+" "+s.Action)
	}
	if got := strings.Join(order, "|"); got != `{:n 1} |{:wait true} pause|{:action "resume"} resume|"plain text" |{:stop true} complete` {
		t.Errorf("steps %s", got)
	}
	if first := res.Steps[0].State.String(); first != `[[1 "message" "c1" :stdout {:n 1}]]` {
		t.Errorf("metadata seen %s", first)
	}
	if res.Status != StateCompleted || res.Reason != "processor" || res.Dropped != 1 ||
		!rtfs.Equal(res.Result, rtfs.MapOf(rtfs.Keyword("done"), rtfs.Int(2))) {
		t.Errorf("end %s %s dropped %d result %v", res.Status, res.Reason, res.Dropped, res.Result)
	}

	res, err = DryRun(ctx, DryRunRequest{Processor: rtfs.Symbol("p"), Globals: g, InitialState: rtfs.NewVector(),
		Chunks: []DryChunk{{Data: []byte(`{"n":1}`)}, {Data: []byte(`{"n":99}`)}, {Data: []byte(`{"n":3}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var pe *ProcessorError
	if res.Status != StateFailed || res.Reason != "" || res.Waiting != 1 || res.Dropped != 0 || len(res.Steps) != 2 || !errors.As(res.Steps[1].Err, &pe) || pe.Chunk != 2 ||
		!strings.Contains(res.Message, "processor p failed on chunk 2: test.rtfs:4:23: bad chunk") {
		t.Errorf("failed: %s %q %q waiting %d dropped %d steps %d", res.Status, res.Reason, res.Message, res.Waiting, res.Dropped, len(res.Steps))
	}
	res, err = DryRun(ctx, DryRunRequest{Processor: rtfs.String("shapeless"), Globals: g,
		Chunks: []DryChunk{{Data: []byte(`1`)}, {Data: []byte(`2`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StateFailed || res.Waiting != 1 || len(res.Steps) != 1 || res.Steps[0].Err == nil || !strings.Contains(res.Message, "chunk 1") {
		t.Errorf("a result that is not a map: %s %q waiting %d", res.Status, res.Message, res.Waiting)
	}

	res, err = DryRun(ctx, DryRunRequest{Processor: rtfs.String("two"), Globals: g, InitialState: rtfs.Int(0),
		Chunks: []DryChunk{{Data: []byte(`1`)}, {Data: []byte(`{"action":"pause"}`)}, {Data: []byte(`3`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatePaused || res.Waiting != 1 || !rtfs.Equal(res.Steps[1].State, rtfs.Int(2)) {
		t.Errorf("a control chunk's own pause: %s waiting %d", res.Status, res.Waiting)
	}

	if _, err := DryRun(ctx, DryRunRequest{Processor: rtfs.Symbol("nope"), Globals: g}); err == nil ||
		!strings.Contains(err.Error(), `no function named "nope"`) {
		t.Errorf("unknown processor: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := DryRun(cctx, DryRunRequest{Processor: rtfs.Symbol("two"), Globals: g, Chunks: []DryChunk{{Data: []byte("1")}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
