package main

import (
	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/rtfs"
)

func (a *app) checkCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check FILE.rtfs...",
		Short: "Read and compile RTFS programs and report their errors",
		Long: `check reads and compiles each program without running it. Errors are printed
as file:line:col: message with the offending source line, and the exit code
is 2 if any program has an error. With --json each file gives one line:
{"type":"ok","file":F}, or {"type":"error","file":F,"line":L,"col":C,"message":M}.`,
		Example: `  rtfshost check examples/weather.rtfs
  rtfshost check examples/*.rtfs
  rtfshost check --json examples/*.rtfs`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			failed := false
			for _, f := range files {
				if err := a.checkFile(f, asJSON); err != nil {
					failed = true
				}
			}
			if failed {
				return printedWithCode(exitProgramError)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per file")
	return cmd
}

// checkFile compiles one file and prints its outcome.
func (a *app) checkFile(f string, asJSON bool) error {
	var rep reporter = newJSONReporter(a.stdout, hints{})
	src, err := a.readProgram(f)
	if err == nil {
		if !asJSON {
			rep = &textReporter{out: a.stdout, errw: a.stderr, sources: map[string][]byte{f: src}}
		}
		_, err = rtfs.Compile(f, src)
		if err != nil {
			rep.fail(failureOf(err, f))
			return err
		}
	} else {
		if !asJSON {
			rep = &textReporter{out: a.stdout, errw: a.stderr}
		}
		rep.fail(failure{Kind: failOther, File: f, Message: err.Error()})
		return err
	}
	if asJSON {
		writeJSONLine(a.stdout, jsonLine{Type: "ok", File: f})
	} else {
		a.stdout.Write([]byte(f + ": ok\n"))
	}
	return nil
}
