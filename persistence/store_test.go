package persistence_test

import (
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
