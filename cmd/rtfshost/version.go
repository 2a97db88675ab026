package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// version is the release version (CHANGELOG.md); a release build sets it
// with -ldflags "-X main.version=v0.3.0", builds from source report
// "devel".
var version = "devel"

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the rtfshost version, its store format and its compile version",
		Long: `version prints the release version (CHANGELOG.md lists the releases), the
format of the data directories this build writes (it reads those of every
earlier release), and the version of its RTFS compiler (streams and parked
programs of another compiler come back by replaying their programs; see
docs/upgrading.md), then the revision and Go version it was built from.`,
		Example: "  rtfshost version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = " " + s.Value
					}
				}
			}
			fmt.Fprintf(a.stdout, "rtfshost %s\nstore format %d\ncompile version %s\nbuilt from%s (%s %s/%s)\n",
				version, persistence.StoreFormat, rtfs.CompileVersion(), orSource(rev), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// orSource is the revision, or "source" when the build recorded none.
func orSource(rev string) string {
	if rev == "" {
		return " source"
	}
	return rev
}
