package stream

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// Definition is the immutable description of a started stream.
type Definition struct {
	Endpoint   string
	Transport  string
	Kind       transport.Kind             // the catalog's kind named transport; zero when it has none (manual connect)
	Keys       map[string]json.RawMessage // the transport's own start keys, persisted
	Tconf      any                        // kind.Configure(keys)
	ServerURL  string                     // resolved; may carry credentials, shown redacted
	Dial       *egress.URL                // what a TargetURL transport dials, as the policy checked it
	ProcName   string
	Initial    rtfs.Value
	Capacity   int
	Config     *rtfs.Map
	Idle       time.Duration // the start call's idle timeout: 0 provider default, < 0 none
	Origin     string        // the circuit breaker's key: the dialled origin, or the program run; "" none
	Delivery   *Delivery     // the start call's :delivery; nil: none
	Milestones []Milestone   // the start call's :milestones
	OnError    ErrorPolicy   // the start call's :on-error (failure.go)
}

// Name is what a generated stream id starts with: the endpoint, else the
// program a process transport runs, else the transport's name.
func (d *Definition) Name() string {
	exe := ""
	if sp, ok := d.Tconf.(transport.Spawner); ok {
		exe = sp.Executable()
	}
	return StreamName(d.Endpoint, exe, d.Transport)
}

// StreamName is what a stream's generated id starts with: its endpoint,
// else the base name of the program a process transport runs, else its
// transport.
func StreamName(endpoint, executable, transport string) string {
	switch {
	case endpoint != "":
		return endpoint
	case executable != "":
		return filepath.Base(executable)
	}
	return transport
}

// A ProgramVersion is one program a stream's processor came from: the one
// it started with, then each that `rtfshost upgrade` swapped in. Inspect
// shows them as :programs.
type ProgramVersion struct {
	Hash      string `json:"hash"`        // the program's hash (Program.Hash)
	File      string `json:"file"`        // the program's file name
	Processor string `json:"processor"`   // the processor's name in it
	Compiler  string `json:"compiler"`    // the compile version that compiled it (rtfs.CompileVersion); "" unknown
	AtEpochMs int64  `json:"at-epoch-ms"` // when the stream started with it, or it was swapped in
}
