package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	texec "github.com/rtfshost/rtfshost/transport/exec"
)

// linesSrc counts and keeps the lines of an :exec stream, and its :fd.
const linesSrc = `
(defn proc [state chunk meta]
  {:state (-> state (update :n inc) (update :lines conj (:line chunk)))
   :output [(:fd meta) (:line chunk)]})`

func execKeys(t *testing.T, script string, extra map[string]string) map[string]json.RawMessage {
	t.Helper()
	keys := map[string]json.RawMessage{
		"command": json.RawMessage(`"sh"`),
		"args":    mustJSON(t, []string{"-c", script}),
	}
	for k, v := range extra {
		keys[k] = json.RawMessage(v)
	}
	return keys
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func execRequest(t *testing.T, g *rtfs.Globals, id string, keys map[string]json.RawMessage) StartRequest {
	proc, _ := g.Get("proc")
	return StartRequest{StreamID: id, Transport: "exec", Processor: proc, Globals: g, TransportKeys: keys,
		InitialState: rtfs.MapOf(rtfs.Keyword("n"), rtfs.Int(0), rtfs.Keyword("lines"), rtfs.NewVector())}
}

// TestExecStream: an :exec stream needs no endpoint, gets each line with
// :fd :stdout in its metadata, and completes when the program exits 0.
func TestExecStream(t *testing.T) {
	f := newFixture(t, Options{Transports: transport.NewCatalog(texec.Kind())})
	g := compileGlobals(t, linesSrc)
	id, err := f.p.Start(execRequest(t, g, "", execKeys(t, "printf 'a\\nb\\nc\\n'", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "sh-") {
		t.Errorf("generated id %q, want one named after the program", id)
	}
	st := f.Await(id)
	if st.State != StateCompleted || st.EndReason != "source-ended" || st.Result.String() != `[:stdout "c"]` {
		t.Fatalf("status %+v (result %s)", st, st.Result.String())
	}
}

// TestExecRefusedByEgress: under a policy that names commands, another
// program, or a loader variable in :env, is refused at start, naming the
// flag; an allowed one runs.
func TestExecRefusedByEgress(t *testing.T) {
	pol, err := egress.New(egress.Options{Commands: []string{"sh"}, CommandFlag: "rtfshost serve --allow-command NAME"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Transports: transport.NewCatalog(texec.Kind()), Egress: pol})
	g := compileGlobals(t, linesSrc)
	keys := execKeys(t, "echo hi", nil)
	keys["command"] = json.RawMessage(`"bash"`)
	_, err = f.p.Start(execRequest(t, g, "bash", keys))
	if !errors.Is(err, egress.ErrDenied) || !strings.Contains(err.Error(), ":command:") || !strings.Contains(err.Error(), "--allow-command NAME") {
		t.Fatalf("bash: err = %v", err)
	}
	_, err = f.p.Start(execRequest(t, g, "path", execKeys(t, "echo hi", map[string]string{"env": `{"PATH":"/tmp"}`})))
	if !errors.Is(err, egress.ErrDenied) || !strings.Contains(err.Error(), "PATH") {
		t.Fatalf("PATH override: err = %v", err)
	}
	id, err := f.p.Start(execRequest(t, g, "ok", execKeys(t, "echo hi", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("allowed command: %+v", st)
	}
}

// TestExecKeysChecked: a start key of another transport, or a bad value,
// is an error naming the key.
func TestExecKeysChecked(t *testing.T) {
	f := newFixture(t, Options{Transports: transport.NewCatalog(texec.Kind(), mockKindFor(t))})
	g := compileGlobals(t, linesSrc)
	req := execRequest(t, g, "m", map[string]json.RawMessage{"framing": json.RawMessage(`"lines"`)})
	req.Transport, req.Endpoint = "mock", "e"
	if _, err := f.p.Start(req); err == nil || !strings.Contains(err.Error(), ":framing: is not read by :mock (it is for :exec)") {
		t.Fatalf("err = %v", err)
	}
	if _, err := f.p.Start(execRequest(t, g, "x", execKeys(t, "true", map[string]string{"framing": `"xml"`}))); err == nil || !strings.Contains(err.Error(), ":framing: want :lines") {
		t.Fatalf("err = %v", err)
	}
}

func mockKindFor(t *testing.T) transport.Kind {
	return transport.Kind{Name: "mock", Endpoint: "a name", Transport: transport.StreamTransport(nil)}
}

// TestExecJournalAndSourceLost: an :exec stream journals its chunks; after
// a host restart the unfinished stream is not run again: it ends in :error
// with the end reason source-lost, its state kept. With :restart
// :on-failure the program is started again instead.
func TestExecJournalAndSourceLost(t *testing.T) {
	store := persistence.NewMemStore()
	defer store.Close()
	g := compileGlobals(t, linesSrc)
	open := func() *Provider {
		return New(Options{Store: store, LookupEnv: noEnv, Transports: transport.NewCatalog(texec.Kind())})
	}
	p := open()
	script := "echo one; echo two; exec sleep 3600"
	if _, err := p.Start(execRequest(t, g, "lost", execKeys(t, script, nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Start(execRequest(t, g, "again", execKeys(t, script, map[string]string{"restart": `"on-failure"`}))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lost", "again"} {
		waitUntil(t, id+" processed two lines", func() bool {
			v, err := p.Inspect(id, InspectOptions{})
			return err == nil && strings.Contains(v.String(), `:lines ["one" "two"]`)
		})
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = open()
	defer p.Close()
	if err := p.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = p.Await(ctx, "lost")
	st, _ := p.Status(ctx, "lost")
	if st.State != StateError || st.EndReason != "source-lost" || !strings.Contains(st.Message, "restart :on-failure") {
		t.Fatalf("lost: %+v", st)
	}
	v, _ := p.Inspect("lost", InspectOptions{})
	if !strings.Contains(v.String(), `:lines ["one" "two"]`) {
		t.Fatalf("lost's state was not kept: %s", v.String())
	}
	waitUntil(t, "again's second run", func() bool {
		v, err := p.Inspect("again", InspectOptions{})
		return err == nil && strings.Contains(v.String(), `:lines ["one" "two" "one" "two"]`)
	})
	if _, err := p.Cancel(ctx, "again"); err != nil {
		t.Fatal(err)
	}
}
