package storetest_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func commitKey(s persistence.Store, key string) error {
	var b persistence.Batch
	b.Put([]byte(key), []byte("v"))
	return s.Commit(context.Background(), &b)
}

func TestFailNext(t *testing.T) {
	f := storetest.NewFaultStore(persistence.NewMemStore())
	defer f.Close()
	f.FailNext(2, nil)
	for i, key := range []string{"a", "b"} {
		if err := commitKey(f, key); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, storetest.ErrDiskFull) {
			t.Fatalf("commit %d: err = %v, want the injected disk-full error", i, err)
		}
		if _, err := f.Get(context.Background(), []byte(key)); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("failed commit %d applied its batch", i)
		}
	}
	if err := commitKey(f, "c"); err != nil {
		t.Fatalf("third commit: %v", err)
	}
	if commits, failures := f.Counts(); commits != 3 || failures != 2 {
		t.Fatalf("Counts = %d, %d; want 3, 2", commits, failures)
	}
}

func TestFailAfterAndHeal(t *testing.T) {
	f := storetest.NewFaultStore(persistence.NewMemStore())
	defer f.Close()
	boom := errors.New("boom")
	f.FailAfter(2, boom)
	var errs []error
	for _, key := range []string{"a", "b", "c", "d"} {
		errs = append(errs, commitKey(f, key))
	}
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], boom) || !errors.Is(errs[3], boom) {
		t.Fatalf("errors = %v, want nil, nil, boom, boom", errs)
	}
	f.Heal()
	if err := commitKey(f, "e"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
