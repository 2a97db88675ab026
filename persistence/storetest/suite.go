package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

// TestStore checks that the stores made by open behave as persistence.Store
// documents: atomic ordered batches, copies in and out, ordered prefix scans
// over a snapshot that stop early on ErrStopScan, atomicity seen by concurrent
// readers, and errors after Close. open must return a new, empty store; the
// suite closes it.
func TestStore(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"PutGetDelete", testPutGetDelete},
		{"BatchOrder", testBatchOrder},
		{"InvalidBatchAppliesNothing", testInvalidBatch},
		{"CopiesInAndOut", testCopies},
		{"ScanOrderAndPrefix", testScanOrder},
		{"ScanStopsEarly", testScanStop},
		{"ScanSnapshot", testScanSnapshot},
		{"ConcurrentAtomicity", testConcurrentAtomicity},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tc.fn(t, s)
		})
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

func wantValue(t *testing.T, s persistence.Store, key, want string) {
	t.Helper()
	got, err := s.Get(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantMissing(t *testing.T, s persistence.Store, key string) {
	t.Helper()
	_, err := s.Get(context.Background(), []byte(key))
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get(%q) error = %v, want ErrNotFound", key, err)
	}
	if err != nil && !strings.Contains(err.Error(), key) {
		t.Fatalf("Get(%q) error %q does not name the key", key, err)
	}
}

// scanAll returns "k=v" for every key under prefix, in scan order.
func scanAll(t *testing.T, s persistence.Store, prefix string) []string {
	t.Helper()
	var out []string
	err := s.Scan(context.Background(), []byte(prefix), func(k, v []byte) error {
		out = append(out, string(k)+"="+string(v))
		return nil
	})
	if err != nil {
		t.Fatalf("Scan(%q): %v", prefix, err)
	}
	return out
}

func testPutGetDelete(t *testing.T, s persistence.Store) {
	wantMissing(t, s, "a")
	put(t, s, "a", "1", "b", "2", "empty", "")
	wantValue(t, s, "a", "1")
	wantValue(t, s, "empty", "")
	var b persistence.Batch
	b.Delete([]byte("a"))
	b.Delete([]byte("never-there"))
	b.Put([]byte("b"), []byte("3"))
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, s, "a")
	wantValue(t, s, "b", "3")
	if err := s.Commit(context.Background(), &persistence.Batch{}); err != nil {
		t.Fatalf("empty Commit: %v", err)
	}
}

func testBatchOrder(t *testing.T, s persistence.Store) {
	var b persistence.Batch
	b.Put([]byte("k"), []byte("first"))
	b.Put([]byte("k"), []byte("second"))
	b.Put([]byte("gone"), []byte("x"))
	b.Delete([]byte("gone"))
	b.Delete([]byte("back"))
	b.Put([]byte("back"), []byte("y"))
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "k", "second")
	wantMissing(t, s, "gone")
	wantValue(t, s, "back", "y")
}

func testInvalidBatch(t *testing.T, s persistence.Store) {
	var b persistence.Batch
	b.Put([]byte("ok"), []byte("1"))
	b.Put(nil, []byte("2"))
	err := s.Commit(context.Background(), &b)
	if err == nil || !strings.Contains(err.Error(), "operation 1") || !strings.Contains(err.Error(), "empty key") {
		t.Fatalf("Commit with an empty key: error = %v, want one naming operation 1 and the empty key", err)
	}
	wantMissing(t, s, "ok")
}

func testCopies(t *testing.T, s persistence.Store) {
	key, val := []byte("key"), []byte("value")
	var b persistence.Batch
	b.Put(key, val)
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	copy(key, "XXX")
	copy(val, "XXXXX")
	wantValue(t, s, "key", "value")
	got, _ := s.Get(context.Background(), []byte("key"))
	copy(got, "YYYYY")
	wantValue(t, s, "key", "value")
}

func testScanOrder(t *testing.T, s persistence.Store) {
	put(t, s, "s/b", "2", "s/a", "1", "s/c/x", "3", "t/a", "no", "s", "no", "r/z", "no")
	got := strings.Join(scanAll(t, s, "s/"), " ")
	if want := "s/a=1 s/b=2 s/c/x=3"; got != want {
		t.Fatalf("Scan(s/) = %s, want %s", got, want)
	}
	if got := scanAll(t, s, "nothing/"); len(got) != 0 {
		t.Fatalf("Scan(nothing/) = %v, want none", got)
	}
	if got := len(scanAll(t, s, "")); got != 6 {
		t.Fatalf("Scan(\"\") saw %d keys, want 6", got)
	}
}

func testScanStop(t *testing.T, s persistence.Store) {
	put(t, s, "p/1", "a", "p/2", "b", "p/3", "c")
	var seen []string
	err := s.Scan(context.Background(), []byte("p/"), func(k, v []byte) error {
		seen = append(seen, string(k))
		if len(seen) == 2 {
			return persistence.ErrStopScan
		}
		return nil
	})
	if err != nil || strings.Join(seen, ",") != "p/1,p/2" {
		t.Fatalf("Scan with ErrStopScan: saw %v, err %v; want p/1,p/2 and nil", seen, err)
	}
	boom := errors.New("boom")
	err = s.Scan(context.Background(), []byte("p/"), func(k, v []byte) error {
		if string(k) == "p/2" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "p/2") {
		t.Fatalf("Scan with a failing callback: err = %v, want it wrapped naming key p/2", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Scan(ctx, []byte("p/"), func(k, v []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan with a cancelled context: err = %v, want context.Canceled", err)
	}
}

func testScanSnapshot(t *testing.T, s persistence.Store) {
	put(t, s, "q/1", "a", "q/2", "b")
	var seen []string
	err := s.Scan(context.Background(), []byte("q/"), func(k, v []byte) error {
		seen = append(seen, string(k)+"="+string(v))
		if string(k) == "q/1" {
			// Writing from inside the callback must work and must not
			// change what this scan sees.
			put(t, s, "q/2", "changed", "q/3", "new")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, " "); got != "q/1=a q/2=b" {
		t.Fatalf("scan saw %s, want its snapshot q/1=a q/2=b", got)
	}
	if got := strings.Join(scanAll(t, s, "q/"), " "); got != "q/1=a q/2=changed q/3=new" {
		t.Fatalf("later scan saw %s", got)
	}
}

// testConcurrentAtomicity has writers commit batches that set every key of
// their group to one value while readers scan: a reader must never see a
// group with mixed values.
func testConcurrentAtomicity(t *testing.T, s persistence.Store) {
	const writers, rounds, keys = 4, 60, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- writeGroups(s, w, rounds, keys)
		}()
		go func() {
			defer wg.Done()
			errs <- checkGroups(s, w, rounds, keys)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeGroups(s persistence.Store, w, rounds, keys int) error {
	for r := 1; r <= rounds; r++ {
		var b persistence.Batch
		for k := range keys {
			b.Put(fmt.Appendf(nil, "g%d/%d", w, k), fmt.Appendf(nil, "%d", r))
		}
		if err := s.Commit(context.Background(), &b); err != nil {
			return err
		}
	}
	return nil
}

func checkGroups(s persistence.Store, w, rounds, keys int) error {
	prefix := fmt.Appendf(nil, "g%d/", w)
	for range rounds {
		var first []byte
		n := 0
		err := s.Scan(context.Background(), prefix, func(k, v []byte) error {
			if n == 0 {
				first = bytes.Clone(v)
			} else if !bytes.Equal(v, first) {
				return fmt.Errorf("group %s is torn: key %s has %s, the first key has %s", prefix, k, v, first)
			}
			n++
			return nil
		})
		if err != nil {
			return err
		}
		if n != 0 && n != keys {
			return fmt.Errorf("group %s has %d keys, want 0 or %d", prefix, n, keys)
		}
	}
	return nil
}

func testClosed(t *testing.T, s persistence.Store) {
	put(t, s, "a", "1")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	var b persistence.Batch
	b.Put([]byte("a"), []byte("2"))
	if err := s.Commit(ctx, &b); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("Commit after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Get(ctx, []byte("a")); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := s.Scan(ctx, nil, func(k, v []byte) error { return nil }); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("Scan after Close: %v, want ErrClosed", err)
	}
}
