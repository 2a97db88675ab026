package sse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// smallBufListener shrinks the kernel send buffer of accepted connections so
// that a server's writes block soon after its client stops reading.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// testBackpressure checks that a blocked sink stops the transport reading:
// a server that could send 64 MiB manages only what fits in the socket
// buffers and the transport's fixed read buffer.
func testBackpressure(t *testing.T) {
	const (
		eventSize = 4 << 10
		total     = 64 << 20
		bound     = 1 << 20 // socket buffers both ends + readBufSize, with room
	)
	var written atomic.Int64
	event := fmt.Sprintf("data: %s\n\n", strings.Repeat("p", eventSize-len("data: \n\n")))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for written.Load() < total {
			if _, err := w.Write([]byte(event)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(int64(len(event)))
		}
	}))
	srv.Listener = smallBufListener{srv.Listener}
	srv.Start()
	defer srv.Close()

	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(16 << 10)
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := make(chan struct{})
	sink := &recSink{deliver: func(ctx context.Context, _ transport.Chunk) error {
		close(blocked)
		<-ctx.Done() // the host's queue is full and stays full
		return ctx.Err()
	}}
	spec := transport.Spec{Endpoint: "bp", HTTP: transport.HTTP{ServerURL: srv.URL, Client: &http.Client{Transport: tr}}}
	wait := startRun(ctx, new(Transport), spec, "", sink)
	<-blocked

	n, settled := transporttest.Settle(written.Load)
	if !settled {
		t.Fatalf("the server kept writing while the sink was blocked: %d bytes and counting", written.Load())
	}
	t.Logf("server wrote %d bytes while the sink was blocked", n)
	if n >= bound {
		t.Errorf("server wrote %d bytes while the sink was blocked; want under %d", n, bound)
	}
	if n < eventSize {
		t.Errorf("server wrote only %d bytes", n)
	}
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}
