package host

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Resumed records written by builds before the value field (version 1,
// testdata/records/resumed-v1.txt) still decode: printed value or error,
// and no Result.
func TestResumedRecordVersion1Decodes(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "records", "resumed-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []ResumedProgram
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, h, ok := strings.Cut(line, " ")
		data, err := hex.DecodeString(h)
		if !ok || err != nil {
			t.Fatalf("bad fixture line %q: %v", line, err)
		}
		r, err := decodeResumed([]byte(key), data)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got = append(got, r)
	}
	if len(got) != 2 {
		t.Fatalf("%d records in the fixture, want 2", len(got))
	}
	v, e := got[0], got[1]
	if v.RunID != "00aa11bb22cc33dd" || v.Program != "sums.rtfs" || v.StreamID != "sums" || v.Value != "{:total 6, :doubled 12}" ||
		v.Err != "" || v.Result != nil || !v.FinishedAt.Equal(time.UnixMilli(1796000000000)) {
		t.Fatalf("value record = %+v", v)
	}
	if e.Err != "stream sums failed: boom" || e.Value != "" || e.Result != nil || !e.FinishedAt.Equal(time.UnixMilli(1796000000001)) {
		t.Fatalf("error record = %+v", e)
	}
}

// A resumed record of this build keeps the program's value as an rtfs
// value; a damaged value is a CorruptRecordError naming the key.
func TestResumedRecordKeepsResult(t *testing.T) {
	want := rtfs.MapOf(rtfs.Keyword("total"), rtfs.Int(6), rtfs.Keyword("seen"), rtfs.NewVector(rtfs.String("a"), rtfs.Float(1.5)))
	enc, err := rtfs.MarshalValue(want)
	if err != nil {
		t.Fatal(err)
	}
	in := ResumedProgram{Program: "p.rtfs", StreamID: "s", Value: want.String(), Result: want, FinishedAt: time.UnixMilli(42)}
	key := []byte(resumedPrefix + "run1")
	r, err := decodeResumed(key, encodeResumed(in, enc))
	if err != nil {
		t.Fatal(err)
	}
	if r.RunID != "run1" || r.Value != in.Value || !rtfs.Equal(r.Result, want) || !r.FinishedAt.Equal(in.FinishedAt) {
		t.Fatalf("decoded %+v, want %+v", r, in)
	}
	_, err = decodeResumed(key, encodeResumed(in, []byte{1, 99}))
	var ce *persistence.CorruptRecordError
	if !errors.As(err, &ce) || string(ce.Key) != string(key) {
		t.Fatalf("a damaged value decodes with %v, want a CorruptRecordError naming %s", err, key)
	}
}
