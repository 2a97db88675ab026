package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

func TestDocCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"doc", "update-in"}, exitOK, "(update-in m ks f args...)\n  nested update\n"},
		{[]string{"doc", "str/join"}, exitOK, "(str/join coll) (str/join sep coll)"},
		{[]string{"doc", "partit"}, exitOK, "(partition-all n step? coll)"},
		{[]string{"doc"}, exitOK, "(round-to x n)"},
		{[]string{"doc", "no-such-fn"}, exitProgramError, `no RTFS function, special form or host call is called "no-such-fn"`},
		{[]string{"doc", "->>"}, exitOK, "(->> x (f a) g ...)\n  threads x as the last argument through each form\n  (special form)\n"},
		{[]string{"doc", "->"}, exitOK, "(-> x (f a) g ...)"},
		{[]string{"doc", "let"}, exitOK, "(let [name value ...] body...)"},
		{[]string{"doc", "defn"}, exitOK, "(defn name [params] body...)"},
		{[]string{"doc", "fn"}, exitOK, "(fn name? [params] body...)"},
		{[]string{"doc", "loop"}, exitOK, "(loop [name value ...] body...)"},
		{[]string{"doc", "try"}, exitOK, "(try body... (catch Class e handler...)"},
		{[]string{"doc", "catch"}, exitOK, "(catch Class e body...)"},
		{[]string{"doc", "cond"}, exitOK, "(cond test expr ... :else expr)"},
		{[]string{"doc", "call"}, exitOK, "(call :capability args...)\n  a host call"},
		{[]string{"doc", "mcp.stream.start"}, exitOK, "fn|symbol|string, required  called as (processor state chunk metadata)"},
		{[]string{"doc", ":mcp.stream.await"}, exitOK, "(call :mcp.stream.await {:stream-id .. ...})"},
		{[]string{"doc", "ccos.io.log"}, exitOK, "(host call)"},
		{[]string{"doc", "--help"}, exitOK, "rtfshost doc ->>"},
		{[]string{"doc"}, exitOK, "special forms:\n"},
		{[]string{"doc"}, exitOK, "host calls:\n"},
		{[]string{"doc", "a", "b"}, exitProgramError, "doc takes at most one name"},
		{[]string{"doc", "Math/PI"}, exitOK, "Math/PI\n  the constant 3.141592653589793 (Java's, as a double)\n  (constant)\n"},
	} {
		var stdout, stderr bytes.Buffer
		a := newApp(strings.NewReader(""), &stdout, &stderr)
		code := a.execute(context.Background(), tc.args)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q; want %d and %q", tc.args, code, stdout.String()+stderr.String(), tc.code, tc.want)
		}
	}
}

// TestDocAndVersionJSON: doc --json prints one JSON object per entry (a
// host call's keys with it), version --json one object; an unknown name
// is an error line on stdout and nothing on stderr.
func TestDocAndVersionJSON(t *testing.T) {
	run := func(args ...string) (int, []map[string]any, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := newApp(strings.NewReader(""), &stdout, &stderr).execute(context.Background(), args)
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%v: line %q is not JSON: %v", args, l, err)
			}
			lines = append(lines, m)
		}
		return code, lines, stderr.String()
	}
	code, lines, stderr := run("doc", "--json", "mcp.stream.await")
	if code != exitOK || stderr != "" || len(lines) != 1 || lines[0]["type"] != "doc" || lines[0]["kind"] != "host call" {
		t.Fatalf("doc --json mcp.stream.await: %d %v %q", code, lines, stderr)
	}
	if keys, _ := lines[0]["keys"].([]any); len(keys) == 0 || keys[0].(map[string]any)["name"] != "stream-id" || keys[0].(map[string]any)["required"] != true {
		t.Errorf("keys %v", lines[0]["keys"])
	}
	if code, lines, _ := run("doc", "update-in", "--json"); code != exitOK || len(lines) != 1 || lines[0]["usage"] != "(update-in m ks f args...)" || lines[0]["kind"] != "function" {
		t.Errorf("doc update-in --json: %d %v", code, lines)
	}
	if code, lines, _ := run("doc", "--json"); code != exitOK || len(lines) < 300 {
		t.Errorf("doc --json: %d, %d lines", code, len(lines))
	}
	if code, lines, stderr := run("doc", "--json", "no-such-fn"); code != exitProgramError || stderr != "" || len(lines) != 1 || lines[0]["type"] != "error" {
		t.Errorf("doc --json no-such-fn: %d %v %q", code, lines, stderr)
	}
	code, lines, stderr = run("version", "--json")
	if code != exitOK || stderr != "" || len(lines) != 1 || lines[0]["type"] != "version" || lines[0]["store-format"] != float64(persistence.StoreFormat) || lines[0]["compile-version"] != rtfs.CompileVersion() {
		t.Errorf("version --json: %d %v %q", code, lines, stderr)
	}
}
