package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/lint"
	"github.com/rtfshost/rtfshost/provider"
)

func (a *app) checkCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check FILE.rtfs...",
		Short: "Read and compile RTFS programs and report their errors",
		Long: `check reads and compiles each program without running it and reports what a
run would stop on at once: every undefined symbol, a call of a function the
file defines with a number of arguments none of its arities takes, a host
call whose literal map lacks a required key or names an unknown one (such as
an mcp.stream.start without :processor), and a :processor that names no
function of the file or takes neither 2 nor 3 parameters. Each problem is
printed as file:line:col: message with the offending source line, and the
exit code is 2 if any program has one. With --json each problem is one line
{"type":"error","file":F,"line":L,"col":C,"message":M}, and a file without
problems gives {"type":"ok","file":F}.`,
		Example: `  rtfshost check examples/weather.rtfs
  rtfshost check examples/*.rtfs
  rtfshost check --json examples/*.rtfs`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			calls, err := hostCalls()
			if err != nil {
				return withCode(exitProgramError, fmt.Errorf("check: %w", err))
			}
			failed := false
			for _, f := range files {
				if err := a.checkFile(f, asJSON, calls); err != nil {
					failed = true
				}
			}
			if failed {
				return printedWithCode(exitProgramError)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per problem, or per file without problems")
	return cmd
}

// checkFile checks one file and prints its outcome: "ok", or each problem
// lint finds (every undefined symbol, calls of the file's functions with a
// wrong number of arguments, host calls whose literal map does not fit,
// processors a start could not call).
func (a *app) checkFile(f string, asJSON bool, calls *capabilities.Registry) error {
	var rep reporter = newJSONReporter(a.stdout, hints{})
	src, err := a.readProgram(f)
	if err != nil {
		if !asJSON {
			rep = &textReporter{out: a.stdout, errw: a.stderr}
		}
		rep.fail(failure{Kind: failOther, File: f, Message: err.Error()})
		return err
	}
	if !asJSON {
		rep = &textReporter{out: a.stdout, errw: a.stderr, sources: map[string][]byte{f: src}}
	}
	probs := lint.Check(f, src, calls)
	for _, p := range probs {
		fl := failure{Kind: failProgram, Message: p.Msg}
		if p.Pos.IsValid() {
			fl.File, fl.Line, fl.Col = f, int(p.Pos.Line), int(p.Pos.Col)
		}
		rep.fail(fl)
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %d problems", f, len(probs))
	}
	if asJSON {
		writeJSONLine(a.stdout, jsonLine{Type: "ok", File: f})
	} else {
		a.stdout.Write([]byte(f + ": ok\n"))
	}
	return nil
}

// hostCalls returns the host calls a program run by this command may make:
// those of a host with the default transports (made and closed again; it
// starts no stream and opens no store).
func hostCalls() (*capabilities.Registry, error) {
	h, err := host.New(host.Options{Streams: provider.Options{Transports: host.DefaultTransports()}})
	if err != nil {
		return nil, fmt.Errorf("list the host calls: %w", err)
	}
	reg := h.Capabilities()
	if err := h.Close(); err != nil {
		return nil, fmt.Errorf("list the host calls: %w", err)
	}
	return reg, nil
}
