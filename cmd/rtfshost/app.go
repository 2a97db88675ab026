package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// globalFlags are the flags every command accepts.
type globalFlags struct {
	dataDir   string
	serverURL string
	logLevel  string
	sync      bool
}

// app holds one invocation of the command line: its streams and flags. Nothing
// lives in package globals, so tests can run many apps in one process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	flags          globalFlags
	rt             runtimeFlags // budgets and idle timeout of run, resume and serve
	root           *cobra.Command
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "rtfshost",
		Short: "Run RTFS stream processors over SSE and MCP streams, durably",
		Long: `rtfshost runs RTFS programs whose processors consume streams.

A program calls (call :mcp.stream.start {...}); rtfshost connects to the
stream (raw SSE, MCP Streamable HTTP, legacy MCP HTTP+SSE), calls the
processor for every chunk, applies its directives, and persists every stream in
the data directory so that "rtfshost resume" carries on after a crash.`,
		Example: `  rtfshost run examples/weather.rtfs
  rtfshost run --json examples/multiplex.rtfs
  rtfshost check examples/weather.rtfs
  rtfshost inspect --data .rtfshost`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetVersionTemplate("rtfshost {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.dataDir, "data", ".rtfshost", "data directory of the stream database")
	pf.StringVar(&a.flags.serverURL, "server-url", "", "stream server base URL (overrides CCOS_MCP_STREAM_ENDPOINT and the other env vars)")
	pf.StringVar(&a.flags.logLevel, "log-level", "warn", "log level: debug, info, warn or error (logs go to stderr)")
	pf.BoolVar(&a.flags.sync, "sync", false, "sync every commit to disk (survives power loss, slower)")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(a.versionCmd(), a.checkCmd(), a.testCmd(), a.docCmd())
	a.addCommands(root)
	a.root = root
	return a
}

// execute runs the command line and returns the exit code.
func (a *app) execute(ctx context.Context, args []string) int {
	a.root.SetArgs(args)
	err := a.root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) || !ee.printed {
		// Under --json every error is a JSON line on stdout, as the
		// commands' own are.
		a.printErr(jsonAsked(args), err)
	}
	return exitCodeOf(err)
}

// jsonAsked reports whether the command line asks for --json (before a
// "--"): errors found before the command runs, such as a bad flag, are
// then JSON lines too.
func jsonAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true":
			return true
		}
	}
	return false
}

// logger returns the slog logger selected by --log-level, writing to stderr.
func (a *app) logger() (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(a.flags.logLevel) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn", "warning", "":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, withCode(exitProgramError, fmt.Errorf("--log-level: unknown level %q (want debug, info, warn or error)", a.flags.logLevel))
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})), nil
}
