package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/host/dashboard"
	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// tokenEnv is the environment variable that supplies serve's bearer token
// when --token is not given.
const tokenEnv = "RTFSHOST_TOKEN"

type serveOptions struct {
	listen           string
	token            string
	stdio            bool
	publicURL        string
	oauthIssuer      string
	oauthAudience    string
	oauthPrivate     bool
	stdioOut         io.WriteCloser // with stdio: where MCP messages go
	progressInterval time.Duration
	delivery         deliveryFlags
	allowOrigins     []string
	allowServers     []string
	allowCommands    []string
	allowEnv         []string
	maxStreams       int
	maxSessionCalls  int
	maxSessions      int
	maxSubscriptions int
	sessionIdle      time.Duration
	obs              obsFlags
	noUI             bool
	json             bool // print the listening line as JSON
	cluster          []string
	node             string
	leaseTTL         time.Duration
	replicas         int
	placement        string
	natsCreds        string
	natsCA           string
	natsDomain       string
}

// The environment variables of serve's egress policy (comma-separated
// lists, added to the flags).
const (
	allowServersEnv  = "RTFSHOST_ALLOW_SERVERS"
	allowCommandsEnv = "RTFSHOST_ALLOW_COMMANDS"
	allowEnvEnv      = "RTFSHOST_ALLOW_ENV"
)

func (a *app) serveCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the host to MCP clients (Streamable HTTP and legacy SSE, or stdio)",
		Long: `serve runs a long-lived host and exposes it as an MCP server: Streamable HTTP
at /mcp and the legacy HTTP+SSE transport at /sse. Its tools are
mcp.stream.start, mcp.stream.inspect, mcp.stream.status, mcp.stream.pause,
mcp.stream.resume, mcp.stream.cancel, mcp.stream.remove, mcp.stream.upgrade
and rtfs.eval; a call with a progress token receives every processor :output
as a progress notification and ends with one buffered result. See
docs/mcp-server.md.

serve listens on loopback by default. A request with a foreign Origin gets 403.
Bound to any other address it requires a bearer token (--token or the
` + tokenEnv + ` environment variable), which every request must then carry
as "Authorization: Bearer <token>", or OAuth: with --oauth-issuer every
request carries an access token of that authorization server, whose scopes
(rtfshost:read, rtfshost:write) say which tools it may call
(docs/security.md).

With --stdio, serve speaks MCP on its stdin and stdout instead, for a desktop
client (Claude Desktop, Cursor, VS Code) that launches it: the same tools,
tasks, budgets and egress policy; logs go to stderr, and nothing but MCP to
stdout. The launching client is trusted: there is no token.`,
		Example: `  rtfshost serve
  rtfshost serve --listen 127.0.0.1:7070 --normal-interval 250ms --low-batch 50
  RTFSHOST_TOKEN=$(openssl rand -hex 16) rtfshost serve --listen 0.0.0.0:7070
  rtfshost serve --listen 0.0.0.0:7070 --public-url https://mcp.example.com \
    --oauth-issuer https://auth.example.com/realms/ops
  rtfshost serve --stdio --data /home/me/.rtfshost`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") && !o.stdio {
				o.token = os.Getenv(tokenEnv)
			}
			if err := checkServeFlags(cmd, &o); err != nil {
				return withCode(exitProgramError, err)
			}
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			return a.serve(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:7070", "address to listen on (a non-loopback address needs a token)")
	f.StringVar(&o.token, "token", "", "bearer token required on every request (default $"+tokenEnv+")")
	f.BoolVar(&o.stdio, "stdio", false, "speak MCP on stdin and stdout instead of listening, for a client that launches the server (logs go to stderr)")
	f.StringVar(&o.publicURL, "public-url", "", "the URL clients reach this server at, e.g. https://mcp.example.com (default http://<listen address>); with --oauth-issuer its /mcp is the resource tokens are for")
	f.StringVar(&o.oauthIssuer, "oauth-issuer", "", "accept OAuth 2.1 access tokens (JWTs) of this authorization server, e.g. https://auth.example.com/realms/ops, instead of a static token")
	f.StringVar(&o.oauthAudience, "oauth-audience", "", "the aud an access token must name (default the resource: --public-url with /mcp)")
	f.BoolVar(&o.oauthPrivate, "oauth-private-issuer", false, "let the issuer's metadata and keys be fetched from loopback and private addresses (for an issuer whose host name resolves to one; link-local addresses stay refused)")
	f.DurationVar(&o.progressInterval, "progress-interval", 0, "the same as --normal-interval")
	_ = f.MarkDeprecated("progress-interval", "use --normal-interval")
	o.delivery.add(cmd)
	f.StringSliceVar(&o.allowOrigins, "allow-origin", nil, "browser origin to accept besides the server's own, e.g. http://localhost:6274 (repeatable)")
	f.StringArrayVar(&o.allowServers, "allow-server", nil, "URL prefix streams may connect to besides the default server's origin, e.g. https://api.example.com/sse (repeatable; also $"+allowServersEnv+", comma-separated)")
	f.StringArrayVar(&o.allowCommands, "allow-command", nil, "executable a child-process stream may start, by name or absolute path (repeatable; also $"+allowCommandsEnv+")")
	f.StringArrayVar(&o.allowEnv, "allow-env", nil, "environment variable a start call's :env may set for a child process; none by default (repeatable; also $"+allowEnvEnv+", comma-separated)")
	f.IntVar(&o.maxStreams, "max-streams", 1000, "most streams running at once; a start beyond it is refused (0: no limit)")
	f.IntVar(&o.maxSessionCalls, "max-session-calls", mcpserver.DefaultMaxCallsPerSession, "most tool calls one MCP session has in flight at once")
	f.IntVar(&o.maxSessions, "max-sessions", mcpserver.DefaultMaxSessions, "most MCP sessions open at once; a new one beyond it gets 429")
	f.IntVar(&o.maxSubscriptions, "max-subscriptions", mcpserver.DefaultMaxSubscriptions, "most resource subscriptions of all MCP sessions together")
	f.DurationVar(&o.sessionIdle, "session-idle-timeout", mcpserver.DefaultSessionIdleTimeout, "close an MCP session that sends no request for this long, and free what it holds (0: never)")
	f.BoolVar(&o.noUI, "no-ui", false, "do not serve the web dashboard at /ui/")
	f.BoolVar(&o.json, "json", false, "print where it listens as one JSON object, and errors as JSON lines (docs/cli.md)")
	f.StringSliceVar(&o.cluster, "cluster", nil, "join a cluster of hosts on NATS JetStream at these URLs, e.g. nats://127.0.0.1:4222 (comma-separated); records live there instead of --data (docs/cluster.md)")
	f.StringVar(&o.node, "node", "", "this host's name in the cluster (default: the machine's host name)")
	f.DurationVar(&o.leaseTTL, "lease-ttl", 5*time.Second, "with --cluster: how long a silent host keeps its streams before another takes them (at least 1s)")
	f.StringVar(&o.placement, "placement", "local", "with --cluster: where a new stream runs: local (the host that started it) or balanced (spread by load)")
	f.StringVar(&o.natsCreds, "nats-creds", "", "with --cluster: a NATS credentials file (user JWT and NKey seed); a user and password may instead be given in the URL")
	f.StringVar(&o.natsCA, "nats-ca", "", "with --cluster: PEM file of the authorities that sign the NATS servers' TLS certificates")
	f.StringVar(&o.natsDomain, "nats-domain", "", "with --cluster: the JetStream domain the hosts share")
	f.IntVar(&o.replicas, "cluster-replicas", 1, "with --cluster: replicas of the JetStream stream when this host creates it (3 on a NATS cluster)")
	addObsFlags(cmd, &o.obs, false)
	a.addRuntimeFlags(cmd, true)
	return cmd
}

// serve is the serve command: it runs until interrupted.
func (a *app) serve(cmd *cobra.Command, o serveOptions) error {
	if o.stdio {
		// Before anything can print: stdout is the MCP connection's alone,
		// every other line of the command goes to stderr.
		out, release, err := claimStdout(a.stdout)
		if err != nil {
			return withCode(exitStreamFailed, err)
		}
		defer release()
		proto := a.stdout
		a.stdout = a.stderr
		defer func() { a.stdout = proto }()
		o.stdioOut = out
	}
	logger, err := a.logger()
	if err != nil {
		return err
	}
	if o.progressInterval < 0 {
		return withCode(exitProgramError, fmt.Errorf("--progress-interval: must not be negative, got %v", o.progressInterval))
	}
	if cmd.Flags().Changed("progress-interval") && !cmd.Flags().Changed("normal-interval") {
		o.delivery.policy.Normal.Interval = o.progressInterval
	}
	if err := o.delivery.check(); err != nil {
		return withCode(exitProgramError, err)
	}
	if !o.stdio {
		if err := checkListen(o.listen, o.token, o.oauthIssuer != ""); err != nil {
			return withCode(exitProgramError, err)
		}
	}
	if o.maxStreams < 0 || o.maxSessionCalls <= 0 {
		return withCode(exitProgramError, fmt.Errorf("--max-streams must not be negative and --max-session-calls must be positive (got %d and %d)", o.maxStreams, o.maxSessionCalls))
	}
	if o.maxSessions <= 0 || o.maxSubscriptions <= 0 || o.sessionIdle < 0 {
		return withCode(exitProgramError, fmt.Errorf("--max-sessions and --max-subscriptions must be positive and --session-idle-timeout not negative (got %d, %d and %v)", o.maxSessions, o.maxSubscriptions, o.sessionIdle))
	}
	sessionIdle := o.sessionIdle
	if sessionIdle == 0 {
		sessionIdle = -1 // never, as mcpserver.Options spells it
	}
	policy, err := egress.New(egress.Options{
		Servers:     append(append([]string(nil), o.allowServers...), envList(allowServersEnv)...),
		Commands:    append(append([]string(nil), o.allowCommands...), envList(allowCommandsEnv)...),
		Env:         append(append([]string(nil), o.allowEnv...), envList(allowEnvEnv)...),
		ServerFlag:  "rtfshost serve --allow-server PREFIX",
		CommandFlag: "rtfshost serve --allow-command NAME",
		EnvFlag:     "rtfshost serve --allow-env NAME",
	})
	if err != nil {
		return withCode(exitProgramError, fmt.Errorf("the egress policy (--allow-server, --allow-env): %w", err))
	}
	ob, err := a.newObservability(cmd.Context(), o.obs)
	if err != nil {
		return err
	}
	defer ob.close()
	emb, err := startEmbedded(provider.ResolveServerURL(a.flags.serverURL))
	if err != nil {
		return withCode(exitStreamFailed, err)
	}
	defer emb.Close()
	var clusterOpts *cluster.Options
	if len(o.cluster) > 0 {
		if cmd.Flags().Changed("data") {
			return withCode(exitProgramError, errors.New("--cluster and --data: a host in a cluster keeps its records in JetStream; give one"))
		}
		node := o.node
		if node == "" {
			if node, err = os.Hostname(); err != nil {
				return withCode(exitProgramError, fmt.Errorf("--node: no node name given and the host name is unknown: %w", err))
			}
		}
		if o.placement != "local" && o.placement != "balanced" {
			return withCode(exitProgramError, fmt.Errorf("--placement %q: give local or balanced", o.placement))
		}
		clusterOpts = &cluster.Options{URLs: o.cluster, Node: node, LeaseTTL: o.leaseTTL, Replicas: o.replicas,
			Balanced: o.placement == "balanced", Credentials: o.natsCreds, RootCA: o.natsCA, Domain: o.natsDomain, Logger: logger}
	} else {
		for _, f := range []string{"node", "lease-ttl", "placement", "cluster-replicas", "nats-creds", "nats-ca", "nats-domain"} {
			if cmd.Flags().Changed(f) {
				return withCode(exitProgramError, fmt.Errorf("--%s needs --cluster", f))
			}
		}
	}
	h, err := a.openHostIn(clusterOpts, host.Options{
		Streams: provider.Options{
			ServerURL: a.flags.serverURL, Logger: logger,
			Egress: policy, Limits: a.rt.limits(), IdleTimeout: a.rt.idle(), MaxStreams: o.maxStreams,
			Breaker:    a.rt.breaker(),
			HTTPClient: emb.client(), Observer: ob.observer(),
		},
		Limits: a.rt.limits(),
		Stdout: a.stderr, // stdout is for the server's own lines
		Logger: logger,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	// The host's shutdown grace starts at the signal: the MCP server closes
	// first, and its calls and events may wait for the store as well.
	defer context.AfterFunc(cmd.Context(), h.BeginClose)()
	if clusterOpts == nil {
		// Other commands and runs on the data directory reach this host
		// through its control socket.
		hold, err := a.serveHolder(h, &owners{})
		if err != nil {
			logger.Warn("the data directory's control socket is not served", "err", err)
		}
		defer hold.close()
	}
	if err := ob.watchCluster(h.Cluster()); err != nil {
		return withCode(exitStreamFailed, err)
	}
	routes, closeRoutes, err := ob.serveRoutes(cmd.Context(), h.Provider(), !o.noUI && !o.stdio, &o.delivery.policy, a.rt.limits(), a.recordingsDir(&o))
	if err != nil {
		return withCode(exitStreamFailed, err)
	}
	defer closeRoutes()
	mopts := mcpserver.Options{
		Host: h, Token: o.token, Delivery: &o.delivery.policy,
		AllowedOrigins: o.allowOrigins, Version: version, Logger: logger,
		Limits: a.rt.limits(), MaxCallsPerSession: o.maxSessionCalls,
		MaxSessions: o.maxSessions, MaxSubscriptions: o.maxSubscriptions, SessionIdleTimeout: sessionIdle,
		Observer: ob.obs, Routes: routes,
	}
	var ln net.Listener
	if !o.stdio {
		if ln, err = net.Listen("tcp", o.listen); err != nil {
			return withCode(exitStreamFailed, fmt.Errorf("--listen %s: %w", o.listen, err))
		}
		defer ln.Close()
		if o.oauthIssuer != "" {
			mopts.OAuth = oauthOptions(o, ln.Addr().String())
		}
	}
	srv, err := mcpserver.New(mopts)
	if err != nil {
		return withCode(exitProgramError, err)
	}
	defer srv.Close()
	// Streams an earlier run, resume or serve left unfinished carry on here.
	if err := srv.Recover(cmd.Context()); err != nil {
		where := a.flags.dataDir
		if clusterOpts != nil {
			where = "the cluster"
		}
		fmt.Fprintln(a.stderr, "rtfshost: recovering the streams of", where+":", err)
	}
	if o.stdio {
		if err := srv.ServeStdio(cmd.Context(), io.NopCloser(a.stdin), o.stdioOut); err != nil {
			return withCode(exitStreamFailed, err)
		}
		return nil
	}
	a.tellServing(o, ln.Addr().String(), mopts.OAuth)
	if err := srv.Serve(cmd.Context(), ln); err != nil {
		return withCode(exitStreamFailed, err)
	}
	return nil
}

// tellServing prints where serve listens at addr: its sentences, or with
// --json one listening line.
func (a *app) tellServing(o serveOptions, addr string, oa *mcpserver.OAuth) {
	base := "http://" + addr
	l := listeningLine{URL: base + mcpserver.PathStreamable, SSE: base + mcpserver.PathSSE, Metrics: base + "/metrics",
		Live: base + mcpserver.PathHealth, Ready: base + mcpserver.PathReady}
	if !o.noUI {
		l.Dashboard = base + dashboard.Prefix
	}
	if oa != nil {
		l.OAuthIssuer, l.OAuthMetadata = oa.Issuer, oa.MetadataURL()
	}
	if o.json {
		writeListening(a.stdout, l)
		return
	}
	fmt.Fprintf(a.stdout, "rtfshost MCP server listening on %s (legacy SSE: %s)\n", l.URL, l.SSE)
	if l.Dashboard != "" {
		fmt.Fprintf(a.stdout, "dashboard: %s  metrics: %s\n", l.Dashboard, l.Metrics)
	} else {
		fmt.Fprintf(a.stdout, "metrics: %s\n", l.Metrics)
	}
	fmt.Fprintf(a.stdout, "probes: %s (live)  %s (ready)\n", l.Live, l.Ready)
	if oa != nil {
		fmt.Fprintf(a.stdout, "OAuth: access tokens of %s for %s (metadata: %s)\n", oa.Issuer, oa.Resource, l.OAuthMetadata)
	}
}

// checkListen refuses, before anything listens, a non-loopback --listen
// address without a strong token or OAuth (mcpserver.Server.Serve checks
// the bound address again).
func checkListen(addr, token string, oauth bool) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	if oauth {
		return nil
	}
	if err := mcpserver.CheckExposure(addr, token); err != nil {
		return fmt.Errorf("--listen: %w (--token or $%s, or --oauth-issuer)", err, tokenEnv)
	}
	return nil
}

// deliveryFlags are serve's delivery policy: how the outputs of a call's
// streams become progress notifications, and reach the dashboard
// (docs/streams.md, "Delivery"); a stream's :delivery overrides them.
type deliveryFlags struct{ policy provider.Delivery }

func (d *deliveryFlags) add(cmd *cobra.Command) {
	def := provider.DefaultDelivery()
	d.policy = def
	f := cmd.Flags()
	f.DurationVar(&d.policy.Normal.Interval, "normal-interval", def.Normal.Interval, "least time between two deliveries of normal outputs to one subscriber (a progress notification, the dashboard); 0: at once")
	f.IntVar(&d.policy.Normal.MaxBatch, "normal-batch", def.Normal.MaxBatch, "most normal outputs one delivery carries; a full batch goes at once")
	f.DurationVar(&d.policy.Low.Interval, "low-interval", def.Low.Interval, "least time between two deliveries of low outputs to one subscriber; more than a batch waiting drops the oldest")
	f.IntVar(&d.policy.Low.MaxBatch, "low-batch", def.Low.MaxBatch, "most low outputs one delivery carries")
}

func (d *deliveryFlags) check() error {
	for _, t := range []struct {
		name string
		t    provider.Throttle
	}{{"normal", d.policy.Normal}, {"low", d.policy.Low}} {
		if t.t.Interval < 0 {
			return fmt.Errorf("--%s-interval: must not be negative, got %v", t.name, t.t.Interval)
		}
		if t.t.MaxBatch < 1 {
			return fmt.Errorf("--%s-batch: must be at least 1, got %d", t.name, t.t.MaxBatch)
		}
	}
	return nil
}

// checkServeFlags refuses flags that do not go together: those of HTTP
// with --stdio, a static token with OAuth, the OAuth flags without
// --oauth-issuer, and OAuth on a non-loopback address without
// --public-url (the URL clients are given cannot be guessed there).
func checkServeFlags(cmd *cobra.Command, o *serveOptions) error {
	changed := cmd.Flags().Changed
	if o.stdio {
		for _, f := range []string{"listen", "token", "allow-origin", "public-url", "oauth-issuer", "oauth-audience", "oauth-private-issuer", "no-ui", "json"} {
			if changed(f) {
				return fmt.Errorf("--stdio and --%s: a server on stdio does not listen, and trusts the client that launched it (docs/mcp-server.md)", f)
			}
		}
		return nil
	}
	if o.oauthIssuer == "" {
		for _, f := range []string{"oauth-audience", "oauth-private-issuer", "public-url"} {
			if changed(f) {
				return fmt.Errorf("--%s needs --oauth-issuer", f)
			}
		}
		return nil
	}
	if o.token != "" {
		source := "--token"
		if !changed("token") {
			source = "$" + tokenEnv
		}
		return fmt.Errorf("--oauth-issuer and %s: give one (a static token for one operator, OAuth for clients that log in)", source)
	}
	if host, _, err := net.SplitHostPort(o.listen); err == nil && o.publicURL == "" && !isLoopbackHost(host) {
		return fmt.Errorf("--oauth-issuer on --listen %s needs --public-url, the URL clients reach this server at (e.g. https://mcp.example.com)", o.listen)
	}
	return nil
}

// isLoopbackHost reports whether host is localhost or a loopback IP.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// oauthOptions are the OAuth options of serve listening on addr: the
// resource is --public-url (default http://addr) with /mcp.
func oauthOptions(o serveOptions, addr string) *mcpserver.OAuth {
	base := strings.TrimRight(o.publicURL, "/")
	if base == "" {
		base = "http://" + addr
	}
	return &mcpserver.OAuth{Issuer: o.oauthIssuer, Resource: base + mcpserver.PathStreamable, Audience: o.oauthAudience, PrivateIssuer: o.oauthPrivate}
}

// recordingsDir is where the dashboard's playground finds recordings: the
// data directory's recordings/ ("" in a cluster, whose records are not in
// a directory).
func (a *app) recordingsDir(o *serveOptions) string {
	if len(o.cluster) > 0 {
		return ""
	}
	dir, err := filepath.Abs(filepath.Join(a.flags.dataDir, "recordings"))
	if err != nil {
		return ""
	}
	return dir
}
