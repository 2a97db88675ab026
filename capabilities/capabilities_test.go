package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/rtfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var startSchema = &Schema{Type: "map", Keys: []Key{
	{Name: "endpoint", Type: "string", Required: true},
	{Name: "queue-capacity", Type: "int"},
	{Name: "processor", Type: "fn|symbol|string"},
}}

func echo(_ context.Context, c *Call) (Answer, error) {
	if len(c.Args) == 0 {
		return Now(nil), nil
	}
	return Now(c.Args[0]), nil
}

func newReg(t *testing.T, caps ...Capability) *Registry {
	t.Helper()
	r := NewRegistry()
	for _, c := range caps {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestDispatchChecksSchema(t *testing.T) {
	r := newReg(t, Capability{ID: ":demo.start", Input: startSchema, Handler: echo})
	kw := func(s string) rtfs.Value { return rtfs.Keyword(s) }
	tests := []struct {
		name string
		args []rtfs.Value
		want string // "" means success
	}{
		{"ok keyword keys", []rtfs.Value{rtfs.MapOf(kw("endpoint"), rtfs.String("e"), kw("queue-capacity"), rtfs.Int(4))}, ""},
		{"ok string keys", []rtfs.Value{rtfs.MapOf(rtfs.String("endpoint"), rtfs.String("e"))}, ""},
		{"missing key", []rtfs.Value{rtfs.MapOf(kw("queue-capacity"), rtfs.Int(4))}, "capability :demo.start: key :endpoint: required string is missing"},
		{"nil counts as missing", []rtfs.Value{rtfs.MapOf(kw("endpoint"), rtfs.Nil)}, "key :endpoint: required string is missing"},
		{"wrong type", []rtfs.Value{rtfs.MapOf(kw("endpoint"), rtfs.Int(5))}, "key :endpoint: expected string, got int 5"},
		{"alternatives", []rtfs.Value{rtfs.MapOf(kw("endpoint"), rtfs.String("e"), kw("processor"), rtfs.Int(1))}, "key :processor: expected fn or symbol or string, got int 1"},
		{"unknown key", []rtfs.Value{rtfs.MapOf(kw("endpoint"), rtfs.String("e"), kw("initial_state"), rtfs.Int(1))}, "unknown key :initial_state (known keys: :endpoint :processor :queue-capacity)"},
		{"not a map", []rtfs.Value{rtfs.String("weather")}, `expected a map argument, got string "weather"`},
		{"no argument", nil, "expected a map argument, got nil"},
		{"two arguments", []rtfs.Value{rtfs.MapOf(), rtfs.MapOf()}, "expected one argument, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := r.Call(context.Background(), &Call{ID: "demo.start", Args: tt.args})
			if tt.want == "" {
				if err != nil || !rtfs.Equal(v, tt.args[0]) {
					t.Fatalf("Call = %v, %v; want the argument back", v, err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Capability != "demo.start" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Call error = %v, want an *Error containing %q", err, tt.want)
			}
		})
	}
}

func TestOptionalArgument(t *testing.T) {
	r := newReg(t, Capability{ID: "demo.inspect", Input: &Schema{Type: "map", Optional: true, Keys: []Key{{Name: "stream-id", Type: "string"}}}, Handler: echo})
	for _, args := range [][]rtfs.Value{nil, {rtfs.Nil}} {
		if v, err := r.Call(context.Background(), &Call{ID: "demo.inspect", Args: args}); err != nil || v != rtfs.Nil {
			t.Errorf("Call(%v) = %v, %v; want nil, nil", args, v, err)
		}
	}
}

func TestUnknownCapabilityAndHandlerErrors(t *testing.T) {
	cause := errors.New("disk full")
	r := newReg(t,
		Capability{ID: "demo.fail", Handler: func(context.Context, *Call) (Answer, error) { return Answer{}, cause }},
		Capability{ID: "demo.panic", Handler: func(context.Context, *Call) (Answer, error) { panic("boom") }},
	)
	_, err := r.Dispatch(context.Background(), &Call{ID: ":no.such"})
	if !errors.Is(err, ErrUnknown) || err.Error() != "capability :no.such: unknown capability" {
		t.Errorf("unknown id: %v", err)
	}
	_, err = r.Call(context.Background(), &Call{ID: "demo.fail"})
	if !errors.Is(err, cause) || err.Error() != "capability :demo.fail: disk full" {
		t.Errorf("handler error: %v", err)
	}
	_, err = r.Call(context.Background(), &Call{ID: "demo.panic"})
	if err == nil || !strings.Contains(err.Error(), "capability :demo.panic: handler panicked: boom") {
		t.Errorf("panicking handler: %v", err)
	}
}

func TestParkedAnswer(t *testing.T) {
	release := make(chan rtfs.Value)
	r := newReg(t, Capability{ID: "demo.await", Handler: func(context.Context, *Call) (Answer, error) {
		return Later(func(ctx context.Context) (rtfs.Value, error) {
			select {
			case v := <-release:
				return v, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}), nil
	}})
	a, err := r.Dispatch(context.Background(), &Call{ID: "demo.await"})
	if err != nil || !a.Parked() {
		t.Fatalf("Dispatch = %+v, %v; want a parked answer", a, err)
	}
	go func() { release <- rtfs.Int(7) }()
	if v, err := a.Wait(context.Background()); err != nil || v != rtfs.Int(7) {
		t.Fatalf("Wait = %v, %v", v, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.Call(ctx, &Call{ID: "demo.await"})
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "capability :demo.await: ") {
		t.Fatalf("Call with a cancelled context = %v", err)
	}
	if v, err := Now(nil).Wait(context.Background()); v != rtfs.Nil || err != nil || Now(nil).Parked() {
		t.Fatalf("Now(nil) = %v, %v", v, err)
	}
}

func TestRegisterRejects(t *testing.T) {
	r := newReg(t, Capability{ID: "a.b", Handler: echo})
	bad := []struct {
		c    Capability
		want string
	}{
		{Capability{ID: "a.b", Handler: echo}, "already registered"},
		{Capability{ID: ":a.b", Handler: echo}, "already registered"},
		{Capability{ID: "", Handler: echo}, "empty id"},
		{Capability{ID: "a b", Handler: echo}, "id contains"},
		{Capability{ID: "x.y"}, "nil handler"},
		{Capability{ID: "x.z", Handler: echo, Input: &Schema{Type: "strin"}}, `unknown type "strin"`},
		{Capability{ID: "x.w", Handler: echo, Input: &Schema{Type: "map", Keys: []Key{{Name: "k", Type: "int"}, {Name: "k", Type: "int"}}}}, "duplicate key"},
	}
	for _, b := range bad {
		if err := r.Register(b.c); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Register(%q) = %v, want %q", b.c.ID, err, b.want)
		}
	}
	if c, ok := r.Lookup(":a.b"); !ok || c.ID != "a.b" {
		t.Errorf("Lookup = %v, %v", c.ID, ok)
	}
	if got := r.List(); len(got) != 1 || got[0].ID != "a.b" {
		t.Errorf("List = %v", got)
	}
}

func TestConcurrentRegisterAndDispatch(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := "c" + string(rune('a'+i))
			if err := r.Register(Capability{ID: id, Handler: echo}); err != nil {
				t.Error(err)
				return
			}
			for j := 0; j < 100; j++ {
				if v, err := r.Call(context.Background(), &Call{ID: id, Args: []rtfs.Value{rtfs.Int(int64(j))}}); err != nil || v != rtfs.Int(int64(j)) {
					t.Errorf("Call = %v, %v", v, err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	if n := len(r.List()); n != 8 {
		t.Fatalf("List has %d capabilities, want 8", n)
	}
}

func TestJSONSchema(t *testing.T) {
	doc := startSchema.JSONSchema()
	if doc["type"] != "object" || doc["additionalProperties"] != false {
		t.Fatalf("doc = %v", doc)
	}
	req, _ := doc["required"].([]string)
	if len(req) != 1 || req[0] != "endpoint" {
		t.Errorf("required = %v", doc["required"])
	}
	p := doc["properties"].(map[string]any)["processor"].(map[string]any)
	if p["rtfsType"] != "fn or symbol or string" {
		t.Errorf("processor property = %v", p)
	}
}

func TestZeroRegistryAndNilCall(t *testing.T) {
	var r Registry
	if _, err := r.Dispatch(context.Background(), &Call{ID: "x"}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("dispatch on an empty registry = %v", err)
	}
	if err := r.Register(Capability{ID: "x", Handler: echo}); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Call(context.Background(), &Call{ID: "x", Args: []rtfs.Value{rtfs.True}}); err != nil || v != rtfs.True {
		t.Fatalf("Call = %v, %v", v, err)
	}
	if _, err := r.Dispatch(context.Background(), nil); err == nil {
		t.Fatal("nil call accepted")
	}
}

// TestCheckJSON: JSON arguments are checked against a schema as RTFS ones
// are, and its JSON Schema gives every key its JSON types.
func TestCheckJSON(t *testing.T) {
	s := &Schema{Type: "map", Keys: []Key{
		{Name: "endpoint", Type: "string", Required: true},
		{Name: "queue-capacity", Type: "int", Min: AtLeast(1)},
		{Name: "transport", Type: "keyword|string", Enum: []string{"sse", "mcp"}},
		{Name: "initial-state", Type: "any"},
		{Name: "ratio", Type: "number"},
	}}
	for _, tc := range []struct {
		args string
		want string // "" means success
	}{
		{`{"endpoint":"e","queue-capacity":4,"transport":"mcp","initial-state":[1],"ratio":0.5}`, ""},
		{`{"endpoint":"e","initial-state":null}`, ""},
		{`{}`, `argument "endpoint": missing required argument`},
		{`{"endpoint":null}`, `argument "endpoint": missing required argument`},
		{`{"endpoint":5}`, `argument "endpoint": expected a string, got number 5`},
		{`{"endpoint":"e","queue-capacity":1.5}`, `expected an integer, got number 1.5`},
		{`{"endpoint":"e","queue-capacity":0}`, `must be at least 1, got 0`},
		{`{"endpoint":"e","transport":"pigeon"}`, `"pigeon" is not one of sse, mcp`},
		{`{"endpoint":"e","endpiont":"x"}`, `argument "endpiont": unknown argument (did you mean "endpoint"?)`},
	} {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
			t.Fatal(err)
		}
		err := s.CheckJSON(args)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.args, err, tc.want)
		}
	}
	props := s.JSONSchema()["properties"].(map[string]any)
	for key, want := range map[string]string{"endpoint": "string", "queue-capacity": "integer", "transport": "string", "ratio": "number",
		"initial-state": "[object array string number integer boolean null]"} {
		if got := fmt.Sprint(props[key].(map[string]any)["type"]); got != want {
			t.Errorf("%s: JSON type %s, want %s", key, got, want)
		}
	}
	if m := props["queue-capacity"].(map[string]any)["minimum"]; m != int64(1) {
		t.Errorf("queue-capacity minimum = %v", m)
	}
}
