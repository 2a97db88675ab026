package persistence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// dirState describes every file of dir (name, size, content hash), to
// show that an open changed nothing.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %d %x", e.Name(), len(data), sha256.Sum256(data)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func putKeys(t *testing.T, s Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		var b Batch
		b.Put(fmt.Appendf(nil, "%s%04d", prefix, i), bytes.Repeat([]byte{byte(i)}, 50+i*20))
		if err := s.Commit(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
}

func countKeys(t *testing.T, s Store, prefix string) int {
	t.Helper()
	n := 0
	if err := s.Scan(context.Background(), []byte(prefix), func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReadOnlyOpenChangesNothing: a cleanly closed store and a store a
// crash left with its write-ahead log are both read with every record, by
// a store that refuses writes, and neither directory changes; the copy
// that the crashed one is read from is gone after Close.
func TestReadOnlyOpenChangesNothing(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crashed=%v", crashed), func(t *testing.T) {
			dir, want := damageFixture(t, crashed)
			before := dirState(t, dir)
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			s, err := OpenBadgerReadOnly(dir, testOpts)
			if err != nil {
				t.Fatal(err)
			}
			if (s.scratch != "") != crashed {
				t.Errorf("read from a copy: %v, want %v", s.scratch != "", crashed)
			}
			for k, v := range want {
				got, err := s.Get(context.Background(), []byte(k))
				if err != nil || !bytes.Equal(got, v) {
					t.Fatalf("key %s: %d bytes, %v", k, len(got), err)
				}
			}
			if err := commitOne(s); !errors.Is(err, ErrReadOnly) {
				t.Errorf("commit on a read-only store: %v, want ErrReadOnly", err)
			}
			// Readers do not exclude each other.
			r2, err := OpenBadgerReadOnly(dir, testOpts)
			if err != nil {
				t.Fatalf("a second reader: %v", err)
			}
			if err := r2.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if after := dirState(t, dir); after != before {
				t.Errorf("the read-only open changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("Close left %d entries in the temporary directory", len(left))
			}
		})
	}
}

// TestReadOnlyOpenWhileHeld: a store open read-write refuses readers with
// a *LockedError that names the directory; a writer waits for the readers
// to finish.
func TestReadOnlyOpenWhileHeld(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenBadger(dir, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = OpenBadgerReadOnly(dir, testOpts)
	var le *LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("read-only open of a held directory: %v, want a *LockedError", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := OpenBadgerReadOnly(dir, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	var readerClosed atomic.Bool
	opened := make(chan error, 1)
	go func() {
		w, err := OpenBadger(dir, testOpts)
		if err == nil {
			if !readerClosed.Load() {
				err = errors.New("the writer opened beside a reader")
			}
			w.Close()
		}
		opened <- err
	}()
	time.Sleep(100 * time.Millisecond) // a chance for the writer to get in wrongly
	readerClosed.Store(true)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("writer waiting for a reader: %v", err)
	}
}

// olderManifest builds a store whose MANIFEST is an older but valid one:
// records a0..., flushed to a table by a clean close; a copy of MANIFEST;
// records b0..., in a table of their own; the copy put back.
func olderManifest(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i, prefix := range []string{"a", "b"} {
		s, err := OpenBadger(dir, testOpts)
		if err != nil {
			t.Fatal(err)
		}
		putKeys(t, s, prefix, 40)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			data, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}()
		}
	}
	return dir
}

// TestOlderManifestIsRefused: a MANIFEST older than the tables (Badger's
// open, read-only included, would delete the table it does not list, and
// its records with it) is refused as damaged by both opens, and nothing in
// the directory changes.
func TestOlderManifestIsRefused(t *testing.T) {
	dir := olderManifest(t)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) < 2 {
		t.Fatalf("the fixture has %d tables, want 2 (one per close)", len(tables))
	}
	before := dirState(t, dir)
	for name, open := range map[string]func(string, Options) (*BadgerStore, error){"read-only": OpenBadgerReadOnly, "read-write": OpenBadger} {
		s, err := open(dir, testOpts)
		if err == nil {
			s.Close()
		}
		var de *DamagedError
		if !errors.As(err, &de) || !strings.Contains(de.Problem, "MANIFEST is older than the tables") {
			t.Fatalf("%s open: %v, want a *DamagedError naming the older MANIFEST", name, err)
		}
		if after := dirState(t, dir); after != before {
			t.Fatalf("the refused %s open changed the directory:\nbefore:\n%s\nafter:\n%s", name, before, after)
		}
	}
}

// TestUnlistedFlushLeftoverIsNoDamage: a table that a flush wrote from the
// write-ahead log and a kill kept from being recorded in MANIFEST holds
// nothing of its own: the store opens with every record, read-only (from a
// copy) and read-write.
func TestUnlistedFlushLeftoverIsNoDamage(t *testing.T) {
	crashed, want := damageFixture(t, true)
	// The table a read-write open of a copy flushes the write-ahead log to
	// is the table a cut-short flush would have left behind.
	flushed := t.TempDir()
	copyDir(t, crashed, flushed)
	before := map[string]bool{}
	old, _ := filepath.Glob(filepath.Join(crashed, "*.sst"))
	for _, f := range old {
		before[filepath.Base(f)] = true
	}
	s, err := OpenBadger(flushed, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(flushed, "*.sst"))
	var leftover string
	for _, f := range tables {
		if !before[filepath.Base(f)] {
			leftover = f
		}
	}
	if leftover == "" {
		t.Fatal("the open flushed no table")
	}
	data, err := os.ReadFile(leftover)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, filepath.Base(leftover)), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkIntact(crashed); err != nil {
		t.Fatalf("a flush's leftover table is taken for damage: %v", err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	for name, open := range map[string]func(string, Options) (*BadgerStore, error){"read-only": OpenBadgerReadOnly, "read-write": OpenBadger} {
		s, err := open(crashed, testOpts)
		if err != nil {
			t.Fatalf("%s open: %v", name, err)
		}
		for k, v := range want {
			got, err := s.Get(context.Background(), []byte(k))
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("%s open: key %s: %d bytes, %v", name, k, len(got), err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
