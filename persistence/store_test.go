package persistence_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) persistence.Store {
		return persistence.NewMemStore()
	})
}

func TestBadgerStoreConformance(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) persistence.Store {
		return openBadger(t, t.TempDir(), persistence.Options{})
	})
}

func TestFaultStoreConformance(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) persistence.Store {
		return storetest.NewFaultStore(persistence.NewMemStore())
	})
}

func openBadger(t testing.TB, dir string, opts persistence.Options) *persistence.BadgerStore {
	t.Helper()
	s, err := persistence.OpenBadger(dir, opts)
	if err != nil {
		t.Fatalf("OpenBadger(%q): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBadgerStoreNoSpace(t *testing.T) {
	storetest.TestNoSpace(t, func(t *testing.T) (persistence.Store, func(bool)) {
		s := openBadger(t, t.TempDir(), persistence.Options{})
		return s, func(full bool) {
			if full {
				persistence.SetFreeSpace(s, 1<<20)
			} else {
				persistence.SetFreeSpace(s, 1<<40)
			}
		}
	})
}

func TestFaultStoreNoSpace(t *testing.T) {
	storetest.TestNoSpace(t, func(t *testing.T) (persistence.Store, func(bool)) {
		s := storetest.NewFaultStore(persistence.NewMemStore())
		return s, func(full bool) {
			if full {
				s.FailAfter(0, nil)
				s.SetLowSpace(true)
			} else {
				s.Heal()
			}
		}
	})
}

// ScanKeys of a store that is not a KeyScanner lists the keys through
// Scan: in order, under the prefix only, stopped by ErrStopScan.
func TestScanKeysThroughScan(t *testing.T) {
	st := persistence.NewMemStore()
	ctx := context.Background()
	var b persistence.Batch
	for _, k := range []string{"p/c", "p/a", "q/a", "p/b"} {
		b.Put([]byte(k), []byte("v"))
	}
	if err := st.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := persistence.ScanKeys(ctx, st, []byte("p/"), func(k []byte) error {
		got = append(got, string(k))
		if len(got) == 2 {
			return persistence.ErrStopScan
		}
		return nil
	})
	if err != nil || strings.Join(got, ",") != "p/a,p/b" {
		t.Fatalf("ScanKeys = %q, %v; want p/a,p/b then stopped", got, err)
	}
}
