//go:build !linux

package persistence

// allocateSpare allocates nothing where fallocate is unavailable: the
// reserve alone guards the disk.
func allocateSpare(path string, size int64) (bool, error) { return false, nil }
