package persistence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
)

// The crash child runs crashStreams "streams". Round n of stream s commits,
// as one caller batch: the slot keys c/s/slot/0..crashSlots-1 = n (the
// progress record), the log key c/s/log/<n> (one per round, never
// overwritten), a journal put c/s/j/<n> and the delete of c/s/j/<n-1>. Every
// tenth round waits for its commit and then prints "acked s n".
const (
	crashStreams = 4
	crashSlots   = 5
)

func slotKey(s, i int) []byte { return fmt.Appendf(nil, "c/%d/slot/%d", s, i) }
func logKey(s, n int) []byte  { return fmt.Appendf(nil, "c/%d/log/%09d", s, n) }
func jKey(s, n int) []byte    { return fmt.Appendf(nil, "c/%d/j/%09d", s, n) }

// commitForever is the crash child: it resumes every stream from the store
// and commits rounds until it is killed.
func commitForever(dir string) error {
	store, err := persistence.OpenBadger(dir, persistence.Options{})
	if err != nil {
		return err
	}
	c := persistence.NewCommitter(store, persistence.CommitterOptions{})
	errs := make(chan error, crashStreams)
	for s := range crashStreams {
		go func() { errs <- runCrashStream(store, c, s) }()
	}
	return <-errs // only on failure; success means running until SIGKILL
}

func runCrashStream(store persistence.Store, c *persistence.Committer, s int) error {
	ctx := context.Background()
	n, err := currentRound(ctx, store, s)
	if err != nil {
		return err
	}
	var b persistence.Batch
	for {
		n++
		b.Reset()
		v := []byte(strconv.Itoa(n))
		for i := range crashSlots {
			b.Put(slotKey(s, i), v)
		}
		b.Put(logKey(s, n), v)
		b.Put(jKey(s, n), v)
		b.Delete(jKey(s, n-1))
		if n%10 != 0 {
			if err := c.Submit(ctx, &b, nil); err != nil {
				return err
			}
			continue
		}
		if err := c.Commit(ctx, &b); err != nil {
			return err
		}
		fmt.Printf("acked %d %d\n", s, n)
	}
}

// currentRound returns the round of stream s recorded in slot 0, or 0.
func currentRound(ctx context.Context, store persistence.Store, s int) (int, error) {
	v, err := store.Get(ctx, slotKey(s, 0))
	if errors.Is(err, persistence.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// TestCrashAtomicity kills a committing child with SIGKILL at random moments
// and checks after each kill that no caller batch is partially applied, that
// rounds form an unbroken prefix, and that every acknowledged round survived.
func TestCrashAtomicity(t *testing.T) {
	dir := t.TempDir()
	acked := make([]int, crashStreams)
	for kill := range 10 {
		runAndKill(t, dir, acked, 1+rand.IntN(30))
		store := openBadger(t, dir, persistence.Options{})
		for s := range crashStreams {
			n := checkStream(t, store, s)
			if n < acked[s] {
				t.Fatalf("kill %d: stream %d is at round %d, but round %d was acknowledged", kill, s, n, acked[s])
			}
			acked[s] = n
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("rounds per stream after 10 kills: %v", acked)
}

// runAndKill starts the crash child on dir, waits for wantAcks
// acknowledgements plus a random pause, kills it with SIGKILL and raises
// acked to the rounds it acknowledged.
func runAndKill(t *testing.T, dir string, acked []int, wantAcks int) {
	t.Helper()
	cmd, lines, _ := startChild(t, "crash", dir)
	seen := 0
	for seen < wantAcks {
		line, ok := <-lines
		if !ok {
			t.Fatalf("crash child ended early: %v", cmd.Wait())
		}
		seen += recordAck(t, line, acked)
	}
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for line := range lines { // acks that reached the pipe before the kill
		recordAck(t, line, acked)
	}
	cmd.Wait()
}

func recordAck(t *testing.T, line string, acked []int) int {
	var s, n int
	if _, err := fmt.Sscanf(line, "acked %d %d", &s, &n); err != nil {
		t.Fatalf("crash child said %q: %v", line, err)
	}
	acked[s] = max(acked[s], n)
	return 1
}

// checkStream verifies stream s in store and returns its round.
func checkStream(t *testing.T, store persistence.Store, s int) int {
	t.Helper()
	ctx := context.Background()
	n, err := currentRound(ctx, store, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range crashSlots {
		v, err := store.Get(ctx, slotKey(s, i))
		if n == 0 && errors.Is(err, persistence.ErrNotFound) {
			continue // no round committed yet: every slot is missing
		}
		if err != nil || string(v) != strconv.Itoa(n) {
			t.Fatalf("stream %d: slot %d = %q (%v), slot 0 = %d: a batch was split", s, i, v, err, n)
		}
	}
	logs := keysUnder(t, store, fmt.Sprintf("c/%d/log/", s))
	if len(logs) != n || (n > 0 && logs[n-1] != string(logKey(s, n))) {
		t.Fatalf("stream %d at round %d has %d log keys (last %v): rounds are not an unbroken prefix", s, n, len(logs), logs[max(0, len(logs)-1):])
	}
	journal := keysUnder(t, store, fmt.Sprintf("c/%d/j/", s))
	if n == 0 && len(journal) != 0 || n > 0 && (len(journal) != 1 || journal[0] != string(jKey(s, n))) {
		t.Fatalf("stream %d at round %d has journal keys %v, want only %s", s, n, journal, jKey(s, n))
	}
	return n
}

func keysUnder(t *testing.T, store persistence.Store, prefix string) []string {
	t.Helper()
	var keys []string
	err := store.Scan(context.Background(), []byte(prefix), func(k, v []byte) error {
		keys = append(keys, string(k))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// startChild re-executes the test binary as a child with the given role on
// dir. It returns the command, a channel of the child's stdout lines (closed
// at EOF) and the child's stdin. The child is killed when the test ends.
func startChild(t *testing.T, role, dir string) (*exec.Cmd, <-chan string, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "RTFSHOST_PERSISTENCE_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range lines {
		}
		wg.Wait()
		cmd.Wait()
	})
	return cmd, lines, in
}
