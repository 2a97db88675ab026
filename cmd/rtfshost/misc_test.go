package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 14 items 2 and 12: check names what it cannot read, and --version
// is a flag as well as a command.
func TestCheckMissingAndDirectories(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.rtfs")
	if err := os.WriteFile(good, []byte("(+ 1 2)"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, &stderr)
	code := a.execute(context.Background(), []string{"check", filepath.Join(dir, "missing.rtfs"), good, dir})
	if code != exitProgramError {
		t.Errorf("exit %d, want %d", code, exitProgramError)
	}
	for _, want := range []string{"missing.rtfs: no such file or directory", "is a directory: name the .rtfs files in it"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	if !strings.Contains(stdout.String(), "good.rtfs: ok") {
		t.Errorf("the readable file was not checked: %q", stdout.String())
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, &stderr)
	if code := a.execute(context.Background(), []string{"--version"}); code != exitOK || stdout.String() != "rtfshost "+version+"\n" {
		t.Errorf("--version: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
}
