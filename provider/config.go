package provider

import (
	"strconv"
	"time"

	"net/http"
	"os"
	"strings"

	"github.com/rtfshost/rtfshost/transport/egress"
)

// DefaultServerURL is the server URL used when neither the start call, the
// provider's options nor the environment give one.
const DefaultServerURL = "http://127.0.0.1:2025/sse"

// The environment variables the provider reads (docs/streams.md,
// *Configuration*).
const (
	EnvStreamEndpoint    = "CCOS_MCP_STREAM_ENDPOINT"
	EnvLocalSSEURL       = "CCOS_MCP_LOCAL_SSE_URL"
	EnvCloudflareDocsURL = "CCOS_MCP_CLOUDFLARE_DOCS_SSE_URL"
	EnvStreamAuthHeader  = "CCOS_MCP_STREAM_AUTH_HEADER"
	EnvStreamBearerToken = "CCOS_MCP_STREAM_BEARER_TOKEN"
	EnvStreamAutoConnect = "CCOS_MCP_STREAM_AUTO_CONNECT"
	// EnvIdleTimeoutMillis sets the default idle timeout of network sources
	// in milliseconds (0 disables it); Options.IdleTimeout wins over it.
	EnvIdleTimeoutMillis = "RTFSHOST_IDLE_TIMEOUT_MS"
	defaultIdleTimeout   = 60 * time.Second
	defaultRetryAttempts = 3
	defaultQueueCapacity = 32
)

// envConfig is the provider-wide configuration resolved from the options and
// the environment once, at New. cred carries a secret and never leaves the
// package except inside transport.Spec.Header, and only for its origin.
type envConfig struct {
	serverURL   string            // the provider default: Options.ServerURL, then the env chain
	cred        egress.Credential // the auth header, bound to ServerURL's origin
	autoConnect bool
	idleTimeout time.Duration // from the environment: 0 unset, < 0 disabled
}

// ResolveServerURL returns the server URL a provider created with
// Options.ServerURL = explicit would use: explicit, else the environment
// chain of docs/streams.md, else DefaultServerURL. It reads the environment.
func ResolveServerURL(explicit string) string {
	return resolveConfig(nil, explicit, true).serverURL
}

// lookupFunc reads an environment variable.
type lookupFunc func(string) (string, bool)

// env returns the trimmed value of name, or "" when it is unset or blank.
func (f lookupFunc) env(name string) string {
	v, ok := f(name)
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// resolveConfig applies the configuration chain of docs/streams.md: the
// server URL from the first non-empty of explicit, CCOS_MCP_STREAM_ENDPOINT,
// CCOS_MCP_LOCAL_SSE_URL, CCOS_MCP_CLOUDFLARE_DOCS_SSE_URL and
// DefaultServerURL; the auth header from
// CCOS_MCP_STREAM_AUTH_HEADER, else CCOS_MCP_STREAM_BEARER_TOKEN; auto-connect
// from CCOS_MCP_STREAM_AUTO_CONNECT when set, else autoDefault.
func resolveConfig(lookup lookupFunc, explicit string, autoDefault bool) envConfig {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	cfg := envConfig{serverURL: strings.TrimSpace(explicit), autoConnect: autoDefault}
	for _, name := range []string{EnvStreamEndpoint, EnvLocalSSEURL, EnvCloudflareDocsURL} {
		if cfg.serverURL != "" {
			break
		}
		cfg.serverURL = lookup.env(name)
	}
	if cfg.serverURL == "" {
		cfg.serverURL = DefaultServerURL
	}
	var header http.Header
	if h := lookup.env(EnvStreamAuthHeader); h != "" {
		header = parseAuthHeader(h)
	} else if tok := lookup.env(EnvStreamBearerToken); tok != "" {
		header = http.Header{"Authorization": []string{"Bearer " + tok}}
	}
	cfg.cred = egress.NewCredential(cfg.serverURL, header)
	cfg.idleTimeout = defaultIdleTimeout
	if v := lookup.env(EnvIdleTimeoutMillis); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
			cfg.idleTimeout = time.Duration(ms) * time.Millisecond
			if ms == 0 {
				cfg.idleTimeout = -1
			}
		}
	}
	if v, ok := lookup(EnvStreamAutoConnect); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true", "yes", "on":
			cfg.autoConnect = true
		default:
			cfg.autoConnect = false
		}
	}
	return cfg
}

// parseAuthHeader splits "Name: value" at the first colon; a line without a
// colon is the value of an Authorization header.
func parseAuthHeader(line string) http.Header {
	name, value, ok := strings.Cut(line, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" {
		name, value = "Authorization", strings.TrimSpace(line)
	}
	if value == "" {
		return nil
	}
	h := http.Header{}
	h.Set(name, value)
	return h
}
