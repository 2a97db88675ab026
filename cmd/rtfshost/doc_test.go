package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
	} {
		var stdout, stderr bytes.Buffer
		a := newApp(strings.NewReader(""), &stdout, &stderr)
		code := a.execute(context.Background(), tc.args)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q; want %d and %q", tc.args, code, stdout.String()+stderr.String(), tc.code, tc.want)
		}
	}
}
