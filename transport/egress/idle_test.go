package egress

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestIdleTimeoutCountsTheSourceOnly: the idle timeout is the source's
// silence while the body is read. A reader that stops reading for longer
// (backpressure: its queue is full) and then reads on gets the data the
// source sent meanwhile; a source that sends nothing while the body is read
// is ended with an *IdleError.
func TestIdleTimeoutCountsTheSourceOnly(t *testing.T) {
	const idle = 150 * time.Millisecond
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		if r.URL.Path == "/silent" {
			<-r.Context().Done()
			return
		}
		time.Sleep(idle / 3)
		fmt.Fprint(w, "data: 2\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := Client(ClientOptions{Base: srv.Client().Transport, IdleTimeout: idle})

	resp, err := c.Get(srv.URL + "/busy")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(resp.Body, 8) // small reads: each waits on the body
	if l, err := br.ReadString('\n'); err != nil || l != "data: 1\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	time.Sleep(3 * idle) // the reader is held back, not the source
	var got []string
	for range 3 {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after a pause of the reader: %v (read %q)", err, got)
		}
		got = append(got, l)
	}
	if got[1] != "data: 2\n" {
		t.Errorf("read %q, want the second event", got)
	}
	resp.Body.Close()

	resp, err = c.Get(srv.URL + "/silent")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	start := time.Now()
	var rerr error
	for rerr == nil {
		_, rerr = resp.Body.Read(buf)
	}
	if !errors.Is(rerr, ErrIdle) {
		t.Fatalf("a silent source: %v, want ErrIdle", rerr)
	}
	if waited := time.Since(start); waited < idle {
		t.Errorf("ended after %v, before the idle timeout of %v", waited, idle)
	}
}
