package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A damaged data directory is refused loudly or read exactly; never a panic,
// never a silently empty store.

var testOpts = Options{GCInterval: -1, MinFreeBytes: -1}

// damageFixture writes known records: batch A, flushed to tables by a clean
// close, then (for the crashed variant) batch B, left in the write-ahead log
// of a store copied while it was open, as a kill -9 would leave it. Values of
// over 1 KiB go to the value log.
func damageFixture(t *testing.T, crashed bool) (dir string, want map[string][]byte) {
	t.Helper()
	live := t.TempDir()
	want = map[string][]byte{}
	s, err := OpenBadger(live, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		b := new(Batch)
		k, v := fmt.Sprintf("a%04d", i), EncodeRecord(7, 1, bytes.Repeat([]byte{byte(i)}, 100+i*10))
		b.Put([]byte(k), v)
		want[k] = v
		if err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !crashed {
		return live, want
	}
	if s, err = OpenBadger(live, testOpts); err != nil {
		t.Fatal(err)
	}
	b := new(Batch)
	late := EncodeRecord(7, 1, []byte("only in the write-ahead log"))
	b.Put([]byte("b-late"), late)
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	want["b-late"] = late
	dir = t.TempDir()
	copyDir(t, live, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "LOCK"))
	return dir, want
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

type damage func(t *testing.T, path string)

func truncateHalf(t *testing.T, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// flipAt returns a damage that flips one bit at the given fraction of the
// file's data (for a write-ahead log, of its written part).
func flipAt(frac float64) damage {
	return func(t *testing.T, path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := len(bytes.TrimRight(data, "\x00"))
		if n == 0 {
			n = len(data)
		}
		data[int(float64(n)*frac)] ^= 0x10
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(t *testing.T, path string) {
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// outcome opens dir and reads everything back, as the provider does: every
// value is a framed record, decoded with its CRC checked. It returns the
// records read, or the error of the open, of a read or of a record's frame
// (a *CorruptRecordError naming the key, which the provider reports); a
// panic is a test failure.
func outcome(t *testing.T, dir string, keys []string) (got map[string][]byte, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	s, err := OpenBadger(dir, testOpts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	got = map[string][]byte{}
	err = s.Scan(ctx, nil, func(k, v []byte) error {
		if _, _, err := DecodeRecord(k, v, 7, 1); err != nil {
			return err
		}
		got[string(k)] = append([]byte(nil), v...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if _, err := s.Get(ctx, []byte(k)); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return got, nil
}

func TestDamagedStores(t *testing.T) {
	damages := []struct {
		name string
		do   damage
	}{{"truncate", truncateHalf}, {"bit flip", flipAt(0.5)}, {"late bit flip", flipAt(0.8)}, {"delete", remove}}
	kinds := []struct {
		glob    string
		crashed bool
		// walLoss: Badger reads a write-ahead log up to its first bad
		// record, exactly as after a torn write (a kill -9 leaves short
		// logs too), and a deleted one leaves no trace: what only it held
		// is lost without an error. Everything flushed before must still
		// be exact.
		walLoss map[string]bool
	}{
		{glob: "*.sst"},
		{glob: "*.vlog"},
		{glob: "MANIFEST"},
		{glob: "KEYREGISTRY"},
		{glob: "*.mem", crashed: true, walLoss: map[string]bool{"truncate": true, "bit flip": true, "late bit flip": true, "delete": true}},
	}
	for _, k := range kinds {
		for _, d := range damages {
			t.Run(strings.TrimPrefix(k.glob, "*")+"/"+d.name, func(t *testing.T) {
				dir, want := damageFixture(t, k.crashed)
				files, _ := filepath.Glob(filepath.Join(dir, k.glob))
				if len(files) == 0 {
					t.Fatalf("the fixture has no %s file", k.glob)
				}
				sort.Strings(files)
				d.do(t, files[0])
				keys := make([]string, 0, len(want))
				for key := range want {
					keys = append(keys, key)
				}
				got, err := outcome(t, dir, keys)
				if err != nil {
					var ce *CorruptRecordError
					if errors.As(err, &ce) {
						return // a damaged value, caught by its record's CRC and named by key
					}
					if !errors.Is(err, ErrDamaged) {
						t.Fatalf("error %v (%T) is not a clear refusal (*DamagedError)", err, err)
					}
					if !strings.Contains(err.Error(), "nothing was changed") {
						t.Errorf("refusal %q does not say that nothing was changed", err)
					}
					return
				}
				if len(got) == 0 {
					t.Fatal("the damaged store opened as empty: the streams would silently vanish")
				}
				for key, v := range want {
					if key == "b-late" && k.walLoss[d.name] {
						continue
					}
					if !bytes.Equal(got[key], v) {
						t.Fatalf("key %s: read %d bytes, want %d: neither exact data nor a refusal", key, len(got[key]), len(v))
					}
				}
			})
		}
	}
}

func TestDamagedStoreRefusalChangesNothing(t *testing.T) {
	dir, _ := damageFixture(t, false)
	remove(t, filepath.Join(dir, "MANIFEST"))
	before, _ := os.ReadDir(dir)
	_, err := OpenBadger(dir, testOpts)
	var de *DamagedError
	if !errors.As(err, &de) || !strings.Contains(de.Problem, "MANIFEST is missing") {
		t.Fatalf("open without MANIFEST: %v", err)
	}
	after, _ := os.ReadDir(dir)
	if len(before) != len(after) {
		t.Errorf("the refused open changed the directory: %d files before, %d after", len(before), len(after))
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the refused open created a MANIFEST")
	}
}

// TestCrashLeftoverTableIsNoDamage: a table file the MANIFEST does not list
// (a flush a kill -9 cut short: often empty) is no damage; the store opens
// with every record exact, and Badger removes the leftover.
func TestCrashLeftoverTableIsNoDamage(t *testing.T) {
	for _, content := range []string{"", "half a table"} {
		dir, want := damageFixture(t, false)
		leftover := filepath.Join(dir, "999999.sst")
		if err := os.WriteFile(leftover, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(want))
		for key := range want {
			keys = append(keys, key)
		}
		got, err := outcome(t, dir, keys)
		if err != nil {
			t.Fatalf("leftover of %d bytes: open = %v", len(content), err)
		}
		for key, v := range want {
			if !bytes.Equal(got[key], v) {
				t.Fatalf("key %s: read %d bytes, want %d", key, len(got[key]), len(v))
			}
		}
	}
}
