package storetest

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

// TestNoSpace checks what every store must do on a full disk: a commit it
// refuses for lack of space fails with an error matching syscall.ENOSPC
// and applies none of its operations; reads go on meanwhile; once space
// is back, the next commit succeeds. open returns a new, empty store and
// a function that makes its disk full (true) or gives the space back
// (false); the suite closes the store. A store that is a
// persistence.SpaceChecker must also say so before and after.
func TestNoSpace(t *testing.T, open func(t *testing.T) (s persistence.Store, full func(bool))) {
	s, full := open(t)
	defer s.Close()
	ctx := context.Background()
	put(t, s, "a", "1")

	sc, checks := s.(persistence.SpaceChecker)
	if checks {
		if err := sc.CheckSpace(); err != nil {
			t.Fatalf("CheckSpace with room: %v", err)
		}
	}
	full(true)
	if checks {
		if err := sc.CheckSpace(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("CheckSpace on a full disk: %v, want an error matching ENOSPC", err)
		}
	}
	var b persistence.Batch
	b.Put([]byte("a"), []byte("2"))
	b.Put([]byte("b"), []byte("1"))
	err := s.Commit(ctx, &b)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v, want an error matching ENOSPC", err)
	}
	wantValue(t, s, "a", "1")
	wantMissing(t, s, "b")
	if got := scanAll(t, s, ""); len(got) != 1 {
		t.Fatalf("scan on a full disk: %q, want the one record committed before", got)
	}

	full(false)
	if checks {
		if err := sc.CheckSpace(); err != nil {
			t.Fatalf("CheckSpace once space is back: %v", err)
		}
	}
	if err := s.Commit(ctx, &b); err != nil {
		t.Fatalf("commit once space is back: %v", err)
	}
	wantValue(t, s, "a", "2")
	wantValue(t, s, "b", "1")
}
