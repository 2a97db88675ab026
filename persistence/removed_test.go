package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
)

// closeRemoved is the "removed" child: it commits, removes the data
// directory under the open store, commits until the store refuses, and
// closes it, printing each outcome. Badger's goroutines that retry the
// flush into the missing directory end with the child.
func closeRemoved(dir string) error {
	s, err := persistence.OpenBadger(dir, persistence.Options{GCInterval: -1})
	if err != nil {
		return err
	}
	commit := func(i int) error {
		var b persistence.Batch
		b.Put(fmt.Appendf(nil, "k%06d", i), make([]byte, 2000))
		return s.Commit(context.Background(), &b)
	}
	if err := commit(0); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 1; ; i++ {
		err := commit(i)
		if err != nil {
			fmt.Printf("refused: %v (removed: %v)\n", err, errors.Is(err, persistence.ErrDirRemoved))
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("never refused")
			break
		}
	}
	err = s.Close()
	fmt.Printf("closed: %v (removed: %v)\n", err, errors.Is(err, persistence.ErrDirRemoved))
	return nil
}

// TestCloseAfterDirRemoved: a store whose data directory is removed while
// it holds unflushed records refuses further commits and closes at once
// (Badger's own Close retries the flush forever), with errors that say so.
func TestCloseAfterDirRemoved(t *testing.T) {
	cmd, lines, _ := startChild(t, "removed", t.TempDir())
	done := make(chan error, 1)
	var out []string
	go func() {
		for l := range lines {
			out = append(out, l)
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child: %v; output %q", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not close its store within 60 s of its directory's removal")
	}
	text := strings.Join(out, "\n")
	for _, want := range []string{"refused: ", "was removed while the store was open", "closed: ", "(removed: true)"} {
		if !strings.Contains(text, want) {
			t.Fatalf("child output %q lacks %q", text, want)
		}
	}
	if strings.Contains(text, "(removed: false)") || strings.Contains(text, "never refused") {
		t.Fatalf("child output %q", text)
	}
}
