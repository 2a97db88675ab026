//go:build unix

package proc

import (
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// hostEnv makes the test binary a host for the tests that kill one (see
// hostMain) instead of the tests.
const hostEnv = "RTFSHOST_PROC_TEST_HOST"

func init() {
	if os.Getenv(hostEnv) != "" {
		// The host's main goroutine keeps the main thread (which Go never
		// ends), so that the goroutine that starts the program runs on
		// another thread, which ends with it.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(hostEnv); mode != "" {
		os.Exit(hostMain(mode))
	}
	goleak.VerifyTestMain(m)
}
