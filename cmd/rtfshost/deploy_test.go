package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeployFiles keeps the deployment files and docs/deploy.md true:
// every rtfshost command line in the Dockerfile, the systemd unit, the
// compose file and the page parses as a command rtfshost has, with flags
// it has, and the image is built with the Go of go.mod.
func TestDeployFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var lines [][]string
	// JSON-array command lines: the Dockerfile's CMD, compose's command:
	// and the page's Kubernetes args:.
	arrays := regexp.MustCompile(`(?m)(?:^CMD|command:|args:)\s*(\[.*\])\s*$`)
	for _, name := range []string{"Dockerfile", "deploy/compose.yaml", "docs/deploy.md"} {
		for _, m := range arrays.FindAllStringSubmatch(read(name), -1) {
			var args []string
			if err := json.Unmarshal([]byte(m[1]), &args); err != nil {
				t.Fatalf("%s: %s: %v", name, m[1], err)
			}
			if len(args) > 0 && args[0] == "serve" {
				lines = append(lines, args)
			}
		}
	}
	// Shell command lines: the unit's ExecStart and the page's examples.
	shell := regexp.MustCompile(`(?m)(?:^ExecStart=/usr/local/bin/|^)rtfshost (serve .*)$`)
	for _, name := range []string{"deploy/rtfshost.service", "docs/deploy.md"} {
		for _, m := range shell.FindAllStringSubmatch(read(name), -1) {
			lines = append(lines, strings.Fields(m[1]))
		}
	}
	if len(lines) < 7 {
		t.Fatalf("found %d command lines, want the Dockerfile's, the unit's, compose's three and the page's", len(lines))
	}
	for _, args := range lines {
		a := newApp(strings.NewReader(""), io.Discard, io.Discard)
		cmd, rest, err := a.root.Find(args)
		if err != nil || cmd.Name() != args[0] {
			t.Errorf("%v: no such command: %v", args, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("rtfshost %s: %v", strings.Join(args, " "), err)
		}
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(read("go.mod"))
	if goVersion == nil || !strings.Contains(read("Dockerfile"), "FROM golang:"+goVersion[1]+"-") {
		t.Errorf("the Dockerfile does not build with the Go of go.mod (%v)", goVersion)
	}
}
