package persistence_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv names the environment variable that turns the test binary into a
// child process for the cross-process tests; its value is the child's role.
const childEnv = "RTFSHOST_PERSISTENCE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := runChild(role, os.Getenv("RTFSHOST_PERSISTENCE_DIR")); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func runChild(role, dir string) error {
	switch role {
	case "lock":
		return holdLock(dir)
	case "crash":
		return commitForever(dir)
	case "removed":
		return closeRemoved(dir)
	}
	return fmt.Errorf("unknown child role %q", role)
}
