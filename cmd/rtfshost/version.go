package main

import (
	"encoding/json"
	"fmt"
	"io"
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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the rtfshost version, its store format and its compile version",
		Long: `version prints the release version (CHANGELOG.md lists the releases), the
format of the data directories this build writes (it reads those of every
earlier release), and the version of its RTFS compiler (streams and parked
programs of another compiler come back by replaying their programs; see
docs/upgrading.md), then the revision and Go version it was built from.
With --json it prints them as one JSON object.`,
		Example: "  rtfshost version\n  rtfshost version --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = s.Value
					}
				}
			}
			if asJSON {
				return writeJSON(a.stdout, versionLine{Type: "version", Version: version, StoreFormat: persistence.StoreFormat,
					CompileVersion: rtfs.CompileVersion(), Revision: rev, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH})
			}
			if rev != "" {
				rev = " " + rev
			}
			fmt.Fprintf(a.stdout, "rtfshost %s\nstore format %d\ncompile version %s\nbuilt from%s (%s %s/%s)\n",
				version, persistence.StoreFormat, rtfs.CompileVersion(), orSource(rev), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (docs/cli.md has the format)")
	return cmd
}

// versionLine is version --json's object.
type versionLine struct {
	Type           string `json:"type"`
	Version        string `json:"version"`
	StoreFormat    int    `json:"store-format"`
	CompileVersion string `json:"compile-version"`
	Revision       string `json:"revision,omitempty"` // absent when the build recorded none
	Go             string `json:"go"`
	OS             string `json:"os"`
	Arch           string `json:"arch"`
}

// writeJSON writes v as one JSON line, as the reporters do (no HTML
// escaping).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// orSource is the revision, or "source" when the build recorded none.
func orSource(rev string) string {
	if rev == "" {
		return " source"
	}
	return rev
}
