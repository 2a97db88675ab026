package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

func wantLocked(t *testing.T, err error, dir string) {
	t.Helper()
	var le *persistence.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second open: err = %v, want a *LockedError", err)
	}
	abs, _ := filepath.Abs(dir)
	if le.Dir != abs || !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), "another rtfshost") {
		t.Fatalf("lock error %q does not name %s and another rtfshost", err, abs)
	}
}

func TestLockInProcess(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir, persistence.Options{})
	_, err := persistence.OpenBadger(dir, persistence.Options{})
	wantLocked(t, err, dir)
	// The failed open must not have disturbed the holder.
	put(t, s, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openBadger(t, dir, persistence.Options{})
	if got := get(t, s2, "k"); got != "v" {
		t.Fatalf("after reopen k = %q, want v", got)
	}
}

func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd, lines, stdin := startChild(t, "lock", dir)
	if line := <-lines; line != "ready" {
		t.Fatalf("lock child said %q, want ready", line)
	}
	_, err := persistence.OpenBadger(dir, persistence.Options{})
	wantLocked(t, err, dir)
	// The message names the process that holds the directory.
	if want := fmt.Sprintf("process %d (", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("lock error %q does not name the holder, %s...", err, want)
	}
	// Once the child closes its store, the directory is free again.
	stdin.Close()
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lock child: %v", err)
	}
	openBadger(t, dir, persistence.Options{})
}

func TestCloseTwice(t *testing.T) {
	s, err := persistence.OpenBadger(t.TempDir(), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Sync(); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Sync after Close: %v, want ErrClosed", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	for _, sync := range []bool{false, true} {
		s := openBadger(t, dir, persistence.Options{SyncWrites: sync})
		put(t, s, "k", strings.Repeat("v", 5000)) // above the value threshold: lives in the value log
		put(t, s, "big", strings.Repeat("b", 3<<20))
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openBadger(t, dir, persistence.Options{SyncWrites: sync})
		if got := get(t, s, "k") + get(t, s, "big"); got != strings.Repeat("v", 5000)+strings.Repeat("b", 3<<20) {
			t.Fatalf("SyncWrites=%v: value lost across reopen", sync)
		}
		s.Close()
	}
}

func TestBadOptions(t *testing.T) {
	_, err := persistence.OpenBadger(t.TempDir(), persistence.Options{MemTableSize: 1000})
	if err == nil || !strings.Contains(err.Error(), "MemTableSize") {
		t.Fatalf("tiny MemTableSize: err = %v, want one naming MemTableSize", err)
	}
}

func TestBatchTooLarge(t *testing.T) {
	s := openBadger(t, t.TempDir(), persistence.Options{MemTableSize: 1 << 20})
	var b persistence.Batch
	for i := range 5000 { // ~5000 entries exceed 15% of 1 MiB
		b.Put([]byte(strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("x", i%50)), make([]byte, 100))
	}
	b.Put([]byte("marker"), []byte("1"))
	err := s.Commit(context.Background(), &b)
	if !errors.Is(err, persistence.ErrBatchTooLarge) {
		t.Fatalf("huge batch: err = %v, want ErrBatchTooLarge", err)
	}
	if _, err := s.Get(context.Background(), []byte("marker")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a refused batch left its last key behind: %v", err)
	}
}

func TestBadgerLogsThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := openBadger(t, t.TempDir(), persistence.Options{Logger: logger})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "component=badger") {
		t.Fatalf("no Badger message reached the logger; got %q", buf.String())
	}
}

func put(t *testing.T, s persistence.Store, kv ...string) {
	t.Helper()
	var b persistence.Batch
	for i := 0; i+1 < len(kv); i += 2 {
		b.Put([]byte(kv[i]), []byte(kv[i+1]))
	}
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func get(t *testing.T, s persistence.Store, key string) string {
	t.Helper()
	v, err := s.Get(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v)
}
