//go:build !(linux || darwin || freebsd)

package persistence

import "os"

// freeSpace reports unknown free space (-1) where statfs is unavailable; the
// space guard then lets every write through.
func freeSpace(dir string) (int64, error) { return -1, nil }

// allocated returns the size of fi's file.
func allocated(fi os.FileInfo) int64 { return fi.Size() }

// freeSpaceOf reports unknown free space where statfs is unavailable.
func freeSpaceOf(d *os.File) func(string) (int64, error) { return freeSpace }

// unlinkedOf cannot tell where fstat's link count is unavailable; the
// guard looks at the directory's path instead.
func unlinkedOf(d *os.File) func() bool { return nil }
