package mcp

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/internal/conformance"
	"github.com/rtfshost/rtfshost/transport"
)

// conformanceClientEnv, set in the environment of this test binary, makes
// it the client the conformance suite drives (conformanceClientMain).
const conformanceClientEnv = "RTFSHOST_CONFORMANCE_CLIENT"

// conformanceClientMain is this package's client as the conformance suite
// runs it: the test server's URL is the last argument and the scenario is
// in MCP_CONFORMANCE_SCENARIO. It makes the one call the scenario's test
// server expects, with the :mcp transport as a stream would (discovery or
// a session, the call, its progress, its result), and reports what it got
// on stderr; the suite judges what it saw on the wire, so the exit status
// is 0 whatever the call's outcome.
func conformanceClientMain() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "conformance client: no server URL")
		return 2
	}
	url := os.Args[len(os.Args)-1]
	tool, args := "test_tool", `{}`
	if os.Getenv("MCP_CONFORMANCE_SCENARIO") == "tools_call" {
		tool, args = "add_numbers", `{"a":2,"b":3}`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spec := transport.Spec{StreamID: "conformance", Endpoint: tool, Arguments: []byte(args), RetryAttempts: 3,
		HTTP: transport.HTTP{ServerURL: url}}
	sink := &recSink{}
	err := Streamable{policy: fastPolicy}.Run(ctx, spec, "", sink)
	fmt.Fprintf(os.Stderr, "conformance client: %s: events %v, error %v\n", tool, sink.events(), err)
	return 0
}

// clientNotApplicable are the client scenarios that exercise what
// rtfshost's MCP client does not do: OAuth (it sends the credentials of
// :server-url's origin, never an authorization flow), elicitation (it
// declares no such capability and answers -32601), multi-round input
// requests, and custom request headers from a tool's schema.
var clientNotApplicable = map[string]string{
	"elicitation-sep1034-client-defaults": "the client declares no elicitation capability",
	"sep-2322-client-request-state":       "the client answers no input-required result",
	"http-custom-headers":                 "the client sends no x-mcp-header values from a tool's input schema",
	"http-invalid-tool-headers":           "the client sends no x-mcp-header values from a tool's input schema",
	"json-schema-ref-no-deref":            "the client does not read tools' input schemas",
}

// TestConformanceClient runs the client scenarios that the official MCP
// conformance suite requires of revisions 2025-11-25 and 2026-07-28
// against this package's client (the handshake or discovery, a retried
// discovery after -32022, the per-request _meta and headers, resuming an
// SSE stream after its retry: delay, a tool call's arguments): every check
// passes. The auth scenarios, and those listed in clientNotApplicable, do
// not apply; the test says which ran.
func TestConformanceClient(t *testing.T) {
	suite := conformance.Install(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			var ran []string
			for _, scenario := range suite.Scenarios(t, "client", rev) {
				if strings.HasPrefix(scenario, "auth/") || clientNotApplicable[scenario] != "" {
					continue
				}
				checks := suite.Client(t, scenario, rev, []string{self}, []string{conformanceClientEnv + "=1"})
				problems, _ := conformance.Judge(map[string][]conformance.Check{scenario: checks}, nil)
				for _, p := range problems {
					t.Error(p)
				}
				ran = append(ran, scenario)
			}
			if len(ran) < 2 {
				t.Errorf("only %v ran", ran)
			}
			t.Logf("conformance %s, revision %s: client scenarios run: %s", conformance.Version, rev, strings.Join(ran, " "))
		})
	}
}
