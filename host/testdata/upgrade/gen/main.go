// Command gen writes a data directory as an older release of rtfshost
// leaves it after a crash: scripts/make-upgrade-fixture.sh builds it
// inside a checkout of that release and tars what it wrote, and
// host/upgrade_fixtures_test.go resumes the directory with the current
// build. It uses only the Go API that every release since the first has
// (persistence.OpenBadger, host.New, Host.Run, the mock transport); the
// one difference, how transports are given, is in transports*.go.
//
// What it leaves in DIR:
//   - stream "sum1", started by a program, in journal mode (a mock source
//     cannot replay), with chunks {"n":1}..{"n":40} of 100 processed: its
//     state sums them, counts them and lists them;
//   - stream "await1", with chunks 1..10 of 20 processed, and the program
//     that started it parked on :mcp.stream.await of it.
//
// Then it kills itself with SIGKILL, as a crash would.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// The programs, and how far each stream gets before the crash. The test
// that resumes the directory sends the rest (up to 100 and 20).
const (
	sumSrc = `
(println "starting sum1")
(defn add [state chunk meta]
  (let [n (:n chunk)]
    {:state {:sum (+ (:sum state) n) :count (inc (:count state)) :seen (conj (:seen state) n)}
     :output n}))
(call :mcp.stream.start {:stream-id "sum1" :endpoint "counter" :transport :mock
                         :processor add :initial-state {:sum 0 :count 0 :seen []}})`
	sumBefore = 40

	awaitSrc = `
(defn tally [state chunk meta] {:state (+ state (:n chunk)) :output (+ state (:n chunk))})
(def h (call :mcp.stream.start {:stream-id "await1" :endpoint "counter" :transport :mock
                                :processor tally :initial-state 0}))
(println "awaiting" (:stream-id h))
(def total (call :mcp.stream.await {:stream-id (:stream-id h)}))
{:stream (:stream-id h) :total total :double (* 2 total)}`
	awaitBefore = 10
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	st, err := persistence.OpenBadger(dir, persistence.Options{})
	if err != nil {
		return err
	}
	mk := &mock.Transport{}
	h, err := host.New(host.Options{Store: st, Stdout: os.Stdout,
		Streams: provider.Options{LookupEnv: func(string) (string, bool) { return "", false }, Transports: transports(mk)}})
	if err != nil {
		return err
	}
	ctx := context.Background()
	sum, err := rtfs.Compile("sum.rtfs", []byte(sumSrc))
	if err != nil {
		return err
	}
	if _, err := h.Run(ctx, sum); err != nil {
		return err
	}
	await, err := rtfs.Compile("await.rtfs", []byte(awaitSrc))
	if err != nil {
		return err
	}
	go func() { _, _ = h.Run(ctx, await) }() // parks, and never returns: the process dies
	if err := waitFor(func() bool { return count(st, "host/parked/") == 1 }); err != nil {
		return fmt.Errorf("the await program did not park: %w", err)
	}
	if err := feed(h, mk, "sum1", sumBefore); err != nil {
		return err
	}
	if err := feed(h, mk, "await1", awaitBefore); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the group commits of the last snapshots
	fmt.Println("killing myself mid-stream")
	return syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// feed sends chunks 1..n to stream id and waits until they are processed.
func feed(h *host.Host, mk *mock.Transport, id string, n int) error {
	for i := 1; i <= n; i++ {
		data := `{"n":` + strconv.Itoa(i) + `}`
		if err := mk.Source(id).Send(context.Background(), transport.Chunk{Data: []byte(data), ID: strconv.Itoa(i)}); err != nil {
			return err
		}
	}
	return waitFor(func() bool {
		v, err := h.Provider().Inspect(id, provider.InspectOptions{})
		if err != nil {
			return false
		}
		stats, _ := v.(*rtfs.Map).Get(rtfs.Keyword("stats"))
		done, _ := stats.(*rtfs.Map).Get(rtfs.Keyword("processed-chunks"))
		return done == rtfs.Int(n)
	})
}

func count(st persistence.Store, prefix string) int {
	n := 0
	_ = st.Scan(context.Background(), []byte(prefix), func(_, _ []byte) error { n++; return nil })
	return n
}

func waitFor(cond func() bool) error {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}
