package provider

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// definition is the immutable description of a started stream.
type definition struct {
	endpoint   string
	transport  string
	kind       transport.Kind             // the catalog's kind named transport; zero when it has none (manual connect)
	keys       map[string]json.RawMessage // the transport's own start keys, persisted
	tconf      any                        // kind.Configure(keys)
	serverURL  string                     // resolved; may carry credentials, shown redacted
	dial       *egress.URL                // what a TargetURL transport dials, as the policy checked it
	procName   string
	initial    rtfs.Value
	capacity   int
	config     *rtfs.Map
	idle       time.Duration // the start call's idle timeout: 0 provider default, < 0 none
	origin     string        // the circuit breaker's key: the dialled origin, or the program run; "" none
	delivery   *Delivery     // the start call's :delivery; nil: none
	milestones []Milestone   // the start call's :milestones
	onError    ErrorPolicy   // the start call's :on-error (failure.go)
}

// name is what a generated stream id starts with: the endpoint, else the
// program a process transport runs, else the transport's name.
func (d *definition) name() string {
	exe := ""
	if sp, ok := d.tconf.(transport.Spawner); ok {
		exe = sp.Executable()
	}
	return streamName(d.endpoint, exe, d.transport)
}

// streamName is what a stream's generated id starts with: its endpoint,
// else the base name of the program a process transport runs, else its
// transport.
func streamName(endpoint, executable, transport string) string {
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
