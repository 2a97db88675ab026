package egress

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Every spelling of a URL reads one way: Parse gives the canonical form
// (what is checked and what is sent) and the origin, or refuses the text.
func TestParseSpellings(t *testing.T) {
	for _, tc := range []struct {
		raw, want, origin string // want "" with refused: Parse refuses it
		refused           string // a word of the refusal
	}{
		// The scheme, in any case, and the host's case.
		{raw: "HTTP://Example.COM/A", want: "http://example.com/A", origin: "http://example.com:80"},
		{raw: "hTtPs://EXAMPLE.com:443/x", want: "https://example.com/x", origin: "https://example.com:443"},
		{raw: " Http://h:8080 ", want: "http://h:8080/", origin: "http://h:8080"},
		{raw: "http://h:08080/x", want: "http://h:8080/x", origin: "http://h:8080"},
		{raw: "http://h:80/", want: "http://h/", origin: "http://h:80"},
		{raw: "http://h:/x", want: "http://h/x", origin: "http://h:80"},
		{raw: "http://h:0/", refused: "port"},
		{raw: "http://h:65536/", refused: "port"},
		{raw: "ftp://h/x", refused: "scheme"},
		{raw: "HTTP:h/x", refused: "scheme://host"},
		{raw: "https:/h/x", refused: "no host"},
		{raw: "//h/x", refused: "no scheme"},
		{raw: "/relative", refused: "no scheme"},
		{raw: "h.example/x", refused: "no scheme"},
		{raw: "", refused: "no scheme"},
		// User info is kept (Check refuses it) and never part of the host.
		{raw: "http://good.example@evil.example/", want: "http://good.example@evil.example/", origin: "http://evil.example:80"},
		{raw: "http://u:p@H:1/x", want: "http://u:p@h:1/x", origin: "http://h:1"},
		{raw: `http://evil.example\@good.example/`, refused: "invalid"},
		// Trailing dots.
		{raw: "http://Example.COM./x", want: "http://example.com/x", origin: "http://example.com:80"},
		{raw: "http://127.0.0.1.:2025/x", want: "http://127.0.0.1:2025/x", origin: "http://127.0.0.1:2025"},
		{raw: "http://example..com/", refused: "empty label"},
		{raw: "http://./", refused: "no host"},
		// IPv4 in other notations than four decimal parts.
		{raw: "http://2130706433/", refused: "number"},
		{raw: "http://0x7f000001/", refused: "number"},
		{raw: "http://0x7f.0.0.1/", refused: "number"},
		{raw: "http://0177.0.0.1/", refused: "number"},
		{raw: "http://127.1/", refused: "number"},
		{raw: "http://127.0.0.1.2/", refused: "number"},
		{raw: "http://1.2.3.0x4/", refused: "number"},
		{raw: "http://0x/", refused: "number"},
		{raw: "http://0x7f.example/", want: "http://0x7f.example/", origin: "http://0x7f.example:80"},
		// IPv6: compressed lower case; IPv4-mapped is the IPv4 address;
		// zones are refused.
		{raw: "http://[::1]:2025/x", want: "http://[::1]:2025/x", origin: "http://[::1]:2025"},
		{raw: "http://[0:0:0:0:0:0:0:1]/", want: "http://[::1]/", origin: "http://[::1]:80"},
		{raw: "http://[FE80::A]/", want: "http://[fe80::a]/", origin: "http://[fe80::a]:80"},
		{raw: "http://[::ffff:127.0.0.1]:2025/x", want: "http://127.0.0.1:2025/x", origin: "http://127.0.0.1:2025"},
		{raw: "http://[::ffff:7f00:1]:2025/x", want: "http://127.0.0.1:2025/x", origin: "http://127.0.0.1:2025"},
		{raw: "http://[::127.0.0.1]/", want: "http://[::7f00:1]/", origin: "http://[::7f00:1]:80"}, // IPv4-compatible is not IPv4
		{raw: "http://[fe80::1%25eth0]/", refused: "zone"},
		{raw: "http://[127.0.0.1]/", refused: "invalid"},
		// Hosts that are not plain ASCII names.
		{raw: "http://%e4%b8%ad.example/", refused: "ASCII"},
		{raw: "http://a!b/", refused: "letters"},
		{raw: "http://127.0.0.%31/", refused: "invalid"},
		// Paths: unreserved escapes decoded, dot segments removed (encoded
		// or not), other escapes kept in upper case.
		{raw: "http://h/a/./b/../c", want: "http://h/a/c", origin: "http://h:80"},
		{raw: "http://h/a/%2e%2e/%2E%2E/etc", want: "http://h/etc", origin: "http://h:80"},
		{raw: "http://h/ok/.%2e/esc", want: "http://h/esc", origin: "http://h:80"},
		{raw: "http://h/../../x", want: "http://h/x", origin: "http://h:80"},
		{raw: "http://h/a/b/..", want: "http://h/a/", origin: "http://h:80"},
		{raw: "http://h/%7euser/%41", want: "http://h/~user/A", origin: "http://h:80"},
		{raw: "http://h/a%2fb/%5c", want: "http://h/a%2Fb/%5C", origin: "http://h:80"},
		{raw: `http://h/a\b`, want: "http://h/a%5Cb", origin: "http://h:80"},
		{raw: "http://h/a%20b?q=%2e%2e#frag", want: "http://h/a%20b?q=%2e%2e", origin: "http://h:80"},
		{raw: "http://h?x=1", want: "http://h/?x=1", origin: "http://h:80"},
		{raw: "http://h/%zz", refused: "invalid"},
	} {
		u, err := Parse(tc.raw)
		if tc.refused != "" {
			if err == nil {
				t.Errorf("Parse(%q) = %s, want a refusal", tc.raw, u)
				continue
			}
			var ue *URLError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.refused) || !Refused(err) {
				t.Errorf("Parse(%q): error %q, want a *URLError about %q", tc.raw, err, tc.refused)
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Errorf("Parse(%q): error %q shows the password", tc.raw, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.raw, err)
			continue
		}
		if u.String() != tc.want || u.Origin() != tc.origin {
			t.Errorf("Parse(%q) = %s (origin %s), want %s (origin %s)", tc.raw, u, u.Origin(), tc.want, tc.origin)
		}
		// The canonical form is a fixed point, and FromURL agrees.
		again, err := Parse(u.String())
		if err != nil || again.String() != u.String() {
			t.Errorf("Parse(Parse(%q)) = %v, %v", tc.raw, again, err)
		}
		if from, err := FromURL(u.URL()); err != nil || from.String() != u.String() {
			t.Errorf("FromURL(Parse(%q)) = %v, %v", tc.raw, from, err)
		}
	}
}

func TestIsURLAndEndpoint(t *testing.T) {
	for s, want := range map[string]bool{
		"http://h": true, "HTTP://h": true, "hTtPs://h": true, " Https:x": true,
		"x": false, "weather.v1": false, "../x": false, "mock:x": false, "httpx://h": false, "//h/x": false,
	} {
		if IsURL(s) != want {
			t.Errorf("IsURL(%q) = %v", s, !want)
		}
	}
	for _, tc := range []struct{ server, endpoint, want string }{
		{"http://h:1/sse", "weather.v1", "http://h:1/sse/weather.v1"},
		{"http://h:1/sse/", "/weather.v1", "http://h:1/sse/weather.v1"},
		{"http://h:1/ok?tenant=a", "x", "http://h:1/ok/x?tenant=a"},
		{"http://h:1/ok", "../esc/x", "http://h:1/esc/x"},
		{"http://h:1/ok", "a/../b", "http://h:1/ok/b"},
		{"http://h:1/ok", "%2e%2e/x", "http://h:1/ok/%252e%252e/x"}, // the endpoint is a path as written
		{"http://h:1/ok", "a?b", "http://h:1/ok/a%3Fb"},
		{"http://h:1/ok", "//evil.example/x", "http://h:1/ok/evil.example/x"},
		{"http://h:1/ok", "HTTP://Other:2/x", "http://other:2/x"},
	} {
		u, err := Endpoint(tc.server, tc.endpoint)
		if err != nil || u.String() != tc.want {
			t.Errorf("Endpoint(%q, %q) = %v, %v; want %s", tc.server, tc.endpoint, u, err, tc.want)
		}
	}
	if _, err := Endpoint("http://h:1/ok", "HTTP:evil"); err == nil {
		t.Error(`Endpoint accepted the endpoint "HTTP:evil" as a path`)
	}
}

// recorder is a server that records each request's path, Host and
// credential headers, and answers with a redirect to the Location its
// handler picks, or 200.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "host path creds"
}

func newRecorder(t *testing.T, location func(r *http.Request) string) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		creds := strings.TrimSpace(r.Header.Get("X-Api-Key") + " " + r.Header.Get("Authorization"))
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Host+" "+r.URL.Path+" "+creds)
		rec.mu.Unlock()
		if loc := location(r); loc != "" {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// Redirects are classified like every other URL: the redirected request is
// checked and sent in canonical form, and loses the credential off its
// origin; a redirect the policy or Parse refuses is not followed.
func TestClientRedirects(t *testing.T) {
	foreign := newRecorder(t, func(*http.Request) string { return "" })
	fport := foreign.URL[strings.LastIndex(foreign.URL, ":")+1:]
	var home *recorder
	home = newRecorder(t, func(r *http.Request) string {
		if to := r.URL.Query().Get("to"); to != "" {
			return strings.ReplaceAll(strings.ReplaceAll(to, "FPORT", fport), "HPORT", home.URL[strings.LastIndex(home.URL, ":")+1:])
		}
		return ""
	})
	cred := NewCredential(home.URL+"/ok", http.Header{"X-Api-Key": {"k"}, "Authorization": {"Bearer tok"}})
	restrictive, err := New(Options{Servers: []string{home.URL + "/ok"}, ServerFlag: "--allow-server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, to string
		policy   *Policy
		refused  bool
		home     string // the last request home is sent: "path creds"
		foreign  string // the request foreign is sent: "host path creds"
	}{
		{name: "mixed-case scheme to another origin", to: "HTTP://127.0.0.1:FPORT/x", policy: restrictive, refused: true},
		{name: "mixed-case scheme, run", to: "HTTP://127.0.0.1:FPORT/x", foreign: "127.0.0.1:FPORT /x "},
		{name: "another port, run", to: "http://127.0.0.1:FPORT/x", foreign: "127.0.0.1:FPORT /x "},
		{name: "trailing dot, run", to: "http://LOCALHOST.:FPORT/x", foreign: "localhost:FPORT /x "},
		{name: "user info", to: "http://u:p@127.0.0.1:HPORT/ok/y", policy: restrictive, refused: true},
		{name: "encoded dot segments leave the prefix", to: "/ok/%2e%2e/esc", policy: restrictive, refused: true},
		{name: "dot segments leave the prefix", to: "/ok/x/../../esc", policy: restrictive, refused: true},
		{name: "decimal host, run", to: "http://2130706433:FPORT/x", refused: true},
		{name: "octal host, run", to: "http://0177.0.0.1:FPORT/x", refused: true},
		// net/http drops Authorization itself when the host is written
		// differently.
		{name: "IPv4-mapped home is home", to: "http://[::ffff:127.0.0.1]:HPORT/ok/%7Ey/./z", policy: restrictive,
			home: "/ok/~y/z k"},
		{name: "dot segments within the prefix", to: "/ok/a/../b", policy: restrictive, home: "/ok/b k Bearer tok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			beforeF, beforeH := len(foreign.requests()), len(home.requests())
			c := Client(ClientOptions{Policy: tc.policy, Credential: cred})
			req, _ := http.NewRequest(http.MethodGet, home.URL+"/ok/start?to="+strings.ReplaceAll(tc.to, "%", "%25"), nil)
			for k, v := range cred.header {
				req.Header[k] = v
			}
			resp, err := c.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if tc.refused {
				if err == nil || !Refused(err) || !strings.Contains(err.Error(), "redirect refused") {
					t.Errorf("error %v, want a refused redirect", err)
				}
			} else if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET: %v %v", resp, err)
			}
			gotF := foreign.requests()[beforeF:]
			switch want := strings.ReplaceAll(tc.foreign, "FPORT", fport); {
			case want == "" && len(gotF) > 0:
				t.Errorf("the foreign server was sent %q", gotF)
			case want != "" && (len(gotF) != 1 || gotF[0] != want):
				t.Errorf("the foreign server was sent %q, want %q", gotF, want)
			}
			gotH := home.requests()[beforeH:]
			if len(gotH) == 0 || !strings.HasPrefix(gotH[0], strings.TrimPrefix(home.URL, "http://")+" /ok/start k Bearer tok") {
				t.Fatalf("home was sent %q", gotH)
			}
			if tc.home != "" {
				want := strings.TrimPrefix(home.URL, "http://") + " " + tc.home
				if len(gotH) != 2 || gotH[1] != want {
					t.Errorf("home was sent %q, want %q last", gotH, want)
				}
			} else if len(gotH) != 1 {
				t.Errorf("home was sent %q after the redirect", gotH[1:])
			}
		})
	}
}
