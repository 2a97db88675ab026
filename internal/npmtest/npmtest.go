// Package npmtest installs the Node.js packages that some tests drive
// rtfshost with (the TypeScript MCP SDK's client, the official MCP
// conformance suite): npm ci of a project kept under testdata, once per
// lock file, into the user's cache directory.
//
// Install returns the installed project; Node the node binary to run it
// with. Nothing here skips a test: a machine without npm fails the test,
// saying what to install (.ci/run installs it).
package npmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// Options adjust Install.
type Options struct {
	// Scripts runs the packages' install scripts (npm ci without
	// --ignore-scripts): the npm package node@22, which brings a Node.js
	// 22 binary for the machine from the registry, needs them.
	Scripts bool
}

// Install returns a directory holding the npm project in src (its
// package.json, package-lock.json and every other file of the directory)
// with its dependencies installed by npm ci. The install is made once per
// content of the project's files, in a directory of the user's cache named
// by their hash, and renamed into place whole, so that concurrent tests and
// later runs share it. It fails t when npm is missing or the install fails.
func Install(t testing.TB, src string, opts Options) string {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		files[rel] = b
		return nil
	})
	if err != nil {
		t.Fatalf("npmtest: reading %s: %v", src, err)
	}
	if files["package.json"] == nil || files["package-lock.json"] == nil {
		t.Fatalf("npmtest: %s has no package.json and package-lock.json", src)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "rtfshost-test", filepath.Base(src)+"-"+hex.EncodeToString(h.Sum(nil)[:8]))
	// npm ci writes node_modules/.package-lock.json last.
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
		return dir
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not installed: it installs the packages of %s (apt-get install nodejs npm; .ci/run does)", src)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, n := range names {
		p := filepath.Join(tmp, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"ci", "--no-audit", "--no-fund"}
	if !opts.Scripts {
		args = append(args, "--ignore-scripts")
	}
	install := exec.CommandContext(ctx, npm, args...)
	install.Dir = tmp
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of %s: %v\n%s", src, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); statErr != nil { // not another test's install
			t.Fatal(err)
		}
	}
	return dir
}

// Node returns the node binary to run an installed project with: the one
// the project installed (node_modules/.bin/node, from the npm package
// node), else node on PATH. It fails t when there is none.
func Node(t testing.TB, dir string) string {
	t.Helper()
	if p := filepath.Join(dir, "node_modules", ".bin", "node"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (apt-get install nodejs npm; .ci/run does)")
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
