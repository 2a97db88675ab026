package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/rtfs"
)

// docCmd prints the index of RTFS's core library (rtfs.Universe): one
// function's usage and doc, the functions whose name contains a word, or
// the whole list.
func (a *app) docCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doc [NAME]",
		Short: "Show the RTFS core functions: one by name, or all of them",
		Long: `doc prints the usage and one-line description of an RTFS core function
(a Go builtin or a prelude function). Without NAME it lists every function;
a NAME that is no function lists the functions whose name contains it.`,
		Example: `  rtfshost doc
  rtfshost doc update-in
  rtfshost doc str/join
  rtfshost doc partition`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u := rtfs.Universe()
			if len(args) == 1 {
				if d, ok := rtfs.LookupDoc(args[0]); ok {
					fmt.Fprintf(a.stdout, "%s\n  %s\n", d.Usage, d.Doc)
					if d.Prelude {
						fmt.Fprintln(a.stdout, "  (prelude: written in RTFS; a host call in its callback suspends like any other)")
					}
					return nil
				}
				var near []rtfs.FuncDoc
				for _, d := range u {
					if strings.Contains(d.Name, args[0]) {
						near = append(near, d)
					}
				}
				if len(near) == 0 {
					return withCode(exitProgramError, fmt.Errorf("no RTFS function is called %q or has it in its name (rtfshost doc lists them all)", args[0]))
				}
				fmt.Fprintf(a.stdout, "no function is called %q; these have it in their name:\n", args[0])
				u = near
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, d := range u {
				fmt.Fprintf(tw, "%s\t%s\n", d.Usage, d.Doc)
			}
			return tw.Flush()
		},
	}
}
