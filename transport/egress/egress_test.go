package egress

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

func TestPolicyPrefixes(t *testing.T) {
	p, err := New(Options{Servers: []string{"http://127.0.0.1:2025", "https://Example.com/api/"}, ServerFlag: "--allow-server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:2025/sse", true},
		{"http://127.0.0.1:2025", true},
		{"HTTP://127.0.0.1:2025/mcp", true},
		{"http://127.0.0.1:20250/sse", false},
		{"http://127.0.0.1:2025.evil.com/sse", false},
		{"http://127.0.0.1/sse", false},
		{"https://127.0.0.1:2025/sse", false},
		{"http://user:pw@127.0.0.1:2025/sse", false},
		{"https://example.com/api", true},
		{"https://example.com:443/api/v1/stream", true},
		{"https://example.com/apiv2", false},
		{"https://example.com/api/../admin", false},
		{"https://example.com/api/%2e%2e/admin", false},
		{"https://example.com/api/.%2E/admin", false},
		{"https://example.com/api/x%2F..%2F..%2Fadmin", false}, // read so by a server that decodes %2F
		{"https://example.com/api/a%2Fb", true},
		{"https://example.com/api/%7Euser", true},
		{"https://EXAMPLE.com./api/x", true},
		{"hTTp://127.0.0.1:2025/x", true},
		{"http://[::ffff:127.0.0.1]:2025/x", true},
		{"http://2130706433:2025/x", false},
		{"http://0x7f.0.0.1:2025/x", false},
		{"https://example.com/", false},
		{"ftp://127.0.0.1:2025/x", false},
		{"/relative", false},
		{"", false},
	} {
		err := p.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want allowed=%v", tc.url, err, tc.ok)
		}
		if err != nil {
			if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "--allow-server") {
				t.Errorf("CheckURL(%q): error %q does not name the flag", tc.url, err)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("CheckURL(%q): error %q shows the password", tc.url, err)
			}
		}
	}
	for _, bad := range []string{"not a url", "http://u:p@host", "http://host/?q=1", "mailto:x"} {
		if _, err := New(Options{Servers: []string{bad}}); err == nil {
			t.Errorf("New accepted the prefix %q", bad)
		}
	}
	var nilPolicy *Policy
	if nilPolicy.CheckURL("http://anything") != nil || AllowAll().CheckURL("http://x:1/") != nil {
		t.Error("a nil or allow-all policy refused a URL")
	}
}

func TestPolicyCommands(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("this test needs sh on PATH: %v", err)
	}
	p, err := New(Options{Commands: []string{"sh", "/usr/local/bin/server"}, CommandFlag: "--allow-command",
		Env: []string{"LOG_LEVEL"}, EnvFlag: "--allow-env"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		env  []string
		ok   bool
		flag string
	}{
		{"sh", nil, true, ""},
		{sh, nil, true, ""},                             // where PATH finds the allowed name
		{"/tmp/evil/sh", nil, false, "--allow-command"}, // the same base name elsewhere is another program
		{"./sh", nil, false, "--allow-command"},         // relative paths never match
		{"/usr/local/bin/server", nil, true, ""},
		{"server", nil, false, "--allow-command"},
		{"/tmp/../usr/local/bin/server", nil, true, ""},
		{"bash", nil, false, "--allow-command"},
		{"", nil, false, "--allow-command"},
		{"sh", []string{"LOG_LEVEL"}, true, ""},
		// Only the names the operator listed, whatever they are: these
		// choose what an allowed program runs.
		{"sh", []string{"LOG_LEVEL", "PATH"}, false, "--allow-env"},
		{"sh", []string{"LD_PRELOAD"}, false, "--allow-env"},
		{"sh", []string{"PYTHONWARNINGS"}, false, "--allow-env"},
		{"sh", []string{"BROWSER"}, false, "--allow-env"},
		{"sh", []string{"GIT_CONFIG_COUNT"}, false, "--allow-env"},
		{"sh", []string{"log_level"}, false, "--allow-env"}, // names are exact
		{"bash", []string{"LOG_LEVEL"}, false, "--allow-command"},
	} {
		err := p.CheckCommand(tc.cmd, tc.env)
		if (err == nil) != tc.ok {
			t.Errorf("CheckCommand(%q, %v) = %v, want allowed=%v", tc.cmd, tc.env, err, tc.ok)
		} else if err != nil && !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("CheckCommand(%q, %v): %q does not name %s", tc.cmd, tc.env, err, tc.flag)
		}
		if err != nil && len(tc.env) > 0 && tc.flag == "--allow-env" && !strings.Contains(err.Error(), "variable "+tc.env[len(tc.env)-1]) {
			t.Errorf("CheckCommand(%q, %v): %q does not name the variable", tc.cmd, tc.env, err)
		}
	}
	if AllowAll().CheckCommand("/tmp/anything", []string{"PATH"}) != nil {
		t.Error("allow-all refused a command")
	}
	if _, err := New(Options{Env: []string{"A=B"}}); err == nil {
		t.Error("New accepted the variable name A=B")
	}
}

func TestCredentialHeaderFor(t *testing.T) {
	c := NewCredential("http://127.0.0.1:2025/sse", http.Header{"X-Api-Key": {"k"}})
	for target, want := range map[string]bool{
		"http://127.0.0.1:2025/sse/x": true,
		"http://127.0.0.1:2025/mcp":   true,
		"http://127.0.0.1:2026/sse":   false,
		"http://localhost:2025/sse":   false,
		"https://127.0.0.1:2025/sse":  false,
		"garbage":                     false,
	} {
		u, _ := Parse(target) // nil for garbage: no header
		if got := c.HeaderFor(u).Get("X-Api-Key") == "k"; got != want {
			t.Errorf("HeaderFor(%q) sends the key: %v, want %v", target, got, want)
		}
	}
	if u, _ := Parse("http://127.0.0.1:2025"); len(Credential{}.HeaderFor(u)) != 0 {
		t.Error("the zero credential carries a header")
	}
}
