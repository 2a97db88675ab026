package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) checkCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE.rtfs...",
		Short: "Read and compile RTFS programs and report their errors",
		Long: `check reads and compiles each program without running it. Errors are printed
as file:line:col: message with the offending source line, and the exit code
is 2 if any program has an error.`,
		Example: `  rtfshost check examples/weather.rtfs
  rtfshost check examples/*.rtfs`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			failed := false
			for _, f := range files {
				if _, err := a.loadProgram(f); err != nil {
					failed = true
					var ee *exitError
					if !errors.As(err, &ee) || !ee.printed {
						fmt.Fprintln(a.stderr, "rtfshost:", err)
					}
					continue
				}
				fmt.Fprintf(a.stdout, "%s: ok\n", f)
			}
			if failed {
				return printedWithCode(exitProgramError)
			}
			return nil
		},
	}
}
