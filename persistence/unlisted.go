package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
	"google.golang.org/protobuf/proto"
)

// Every open of a Badger database, read-only included, deletes the tables
// (.sst) of its directory that its MANIFEST does not list. After a crash
// such a table is garbage: a flush writes its table before recording it in
// the MANIFEST (its entries are still in the write-ahead log, .mem), a
// compaction writes its tables before recording them (their entries are
// still in the tables it compacts), and a compaction deletes its inputs
// after recording their deletion. But a MANIFEST older than the tables (one
// restored from a backup, or copied over) does not list tables that hold
// the only copy of records: Badger would delete them, and the streams in
// them would be gone for good. checkUnlisted tells the two apart before
// anything opens the directory.

// checkUnlisted returns a *DamagedError when a table of dir that the
// MANIFEST m (read from the file manifest) does not list holds records
// found nowhere else: not recorded as deleted in the MANIFEST, and with
// entries that neither the listed tables nor the write-ahead logs hold.
// Cost: nothing without unlisted tables; else a read of each unlisted
// table, of the write-ahead logs, and a lookup per entry in the listed
// tables.
func checkUnlisted(dir, manifest string, tables []string, m badger.Manifest) error {
	var unlisted []string
	for _, t := range tables {
		id, ok := table.ParseFileID(filepath.Base(t))
		if _, listed := m.Tables[id]; ok && !listed {
			unlisted = append(unlisted, t)
		}
	}
	if len(unlisted) == 0 {
		return nil
	}
	deleted, err := manifestDeletions(manifest)
	if err != nil {
		return &DamagedError{Dir: dir, File: manifest, Problem: "MANIFEST is unreadable", Err: err}
	}
	var w *walKeys
	var listed *tableSet
	defer func() {
		if listed != nil {
			listed.close()
		}
	}()
	var lost []string
	for _, t := range unlisted {
		id, _ := table.ParseFileID(filepath.Base(t))
		if deleted[id] {
			continue // a compaction's input that a crash kept from being deleted
		}
		if w == nil {
			if w, err = readWALKeys(dir); err != nil {
				return &DamagedError{Dir: dir, Problem: "a write-ahead log (.mem) cannot be read", Err: err}
			}
			if listed, err = openTables(dir, m); err != nil {
				return &DamagedError{Dir: dir, Problem: "a table listed in MANIFEST cannot be read", Err: err}
			}
		}
		n, err := uncovered(t, w, listed)
		if err != nil {
			// Cut short while it was written (empty, or partly zeros): a
			// table is complete before anything records it, so it held
			// nothing of its own.
			continue
		}
		if n > 0 {
			lost = append(lost, fmt.Sprintf("%s (%d records)", filepath.Base(t), n))
		}
	}
	if len(lost) > 0 {
		return &DamagedError{Dir: dir, File: manifest, Problem: fmt.Sprintf(
			"the tables %s hold records that MANIFEST does not list and that are nowhere else: MANIFEST is older than the tables (restored or copied over?)",
			strings.Join(lost, ", "))}
	}
	return nil
}

// manifestDeletions returns the ids of the tables whose deletion the
// MANIFEST file path records (and that it does not create again later).
func manifestDeletions(path string) (deleted map[uint64]bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading it panicked: %v", r)
		}
	}()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes, shorter than its header", len(data))
	}
	deleted = map[uint64]bool{}
	for rest := data[8:]; len(rest) >= 8; {
		n := binary.BigEndian.Uint32(rest[0:4])
		sum := binary.BigEndian.Uint32(rest[4:8])
		if uint64(n) > uint64(len(rest)-8) {
			break // a torn last record, as Badger reads it
		}
		buf := rest[8 : 8+n]
		if crc32.Checksum(buf, y.CastagnoliCrcTable) != sum {
			break
		}
		var cs pb.ManifestChangeSet
		if err := proto.Unmarshal(buf, &cs); err != nil {
			return nil, err
		}
		for _, c := range cs.Changes {
			deleted[c.Id] = c.Op == pb.ManifestChange_DELETE
		}
		rest = rest[8+n:]
	}
	return deleted, nil
}

// walKeys holds the keys (with their versions) of every entry of the
// write-ahead logs of a directory.
type walKeys struct{ keys map[string]struct{} }

// walHeaderSize is the header of a Badger log file (key id and IV).
const walHeaderSize = 20

// readWALKeys reads the entries of every .mem file of dir up to the first
// one that is incomplete or fails its checksum, as Badger replays them.
func readWALKeys(dir string) (*walKeys, error) {
	w := &walKeys{keys: map[string]struct{}{}}
	mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return nil, err
	}
	for _, name := range mems {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if len(data) < walHeaderSize {
			continue
		}
		for rest := data[walHeaderSize:]; ; {
			key, n := walEntry(rest)
			if n == 0 {
				break
			}
			w.keys[string(key)] = struct{}{}
			rest = rest[n:]
		}
	}
	return w, nil
}

// walEntry decodes the log entry at the start of b: meta, user meta, key
// length, value length and expiry (uvarints), key, value, CRC-32C of all
// that. It returns the key and the entry's length, or 0 at the end of the
// valid entries.
func walEntry(b []byte) (key []byte, n int) {
	if len(b) < 2 {
		return nil, 0
	}
	i := 2
	var v [3]uint64
	for j := range v {
		x, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return nil, 0
		}
		v[j], i = x, i+k
	}
	klen, vlen := v[0], v[1]
	if klen == 0 || klen+vlen > uint64(len(b)-i) || uint64(len(b)-i)-klen-vlen < crc32.Size {
		return nil, 0
	}
	end := i + int(klen+vlen)
	if crc32.Checksum(b[:end], y.CastagnoliCrcTable) != binary.BigEndian.Uint32(b[end:]) {
		return nil, 0
	}
	return b[i : i+int(klen)], end + crc32.Size
}

// tableSet is the tables a MANIFEST lists, open for lookups.
type tableSet struct {
	files  []*z.MmapFile
	tables []*table.Table
}

func openTables(dir string, m badger.Manifest) (*tableSet, error) {
	s := &tableSet{}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		mf, t, err := openTableFile(filepath.Join(dir, table.IDToFilename(id)))
		if err != nil {
			s.close()
			return nil, err
		}
		s.files, s.tables = append(s.files, mf), append(s.tables, t)
	}
	return s, nil
}

// has reports whether one of the tables holds key (with its version).
func (s *tableSet) has(key []byte) bool {
	for _, t := range s.tables {
		if y.CompareKeys(key, t.Smallest()) < 0 || y.CompareKeys(key, t.Biggest()) > 0 {
			continue
		}
		it := t.NewIterator(0)
		it.Seek(key)
		found := it.Valid() && bytes.Equal(it.Key(), key)
		it.Close()
		if found {
			return true
		}
	}
	return false
}

func (s *tableSet) close() {
	for _, mf := range s.files {
		mf.Close(-1)
	}
	s.files, s.tables = nil, nil
}

// openTableFile opens a table file read-only. The caller closes the file
// (never the table: dropping a table's last reference deletes its file).
func openTableFile(path string) (mf *z.MmapFile, t *table.Table, err error) {
	mf, err = z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading it panicked: %v", r)
		}
		if err != nil {
			mf.Close(-1)
		}
	}()
	t, err = table.OpenTable(mf, table.Options{ReadOnly: true, ChkMode: options.OnTableAndBlockRead, Compression: options.None})
	return mf, t, err
}

// uncovered counts the entries of the table file path that neither the
// write-ahead logs nor the listed tables hold.
func uncovered(path string, w *walKeys, listed *tableSet) (n int, err error) {
	mf, t, err := openTableFile(path)
	if err != nil {
		return 0, err
	}
	defer mf.Close(-1)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading it panicked: %v", r)
		}
	}()
	it := t.NewIterator(0)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Key()
		if _, ok := w.keys[string(k)]; ok || listed.has(k) {
			continue
		}
		n++
	}
	return n, nil
}
