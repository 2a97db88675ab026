package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveOn runs f's Server with Serve on a loopback listener until the test
// ends, and returns the listener's address.
func serveOn(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(hangGuard):
			t.Error("Serve did not return")
		}
	})
	return ln.Addr().String()
}

// slowBody opens a connection to addr and sends the headers of a POST to
// /mcp announcing a body of 100,000 bytes, then one byte of the body every
// 20 ms until the connection fails or stop is closed. It returns the
// connection and when the headers were sent.
func slowBody(t *testing.T, addr string, stop <-chan struct{}, wg *sync.WaitGroup) (net.Conn, time.Time) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// The time is taken before the headers go out: the server may read them
	// and start its body timeout before this goroutine runs again.
	sent := time.Now()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", PathStreamable, addr)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	return c, sent
}

// TestSlowBodiesAreClosed: connections that send a request body slower
// than anything would wait for are answered and closed once the body
// timeout has passed, every one of them, while the client is still
// sending.
func TestSlowBodiesAreClosed(t *testing.T) {
	const limit = 300 * time.Millisecond
	f := newFixture(t, Options{HTTP: HTTPLimits{BodyTimeout: limit}})
	addr := serveOn(t, f)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	const n = 50
	conns := make([]net.Conn, n)
	sent := make([]time.Time, n)
	for i := range conns {
		conns[i], sent[i] = slowBody(t, addr, stop, &wg)
		defer conns[i].Close()
	}
	// The server must close each connection: a read returns EOF (or a
	// reset) once it has. The test's own deadline only stops a server that
	// never does from hanging the test.
	var slowest time.Duration
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(hangGuard))
		r := bufio.NewReader(c)
		status, _ := r.ReadString('\n')
		var err error
		for err == nil {
			_, err = r.ReadByte()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection %d is still open %s after its headers; the body timeout is %s", i, time.Since(sent[i]).Round(time.Millisecond), limit)
		}
		took := time.Since(sent[i])
		if took < limit {
			t.Errorf("connection %d was closed after %s, before the body timeout of %s", i, took, limit)
		}
		if !strings.HasPrefix(status, "HTTP/1.1 4") {
			t.Errorf("connection %d was answered %q, want a 4xx", i, status)
		}
		slowest = max(slowest, took)
	}
	t.Logf("%d slow bodies closed, the last %s after its headers (body timeout %s)", n, slowest.Round(time.Millisecond), limit)
}

// TestIdleAndHeaderLimits: a connection that sends nothing, or only part
// of its headers, or nothing after a request, is closed; headers larger
// than the limit get 431 and bodies larger than the limit 413.
func TestIdleAndHeaderLimits(t *testing.T) {
	const limit = 300 * time.Millisecond
	f := newFixture(t, Options{HTTP: HTTPLimits{HeaderTimeout: limit, IdleTimeout: limit, MaxHeaderBytes: 4 << 10, MaxBodyBytes: 1 << 10}})
	addr := serveOn(t, f)
	closed := func(name string, c net.Conn) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(hangGuard))
		buf := make([]byte, 4096)
		var err error
		for err == nil {
			_, err = c.Read(buf)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the connection is still open", name)
		}
	}
	silent, _ := net.Dial("tcp", addr)
	defer silent.Close()
	closed("no request", silent)

	partial, _ := net.Dial("tcp", addr)
	defer partial.Close()
	fmt.Fprintf(partial, "GET /metrics HTTP/1.1\r\nHost: %s\r\n", addr)
	closed("half the headers", partial)

	idle, _ := net.Dial("tcp", addr)
	defer idle.Close()
	fmt.Fprintf(idle, "GET /nothing HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	closed("idle after a request", idle)

	big, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/mcp", nil)
	big.Header.Set("X-Big", strings.Repeat("x", 16<<10))
	if resp, err := http.DefaultClient.Do(big); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers: %v %v, want 431", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, _ := rawPost(t, "http://"+addr+PathStreamable, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("x", 2<<10)+`"}}`, nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 KiB body: %d, want 413", resp.StatusCode)
	}
}

// TestLongResponsesOutliveTheLimits: the limits bound what clients send,
// never how long a response runs: a tool call's SSE response and the
// legacy /sse stream go on well past every timeout.
func TestLongResponsesOutliveTheLimits(t *testing.T) {
	const limit = 150 * time.Millisecond
	f := newFixture(t, Options{HTTP: HTTPLimits{HeaderTimeout: limit, BodyTimeout: limit, IdleTimeout: limit}})
	addr := serveOn(t, f)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tr   mcp.Transport
	}{
		{"streamable", &mcp.StreamableClientTransport{Endpoint: "http://" + addr + PathStreamable}},
		{"legacy sse", &mcp.SSEClientTransport{Endpoint: "http://" + addr + PathSSE}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := newProgressLog()
			cs := connectTo(ctx, t, tc.tr, log)
			id := "long-" + strings.ReplaceAll(tc.name, " ", "-")
			params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs(id)}
			params.SetProgressToken(id)
			ch := callAsync(ctx, cs, params)
			start := time.Now()
			for i := 1; i <= 3; i++ {
				f.feed(ctx, id, map[string]any{"value": i})
				log.waitFor(t, i)
				time.Sleep(2 * limit) // each gap longer than every limit
			}
			f.feed(ctx, id, end)
			r := await(t, ch)
			if r.err != nil || r.res.IsError {
				t.Fatalf("call: %v %+v", r.err, r.res)
			}
			if got := decode(t, r.res); got["state"] != "completed" || got["output-count"] != 4.0 {
				t.Errorf("result = %v", got)
			}
			if took := time.Since(start); took < 6*limit {
				t.Fatalf("the call took %s: it proves nothing about limits of %s", took, limit)
			}
		})
	}
}
