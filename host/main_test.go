package host_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"github.com/rtfshost/rtfshost/internal/localserver"
)

// stdioServerEnv makes the test binary the reference server's MCP tools on
// stdin/stdout, for streams with :transport :stdio.
const stdioServerEnv = "RTFSHOST_HOST_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if code, ran := clustertest.Main(); ran {
		os.Exit(code)
	}
	if spec := os.Getenv(clusterChildEnv); spec != "" {
		os.Exit(runClusterChild(spec))
	}
	if os.Getenv(stdioServerEnv) != "" {
		srv := localserver.New(localserver.Options{})
		err := srv.ServeStdio(context.Background(), os.Stdin, os.Stdout)
		srv.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
