package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrReadOnly is wrapped by the errors of writes to a store opened with
// OpenBadgerReadOnly.
var ErrReadOnly = errors.New("the store was opened for reading only")

// OpenBadgerReadOnly opens the existing store in dir for reading: Get and
// Scan work, Commit fails with an error wrapping ErrReadOnly, and nothing
// in dir is created, written or deleted, whatever state it is in. It fails
// with a *LockedError while a store holds dir (a reader keeps a writer out
// meanwhile, not other readers), and with a *DamagedError, changing
// nothing, when the files do not match the MANIFEST (checkIntact).
//
// A directory that its last writer closed is read in place, by a
// read-only Badger open. One that a crash left with write-ahead logs
// (.mem files: Badger must truncate them before it can read them), with
// tables that its MANIFEST does not list (a crash's leftovers, which every
// Badger open deletes) or with empty files is read from a copy in the
// temporary directory (os.TempDir), opened read-write there and removed by
// Close: the copy costs the directory's size in time and space, which must
// be free there (the reserve of Options.MinFreeBytes included).
// "rtfshost resume" (a read-write open) leaves the directory clean again.
// Options.SyncWrites and GCInterval are ignored.
func OpenBadgerReadOnly(dir string, opts Options) (*BadgerStore, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("persistence: open %q: %w", dir, err)
	}
	opts.GCInterval = -1
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("persistence: open %q: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("persistence: open %q for reading: %w", abs, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("persistence: open %q for reading: not a directory", abs)
	}
	lock, err := lockDirShared(abs)
	if err != nil {
		return nil, err
	}
	s, err := openReadOnly(abs, opts, lock)
	if err != nil {
		lock.release()
		return nil, err
	}
	return s, nil
}

func openReadOnly(abs string, opts Options, lock *dirLock) (*BadgerStore, error) {
	if err := checkIntact(abs); err != nil {
		return nil, err
	}
	if why := needsCopy(abs); why == "" {
		db, err := openDB(opts.badgerOptions(abs).WithReadOnly(true))
		if err != nil {
			if isBadgerLockError(err) {
				return nil, &LockedError{Dir: abs, Err: err}
			}
			return nil, &DamagedError{Dir: abs, Problem: "Badger cannot open it", Err: err}
		}
		s := newBadgerStore(abs, db, lock, opts)
		s.readOnly = true
		return s, nil
	}
	scratch, err := copyForReading(abs, opts.MinFreeBytes)
	if err != nil {
		return nil, fmt.Errorf("persistence: open %q for reading: %w", abs, err)
	}
	if err := removeTornFiles(scratch, nil); err != nil {
		os.RemoveAll(scratch)
		return nil, err
	}
	opts.MinFreeBytes = -1 // checked for the copy
	db, err := openDB(opts.badgerOptions(scratch))
	if err != nil {
		os.RemoveAll(scratch)
		return nil, &DamagedError{Dir: abs, Problem: "Badger cannot open a copy of it", Err: err}
	}
	s := newBadgerStore(scratch, db, lock, opts)
	s.dir, s.readOnly, s.scratch = abs, true, scratch
	return s, nil
}

// needsCopy says why the directory dir cannot be read in place by a
// read-only Badger open without failing or changing it, or "" when it can.
func needsCopy(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "it cannot be listed"
	}
	manifest := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == "MANIFEST":
			manifest = true
		case strings.HasSuffix(name, ".mem"):
			return "a write-ahead log (.mem) that its last writer did not close"
		case strings.HasSuffix(name, ".vlog"):
			if fi, err := e.Info(); err == nil && fi.Size() == 0 {
				return "an empty value log"
			}
		}
	}
	if !manifest {
		return "no MANIFEST (a store nothing was written to)"
	}
	// A table the MANIFEST does not list: checkIntact found it to be a
	// crash's leftover, which any Badger open deletes.
	f, err := os.Open(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return "its MANIFEST cannot be read"
	}
	defer f.Close()
	m, _, err := replayManifest(f, dir)
	if err != nil {
		return "its MANIFEST cannot be read"
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != len(m.Tables) {
		return "tables that its MANIFEST does not list"
	}
	return ""
}

// copyForReading copies the files of the data directory dir into a new
// directory under os.TempDir, which must keep reserve bytes free beyond
// the copy. Sparse files stay sparse. The locks and the spare file are not
// copied.
func copyForReading(dir string, reserve int64) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var files []fs.FileInfo
	var need int64
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" || e.Name() == lockFileName || e.Name() == spareFileName {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return "", err
		}
		files = append(files, fi)
		need += allocated(fi)
	}
	tmp := os.TempDir()
	if err := checkFreeSpace(tmp, need+max(reserve, 0), freeSpace); err != nil {
		return "", fmt.Errorf("a crash left it needing repairs that reading must not make, so it is read from a copy of %d MiB, "+
			"and the temporary directory has no room for it (set TMPDIR to a directory with room, or run \"rtfshost resume\", which repairs it): %w",
			need>>20, err)
	}
	scratch, err := os.MkdirTemp(tmp, "rtfshost-read-")
	if err != nil {
		return "", err
	}
	for _, fi := range files {
		if err := copySparse(filepath.Join(dir, fi.Name()), filepath.Join(scratch, fi.Name())); err != nil {
			os.RemoveAll(scratch)
			return "", fmt.Errorf("copying %s to read it: %w", fi.Name(), err)
		}
	}
	return scratch, nil
}

// copySparse copies the file src to the new file dst, leaving holes where
// src reads as zeros (Badger's files are mostly holes after a crash).
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	zero := make([]byte, len(buf))
	var size int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				_, werr := out.Seek(int64(n), io.SeekCurrent)
				err = errors.Join(err, werr)
			} else if _, werr := out.Write(buf[:n]); werr != nil {
				out.Close()
				return werr
			}
			size += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
