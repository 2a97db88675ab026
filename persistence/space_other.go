//go:build !(linux || darwin || freebsd)

package persistence

import "os"

// freeSpace reports unknown free space (-1) where statfs is unavailable; the
// space guard then lets every write through.
func freeSpace(dir string) (int64, error) { return -1, nil }

// allocated returns the size of fi's file.
func allocated(fi os.FileInfo) int64 { return fi.Size() }
