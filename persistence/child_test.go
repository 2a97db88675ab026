package persistence_test

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/rtfshost/rtfshost/persistence"
)

// holdLock opens the store in dir, says "ready" on stdout, and closes the
// store when stdin reaches EOF.
func holdLock(dir string) error {
	s, err := persistence.OpenBadger(dir, persistence.Options{})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return s.Close()
}
