// Package proc is the process machinery of the transports that start a
// program (stdio, exec): the start keys they share and their parsing
// (Config), starting the program in a process group of its own with a
// minimal environment, under a keeper that kills the group when the host
// dies (Start, keeper_unix.go) and, on Linux, in a cgroup leaf of its own
// that is killed whole when the keeper exits (cgroup_linux.go), reading
// its output bounded in memory
// (LineReader), keeping the tail of its stderr for errors (Tail), stopping
// it so that no process of its group and no zombie survives (Process.Stop),
// and ending a group that a crashed host left running (EndStale).
//
// The main types are Config and Process.
package proc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rtfshost/rtfshost/transport"
)

// Keys are the start keys every process transport reads.
func Keys() []transport.Key {
	return []transport.Key{
		{Name: "command", Type: "string", Doc: "the program to run: a name looked up in PATH, or a path"},
		{Name: "args", Type: "vector", Doc: "its arguments, strings"},
		{Name: "env", Type: "map", Doc: "environment variables, merged over a minimal environment (PATH, HOME, LANG, ...)"},
		{Name: "cwd", Type: "string", Doc: "its working directory (default the host's)"},
		transport.RestartKey(),
	}
}

// Config is what a process transport starts. It is a value, read-only once
// built; it implements transport.Spawner.
type Config struct {
	Command string            // as given: a name looked up in PATH, or a path
	Args    []string          // the arguments
	Env     map[string]string // merged over the minimal environment
	Dir     string            // working directory; "" the host's
	Restart bool              // :restart :on-failure
}

// Executable returns the command as the egress policy checks it.
func (c *Config) Executable() string { return c.Command }

// Parse builds the Config from a start call's keys (JSON values, keywords
// as their names). Errors name the key and what it should be.
func Parse(keys map[string]json.RawMessage) (Config, error) {
	var c Config
	if err := field(keys, "command", &c.Command); err != nil {
		return c, err
	}
	if strings.TrimSpace(c.Command) == "" {
		return c, fmt.Errorf(":command: required: the program to run")
	}
	if strings.ContainsRune(c.Command, 0) {
		return c, fmt.Errorf(":command: must not contain a NUL character")
	}
	if err := field(keys, "args", &c.Args); err != nil {
		return c, err
	}
	if err := field(keys, "env", &c.Env); err != nil {
		return c, err
	}
	for k, v := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return c, fmt.Errorf(":env: %q is not a valid environment variable (no '=' or NUL in the name, no NUL in the value)", k)
		}
	}
	if err := field(keys, "cwd", &c.Dir); err != nil {
		return c, err
	}
	var err error
	c.Restart, err = transport.ParseRestart(keys)
	return c, err
}

// field decodes keys[name] into v when present, naming the key and the
// expected type on failure.
func field(keys map[string]json.RawMessage, name string, v any) error {
	raw, ok := keys[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		want := map[string]string{"command": "a string", "cwd": "a string",
			"args": "a vector of strings", "env": "a map of strings to strings"}[name]
		return fmt.Errorf(":%s: want %s, got %s", name, want, raw)
	}
	return nil
}

// baseEnv are the variables a child inherits from the host: enough to find
// programs and run them, nothing that names a credential.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "SYSTEMROOT"}

// environ returns the child's environment: baseEnv from the host, then
// c.Env over it, sorted.
func (c *Config) environ() []string {
	m := make(map[string]string, len(baseEnv)+len(c.Env))
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range c.Env {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// EnvNames returns the names of the variables :env sets, sorted.
func (c *Config) EnvNames() []string {
	names := make([]string, 0, len(c.Env))
	for k := range c.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Name is the program's base name, for ids, logs and errors.
func (c *Config) Name() string { return filepath.Base(c.Command) }
