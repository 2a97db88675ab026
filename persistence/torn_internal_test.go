package persistence

import (
	"os"
	"path/filepath"
	"testing"
)

// A kill between Badger's creation of a memtable file and its sizing leaves an
// empty .mem file (dgraph-io/badger#2207), on which Badger's own open fails.
// OpenBadger must still open the store, with its data.
func TestOpenBadgerAfterTornMemtable(t *testing.T) { testOpenAfterTornFile(t, "00099.mem") }

// The same for a value-log file: "vlog.open ... Create a new file".
func TestOpenBadgerAfterTornValueLog(t *testing.T) { testOpenAfterTornFile(t, "000099.vlog") }

func testOpenAfterTornFile(t *testing.T, name string) {
	dir := t.TempDir()
	opts := Options{GCInterval: -1, MinFreeBytes: -1}
	s, err := OpenBadger(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.Put([]byte("k"), []byte("v"))
	if err := s.Commit(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(dir, name)
	if err := os.WriteFile(torn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = OpenBadger(dir, opts)
	if err != nil {
		t.Fatalf("OpenBadger after a torn %s: %v", name, err)
	}
	defer s.Close()
	v, err := s.Get(t.Context(), []byte("k"))
	if err != nil || string(v) != "v" {
		t.Fatalf("Get(k) = %q, %v; want \"v\"", v, err)
	}
}
