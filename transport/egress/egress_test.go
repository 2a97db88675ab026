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
	p, _ := New(Options{Commands: []string{"sh", "/usr/local/bin/server"}, CommandFlag: "--allow-command"})
	for _, tc := range []struct {
		cmd string
		env []string
		ok  bool
	}{
		{"sh", nil, true},
		{sh, nil, true},              // where PATH finds the allowed name
		{"/tmp/evil/sh", nil, false}, // the same base name elsewhere is another program
		{"./sh", nil, false},         // relative paths never match
		{"/usr/local/bin/server", nil, true},
		{"server", nil, false},
		{"/tmp/../usr/local/bin/server", nil, true},
		{"bash", nil, false},
		{"", nil, false},
		{"sh", []string{"LOG_LEVEL"}, true},
		{"sh", []string{"PATH"}, false}, // would choose what sh runs
		{"sh", []string{"LD_PRELOAD"}, false},
		{"sh", []string{"node_options"}, false},
	} {
		if err := p.CheckCommand(tc.cmd, tc.env); (err == nil) != tc.ok {
			t.Errorf("CheckCommand(%q, %v) = %v, want allowed=%v", tc.cmd, tc.env, err, tc.ok)
		} else if err != nil && !strings.Contains(err.Error(), "--allow-command") {
			t.Errorf("CheckCommand(%q): %q does not name the flag", tc.cmd, err)
		}
	}
	if AllowAll().CheckCommand("/tmp/anything", []string{"PATH"}) != nil {
		t.Error("allow-all refused a command")
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
		if got := c.HeaderFor(target).Get("X-Api-Key") == "k"; got != want {
			t.Errorf("HeaderFor(%q) sends the key: %v, want %v", target, got, want)
		}
	}
	if len(Credential{}.HeaderFor("http://127.0.0.1:2025")) != 0 {
		t.Error("the zero credential carries a header")
	}
}
