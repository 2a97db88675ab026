package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// A DamagedError reports a data directory whose files are damaged: a
// missing or unreadable MANIFEST beside table or value-log files, a table
// the MANIFEST lists but the directory lacks, or a checksum or format
// failure while reading. OpenBadger returns it before Badger touches the
// directory, so nothing was changed; a read returns it instead of Badger's
// panic. Restore the directory from a backup, or move it aside to start
// afresh.
type DamagedError struct {
	Dir     string // the data directory
	File    string // the damaged file, when known
	Problem string // what is wrong
	Err     error  // the underlying failure, if any
}

// Error names the directory and what is damaged, and says that nothing was
// changed.
func (e *DamagedError) Error() string {
	msg := fmt.Sprintf("persistence: the data directory %s is damaged: %s", e.Dir, e.Problem)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + "; nothing was changed (restore it from a backup, or move it aside to start afresh)"
}

// Unwrap returns the underlying failure.
func (e *DamagedError) Unwrap() error { return e.Err }

// ErrDamaged is matched by every *DamagedError (errors.Is).
var ErrDamaged = errors.New("damaged data directory")

// Is reports ErrDamaged.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// checkIntact refuses a directory Badger would open wrongly. Badger creates
// a fresh, empty MANIFEST when it finds none, and then treats every table
// as an orphan: the streams would silently vanish. It also truncates a
// MANIFEST at its first bad record, which is right after a torn write (a
// crash) but loses tables when the file was damaged. So: a missing or
// unreadable MANIFEST beside data files, a table the MANIFEST lists that is
// missing or empty, or a MANIFEST cut short while tables it does not list
// are present, is a *DamagedError; so are a KEYREGISTRY or a listed table
// that fails its checks. A table the MANIFEST does not list is a crash's
// leftover, which Badger deletes, when its records are elsewhere; when
// they are not, the MANIFEST is older than the tables, and that is a
// *DamagedError too (checkUnlisted). A directory without data files (a new
// store) passes.
// Write-ahead logs (.mem) are not checked: Badger reads one up to its first
// bad record, exactly as after a torn write, and that cannot be told apart
// from damage (docs/durability.md).
func checkIntact(dir string) error {
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return fmt.Errorf("persistence: listing the tables of %q: %w", dir, err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	path := filepath.Join(dir, badger.ManifestFilename)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if len(tables)+len(vlogs)+len(mems) == 0 {
			return nil // a new store
		}
		return &DamagedError{Dir: dir, File: path, Problem: fmt.Sprintf(
			"MANIFEST is missing, yet the directory holds %d table (.sst), %d value-log (.vlog) and %d write-ahead-log (.mem) files",
			len(tables), len(vlogs), len(mems))}
	case err != nil:
		return &DamagedError{Dir: dir, File: path, Problem: "MANIFEST cannot be read", Err: err}
	}
	f, err := os.Open(path)
	if err != nil {
		return &DamagedError{Dir: dir, File: path, Problem: "MANIFEST cannot be read", Err: err}
	}
	defer f.Close()
	m, truncAt, err := replayManifest(f, dir)
	if err != nil {
		return &DamagedError{Dir: dir, File: path, Problem: "MANIFEST is unreadable", Err: err}
	}
	for id := range m.Tables {
		name := filepath.Join(dir, table.IDToFilename(id))
		if ti, err := os.Stat(name); err != nil || ti.Size() == 0 {
			return &DamagedError{Dir: dir, File: name, Problem: fmt.Sprintf("table %s, listed in MANIFEST, is missing or empty", filepath.Base(name))}
		}
	}
	if err := checkKeyRegistry(dir); err != nil {
		return err
	}
	// Only the tables the MANIFEST lists hold data. One it does not list is
	// a flush or compaction a crash cut short (it may be empty): Badger
	// deletes it on open, and it is no damage.
	for id := range m.Tables {
		t := filepath.Join(dir, table.IDToFilename(id))
		if err := verifyTable(t); err != nil {
			return &DamagedError{Dir: dir, File: t, Problem: fmt.Sprintf("table %s fails its checks", filepath.Base(t)), Err: err}
		}
	}
	if truncAt < fi.Size() {
		var orphans []string
		for _, t := range tables {
			id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(t), ".sst"), 10, 64)
			if _, listed := m.Tables[id]; err == nil && !listed {
				orphans = append(orphans, filepath.Base(t))
			}
		}
		if len(orphans) > 0 {
			return &DamagedError{Dir: dir, File: path, Problem: fmt.Sprintf(
				"MANIFEST ends in a bad record at byte %d of %d, and the tables %s are not listed in what can be read",
				truncAt, fi.Size(), strings.Join(orphans, ", "))}
		}
	}
	return checkUnlisted(dir, path, tables, m)
}

// checkKeyRegistry checks the KEYREGISTRY of an unencrypted store (rtfshost
// never enables Badger's encryption): a 16-byte IV and Badger's sanity text,
// in clear. Badger's open fails on a damaged one only after it has started
// goroutines that it then leaks; a missing one it recreates, losing
// nothing.
func checkKeyRegistry(dir string) error {
	path := filepath.Join(dir, badger.KeyRegistryFileName)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return &DamagedError{Dir: dir, File: path, Problem: "KEYREGISTRY cannot be read", Err: err}
	}
	const ivLen, sanity = 16, "Hello Badger"
	if len(data) < ivLen+len(sanity) || string(data[ivLen:ivLen+len(sanity)]) != sanity {
		return &DamagedError{Dir: dir, File: path, Problem: "KEYREGISTRY is cut short or altered"}
	}
	return nil
}

// verifyTable opens the table file path read-only and verifies its
// checksums. Badger would open it in a goroutine of its own, where a
// damaged table's panic cannot be recovered (it kills the process), and it
// skips a table whose checksum does not match (the data silently vanishes).
// Cost: one read of the table.
func verifyTable(path string) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer mf.Close(-1)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading it panicked: %v", r)
		}
	}()
	t, err := table.OpenTable(mf, table.Options{ReadOnly: true, ChkMode: options.OnTableAndBlockRead, Compression: options.None})
	if err != nil {
		return err
	}
	return t.VerifyChecksum()
}

// replayManifest reads a MANIFEST as Badger does, turning a panic into an
// error.
func replayManifest(f *os.File, dir string) (m badger.Manifest, truncAt int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading it panicked: %v", r)
		}
	}()
	return badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir))
}

// recoverDamage turns a panic of Badger on a read or write path (it asserts
// on some corrupt tables) into a *DamagedError in *err. Use it deferred.
func (s *BadgerStore) recoverDamage(op string, err *error) {
	if r := recover(); r != nil {
		*err = &DamagedError{Dir: s.dir, Problem: op + " failed on a damaged file", Err: fmt.Errorf("badger panicked: %v", r)}
	}
}

// damaged marks Badger's checksum and format errors as damage.
func (s *BadgerStore) damaged(op string, err error) error {
	var ce *CorruptRecordError
	if err == nil || errors.As(err, &ce) {
		return err // nil, or a record the caller decoded: it names its key
	}
	msg := err.Error()
	for _, sign := range []string{"checksum", "Checksum", "corrupt", "CRC", "crc", "invalid value pointer", "Invalid read"} {
		if strings.Contains(msg, sign) {
			return &DamagedError{Dir: s.dir, Problem: op + " failed on a damaged file", Err: err}
		}
	}
	return err
}
