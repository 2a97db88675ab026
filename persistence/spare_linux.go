package persistence

import (
	"os"
	"syscall"
)

// allocateSpare creates the file path with size bytes allocated on disk
// (fallocate: no holes), or gives up, removing it, when it cannot.
func allocateSpare(path string, size int64) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		f.Close()
		os.Remove(path) // a failed fallocate may leave blocks allocated (ext4)
		return false, err
	}
	return true, f.Close()
}
