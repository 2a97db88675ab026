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
		{[]string{"doc", "no-such-fn"}, exitProgramError, `no RTFS function is called "no-such-fn"`},
	} {
		var stdout, stderr bytes.Buffer
		a := newApp(strings.NewReader(""), &stdout, &stderr)
		code := a.execute(context.Background(), tc.args)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q; want %d and %q", tc.args, code, stdout.String()+stderr.String(), tc.code, tc.want)
		}
	}
}
