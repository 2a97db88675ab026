package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport/breaker"
)

// runtimeFlags are the budgets of programs and processors and the idle
// timeout of sources: one flag set shared by run, resume and serve
// (docs/security.md). serve's defaults are tighter, since its programs come
// from MCP clients.
type runtimeFlags struct {
	maxSteps    int64
	maxMemory   string
	maxOutput   string
	callTimeout time.Duration
	idleTimeout time.Duration
	idleSet     bool // --idle-timeout was given (0 then disables it)

	breakerFailures int
	breakerCooldown time.Duration
}

// The defaults of serve, which runs programs that MCP clients send.
const (
	serveMaxMemory   = "256MiB"
	serveMaxOutput   = "16MiB"
	serveCallTimeout = 30 * time.Second
)

// addRuntimeFlags registers the shared flags on cmd; serve selects serve's
// defaults.
func (a *app) addRuntimeFlags(cmd *cobra.Command, serve bool) {
	f := cmd.Flags()
	mem, out, timeout := "", "", time.Duration(0)
	memDoc := "memory budget of one program run or processor call, e.g. 64MiB (default 1GiB; -1: none)"
	outDoc := "most bytes of one encoded result, output or state, as JSON or in the store, e.g. 4MiB (default and -1: the memory budget)"
	timeoutDoc := "wall-time limit of one program run or processor call between host calls (0: none)"
	if serve {
		mem, out, timeout = serveMaxMemory, serveMaxOutput, serveCallTimeout
		memDoc = "memory budget of one program run or processor call, e.g. 64MiB (-1: none)"
		outDoc = "most bytes of one encoded result, output or state, as JSON or in the store, e.g. 4MiB (-1: the memory budget's)"
	}
	f.Int64Var(&a.rt.maxSteps, "max-steps", 0, fmt.Sprintf("step budget of one program run or processor call, builtins' work included (default %d)", rtfs.DefaultMaxSteps))
	f.StringVar(&a.rt.maxMemory, "max-memory", mem, memDoc)
	f.StringVar(&a.rt.maxOutput, "max-output-bytes", out, outDoc)
	f.DurationVar(&a.rt.callTimeout, "call-timeout", timeout, timeoutDoc)
	f.DurationVar(&a.rt.idleTimeout, "idle-timeout", 0, "reconnect a source that sends nothing for this long; 0 disables (default $RTFSHOST_IDLE_TIMEOUT_MS, else 60s)")
	f.IntVar(&a.rt.breakerFailures, "breaker-failures", breaker.DefaultFailures, "consecutive failed attempts on one origin (server or program) that open its circuit; -1: never")
	f.DurationVar(&a.rt.breakerCooldown, "breaker-cooldown", breaker.DefaultCooldown, "how long an open circuit makes starts and reconnects to its origin fail at once")
}

// runtimeFlagNames are the flags addRuntimeFlags registers.
var runtimeFlagNames = []string{"max-steps", "max-memory", "max-output-bytes", "call-timeout", "idle-timeout"}

// resolve applies the defaults of cmd to the flags it was not given, checks
// the flags and records whether --idle-timeout was given. run, resume and
// serve bind their flags to the one runtimeFlags, so registering them set
// it to the defaults of whichever command came last (resume's): serve ran
// with no call timeout and a 1 GiB memory budget. resolve sets serve's.
func (rt *runtimeFlags) resolve(cmd *cobra.Command) error {
	for _, name := range runtimeFlagNames {
		if f := cmd.Flags().Lookup(name); f != nil && !f.Changed {
			if err := f.Value.Set(f.DefValue); err != nil {
				return fmt.Errorf("--%s: default %q: %w", name, f.DefValue, err)
			}
		}
	}
	rt.idleSet = cmd.Flags().Changed("idle-timeout")
	switch {
	case rt.maxSteps < 0:
		return fmt.Errorf("--max-steps: must not be negative, got %d", rt.maxSteps)
	case rt.callTimeout < 0:
		return fmt.Errorf("--call-timeout: must not be negative, got %v", rt.callTimeout)
	case rt.idleTimeout < 0:
		return fmt.Errorf("--idle-timeout: must not be negative, got %v", rt.idleTimeout)
	case rt.breakerFailures == 0 || rt.breakerFailures < -1:
		return fmt.Errorf("--breaker-failures: must be positive, or -1 to never open a circuit, got %d", rt.breakerFailures)
	case rt.breakerCooldown <= 0:
		return fmt.Errorf("--breaker-cooldown: must be positive, got %v", rt.breakerCooldown)
	}
	if _, err := parseBytes(rt.maxMemory); err != nil {
		return fmt.Errorf("--max-memory: %w", err)
	}
	if _, err := parseBytes(rt.maxOutput); err != nil {
		return fmt.Errorf("--max-output-bytes: %w", err)
	}
	return nil
}

// limits returns the rtfs.Limits the flags describe (zero fields: rtfs's
// defaults).
func (rt *runtimeFlags) limits() rtfs.Limits {
	mem, _ := parseBytes(rt.maxMemory) // checked by resolve
	out, _ := parseBytes(rt.maxOutput)
	if out < 0 {
		out = 0 // -1: the memory budget's bound (Limits.OutputLimit)
	}
	return rtfs.Limits{MaxSteps: rt.maxSteps, MaxMemory: mem, MaxOutput: out, MaxDuration: rt.callTimeout}
}

// breaker returns provider.Options.Breaker for the flags.
func (rt *runtimeFlags) breaker() breaker.Options {
	return breaker.Options{Failures: rt.breakerFailures, Cooldown: rt.breakerCooldown}
}

// idle returns provider.Options.IdleTimeout for the flags: zero (the
// environment, else 60 s) unless --idle-timeout was given, negative for an
// explicit 0.
func (rt *runtimeFlags) idle() time.Duration {
	switch {
	case !rt.idleSet:
		return 0
	case rt.idleTimeout == 0:
		return -1
	}
	return rt.idleTimeout
}

// parseBytes reads a size: a number of bytes, or a number with a unit (KB,
// MB, GB, KiB, MiB, GiB; case-insensitive). "" is 0 (the default) and "-1"
// means no budget.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if s == "-1" {
		return -1, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"b", 1}}
	num, mult := strings.ToLower(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size: write bytes (1048576) or a number with KiB, MiB, GiB, KB, MB or GB, or -1 for no budget", s)
	}
	return n * mult, nil
}

// envList reads a comma-separated list from the environment variable name.
func envList(name string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
