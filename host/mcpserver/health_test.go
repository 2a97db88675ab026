package mcpserver

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

// TestHealthAndReadiness: /healthz and /readyz answer without the token
// (as service managers' probes ask); /readyz is 200 while the host can
// take work and 503 naming the part that cannot: a store that does not
// answer, a host that is closing.
func TestHealthAndReadiness(t *testing.T) {
	store := persistence.NewMemStore()
	f := newFixtureStore(t, Options{Token: "0123456789abcdef0123"}, store)
	probe := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := probe(PathHealth); code != http.StatusOK || body != "ok" {
		t.Errorf("%s: %d %q", PathHealth, code, body)
	}
	if code, body := probe(PathReady); code != http.StatusOK || body != "ready" {
		t.Errorf("%s: %d %q", PathReady, code, body)
	}
	if code, _ := probe(PathStreamable); code != http.StatusUnauthorized && code != http.StatusMethodNotAllowed {
		t.Errorf("%s without the token: %d, want it refused", PathStreamable, code)
	}
	store.Close()
	if code, body := probe(PathReady); code != http.StatusServiceUnavailable || body != "not ready: store" {
		t.Errorf("%s with the store closed: %d %q", PathReady, code, body)
	}
	f.host.BeginClose()
	if code, body := probe(PathReady); code != http.StatusServiceUnavailable || body != "not ready: closing" {
		t.Errorf("%s while closing: %d %q", PathReady, code, body)
	}
	if code, _ := probe(PathHealth); code != http.StatusOK {
		t.Errorf("%s while closing: %d", PathHealth, code)
	}
}
