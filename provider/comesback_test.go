package provider

import (
	"context"
	"errors"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
	texec "github.com/rtfshost/rtfshost/transport/exec"
)

// waitingSource is a source that replays from a cursor (it does not say
// otherwise) and sends nothing until it is stopped.
type waitingSource struct{}

func (waitingSource) Run(ctx context.Context, _ transport.Spec, _ string, _ transport.Sink) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSourceComesBack: a program's output does not come back after its
// process ends, unless the program is started again (:restart
// :on-failure); a source that replays from a cursor does; an unknown id is
// an error.
func TestSourceComesBack(t *testing.T) {
	replay := transport.Kind{Name: "replay", Transport: waitingSource{}}
	f := newFixture(t, Options{Transports: transport.NewCatalog(texec.Kind(), replay)})
	g := compileGlobals(t, linesSrc)
	script := "exec sleep 3600"
	if _, err := f.p.Start(execRequest(t, g, "gone", execKeys(t, script, nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Start(execRequest(t, g, "again", execKeys(t, script, map[string]string{"restart": `"on-failure"`}))); err != nil {
		t.Fatal(err)
	}
	req := execRequest(t, g, "replayed", nil)
	req.Transport = "replay"
	if _, err := f.p.Start(req); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"gone": false, "again": true, "replayed": true} {
		if back, err := f.p.SourceComesBack(id); err != nil || back != want {
			t.Errorf("SourceComesBack(%q) = %v, %v; want %v", id, back, err, want)
		}
	}
	if _, err := f.p.SourceComesBack("nope"); !errors.Is(err, ErrNoStream) {
		t.Errorf("SourceComesBack of an unknown id: %v, want ErrNoStream", err)
	}
}
