package transport

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// A Target says what a transport reaches, and so which rule of the egress
// policy (transport/egress) a stream of it must pass before it starts.
type Target int

const (
	// TargetNone: the transport reaches nothing outside the host (the mock).
	TargetNone Target = iota
	// TargetURL: the transport connects to the stream's URL (its absolute
	// :endpoint, else its :server-url); the policy checks the URL.
	TargetURL
	// TargetCommand: the transport starts a program; the policy checks the
	// executable. Its Configure returns a Spawner.
	TargetCommand
	// TargetFile: the transport reads a local file (a :replay recording);
	// the policy checks its path. Its Configure returns a FileUser.
	TargetFile
)

// A FileUser is the configuration of a transport that reads a local file
// (Kind.Target == TargetFile): the egress policy checks Path.
type FileUser interface {
	Path() string
}

// A Key is one start-call key a transport reads, beyond the keys every
// stream has (:endpoint, :processor, :config, ...). Type uses the
// capability schema's words: "string", "int", "bool", "map", "vector",
// "keyword", "keyword|string", "vector of strings", "map of strings".
type Key struct {
	Name string   // without the colon, e.g. "command"
	Type string   // the value's type
	Doc  string   // one line for schemas and docs
	Enum []string // the allowed keyword values, if any
}

// A Kind describes one transport to the rest of rtfshost: its name, how a
// start call chooses it, the start keys it reads and how they become its
// configuration, what the egress policy checks, and the implementation.
// Each transport package has a function that returns its Kind (sse.Kind,
// mcp.StreamableKind, ...); a Catalog collects them. A Kind is a value; its
// functions are safe for concurrent use.
type Kind struct {
	// Name is what :transport names, e.g. "sse".
	Name string
	// Doc says in one line what the transport reads.
	Doc string
	// Endpoint says what the start call's :endpoint means for this
	// transport; "" means the transport takes none.
	Endpoint string
	// URLEndpoint says the endpoint is the URL the transport dials: an
	// absolute http(s) URL, or a path under :server-url (raw SSE). When
	// false a TargetURL transport dials :server-url and the endpoint is
	// something else (an MCP tool's name).
	URLEndpoint bool
	// Target is what the egress policy checks.
	Target Target
	// Detect reports whether a start call that names no :transport is for
	// this transport, from its target URL. Nil: the transport is only ever
	// chosen by name.
	Detect func(target *url.URL) bool
	// Detects says in words which URLs Detect accepts ("" when Detect is
	// nil), for docs.
	Detects string
	// Fallback marks a Detect that accepts what no other kind claims (raw
	// SSE takes any http(s) URL): Choose asks it last.
	Fallback bool
	// Keys are the start keys only this transport reads.
	Keys []Key
	// Configure turns the values of Keys present in a start call (as
	// JSON, keywords as their names) into the transport's configuration,
	// which Run finds in Spec.Config. Errors name the key. Nil: the
	// transport has no configuration of its own.
	Configure func(keys map[string]json.RawMessage) (any, error)
	// Local marks a transport for tests and embedding only (the mock): it
	// is left out of what the command line serves.
	Local bool
	// Transport is the implementation.
	Transport StreamTransport
}

// With returns a copy of k whose implementation is t: a test's recording
// or failing transport described as the real one.
func (k Kind) With(t StreamTransport) Kind {
	k.Transport = t
	return k
}

// A Spawner is the configuration of a transport that starts a program
// (Kind.Target == TargetCommand): the egress policy checks the executable
// and the environment variables the start call sets.
type Spawner interface {
	Executable() string
	EnvNames() []string
}

// A Catalog is the set of transports a provider can run, in the order they
// were given. It is immutable after NewCatalog and safe for concurrent use;
// it is the one list of transport names: the provider chooses and
// configures transports through it, and the start schema, the MCP tool's
// input schema and docs/transports.md are derived from it.
type Catalog struct {
	kinds []Kind
}

// NewCatalog returns the catalog of kinds. A later kind with the name of an
// earlier one replaces it (so a test can swap one implementation), keeping
// the earlier one's place.
func NewCatalog(kinds ...Kind) *Catalog {
	c := &Catalog{kinds: make([]Kind, 0, len(kinds))}
	for _, k := range kinds {
		k.Name = strings.TrimPrefix(k.Name, ":")
		if i := c.index(k.Name); i >= 0 {
			c.kinds[i] = k
			continue
		}
		c.kinds = append(c.kinds, k)
	}
	return c
}

func (c *Catalog) index(name string) int {
	if c == nil {
		return -1
	}
	return slices.IndexFunc(c.kinds, func(k Kind) bool { return k.Name == name })
}

// Kinds returns the kinds in catalog order. The slice is a copy.
func (c *Catalog) Kinds() []Kind {
	if c == nil {
		return nil
	}
	return slices.Clone(c.kinds)
}

// Names returns the transport names in catalog order.
func (c *Catalog) Names() []string {
	var out []string
	for _, k := range c.Kinds() {
		out = append(out, k.Name)
	}
	return out
}

// Lookup returns the kind named name (a leading colon is ignored).
func (c *Catalog) Lookup(name string) (Kind, bool) {
	i := c.index(strings.TrimPrefix(name, ":"))
	if i < 0 {
		return Kind{}, false
	}
	return c.kinds[i], true
}

// Choose picks the kind of a start call: the one explicit names, else the
// first whose Detect accepts target (the stream's absolute endpoint or
// server URL). The error names the unknown transport and the known ones.
func (c *Catalog) Choose(explicit, target string) (Kind, error) {
	if explicit = strings.TrimPrefix(strings.TrimSpace(explicit), ":"); explicit != "" {
		if k, ok := c.Lookup(explicit); ok {
			return k, nil
		}
		return Kind{}, fmt.Errorf("no transport :%s (this host has %s)", explicit, c.describeNames())
	}
	u, err := url.Parse(target)
	if err == nil {
		for _, fallback := range []bool{false, true} {
			for _, k := range c.Kinds() {
				if k.Detect != nil && k.Fallback == fallback && k.Detect(u) {
					return k, nil
				}
			}
		}
	}
	return Kind{}, fmt.Errorf("no transport reads %q; name one with :transport (this host has %s)", target, c.describeNames())
}

func (c *Catalog) describeNames() string {
	names := c.Names()
	if len(names) == 0 {
		return "none"
	}
	for i, n := range names {
		names[i] = ":" + n
	}
	return strings.Join(names, " ")
}

// Keys returns the start keys of all kinds, each once, in catalog order,
// with the names of the transports that read each.
func (c *Catalog) Keys() []KeyUse {
	var out []KeyUse
	for _, k := range c.Kinds() {
		for _, key := range k.Keys {
			i := slices.IndexFunc(out, func(u KeyUse) bool { return u.Name == key.Name })
			if i < 0 {
				out = append(out, KeyUse{Key: key})
				i = len(out) - 1
			}
			out[i].Transports = append(out[i].Transports, k.Name)
		}
	}
	return out
}

// A KeyUse is a transport start key with the transports that read it.
type KeyUse struct {
	Key
	Transports []string
}

// RestartKey is the :restart start key of the transports whose source can
// be started again after a failure (a program, an MCP tool call): :never,
// the default, or :on-failure.
func RestartKey() Key {
	return Key{Name: "restart", Type: "keyword|string", Enum: []string{"never", "on-failure"},
		Doc: ":on-failure starts the source again (the program, or the MCP tool call) when it fails or the host restarts; default :never"}
}

// ParseRestart reads :restart from a start call's transport keys: true for
// :on-failure. The error names the key and the accepted values.
func ParseRestart(keys map[string]json.RawMessage) (bool, error) {
	raw, ok := keys["restart"]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return false, fmt.Errorf(":restart: want a keyword, got %s", raw)
	}
	switch strings.TrimPrefix(s, ":") {
	case "", "never":
		return false, nil
	case "on-failure":
		return true, nil
	}
	return false, fmt.Errorf(":restart: want :never or :on-failure, got %q", s)
}
