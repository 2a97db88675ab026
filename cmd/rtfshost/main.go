// Command rtfshost runs RTFS stream processors: it compiles an RTFS program,
// serves its host calls (mcp.stream.start, inspect, await...), streams every
// chunk of every stream it starts through the program's processors, persists the
// streams in a Badger data directory so that a killed run can be resumed, and
// reports what happens on the terminal or as JSON lines.
//
// Run "rtfshost --help" for the commands. Exit codes: 0 when the program and
// every stream it started completed, 1 when a stream failed, 2 for a program
// error (reader, compile or runtime error, printed as file:line:col: message
// with the offending source line) or bad usage.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	setGCDefaults(os.LookupEnv) // docs/performance.md
	os.Exit(mainWithIO(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// mainWithIO runs the command line with the given arguments and streams and
// returns the process exit code. Tests call it in-process.
func mainWithIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling: a second Ctrl-C
	// ends the process at once (commits are transactional, so state is safe).
	go func() {
		<-ctx.Done()
		stop()
	}()
	app := newApp(stdin, stdout, stderr)
	return app.execute(ctx, args)
}
