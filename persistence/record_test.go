package persistence_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

const kindProgress persistence.RecordKind = 3

func TestRecordRoundTrip(t *testing.T) {
	for _, version := range []uint64{0, 1, 127, 128, 1 << 40} {
		for _, payload := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("state"), 100)} {
			rec := persistence.EncodeRecord(kindProgress, version, payload)
			v, p, err := persistence.DecodeRecord([]byte("k"), rec, kindProgress, 1<<40)
			if err != nil || v != version || !bytes.Equal(p, payload) {
				t.Fatalf("version %d, %d-byte payload: decoded version %d, payload %q, err %v", version, len(payload), v, p, err)
			}
		}
	}
}

func TestAppendRecordKeepsPrefix(t *testing.T) {
	dst := []byte("prefix")
	rec := persistence.AppendRecord(dst, kindProgress, 2, []byte("body"))
	if !bytes.HasPrefix(rec, []byte("prefix")) {
		t.Fatalf("AppendRecord lost the prefix: %q", rec)
	}
	if !bytes.Equal(rec[len("prefix"):], persistence.EncodeRecord(kindProgress, 2, []byte("body"))) {
		t.Fatal("AppendRecord and EncodeRecord disagree")
	}
	if got := len(persistence.EncodeRecord(kindProgress, 1, make([]byte, 200))); got != 207 {
		t.Fatalf("a 200-byte payload at version 1 takes %d bytes, want 207 (7 bytes of framing)", got)
	}
}

func TestRecordUnknownVersion(t *testing.T) {
	rec := persistence.EncodeRecord(kindProgress, 3, []byte("future"))
	_, _, err := persistence.DecodeRecord([]byte("stream/s1/progress"), rec, kindProgress, 2)
	var uv *persistence.UnknownVersionError
	if !errors.As(err, &uv) {
		t.Fatalf("err = %v, want *UnknownVersionError", err)
	}
	if string(uv.Key) != "stream/s1/progress" || uv.Version != 3 || uv.MaxVersion != 2 {
		t.Fatalf("error fields = %+v", uv)
	}
	for _, want := range []string{`"stream/s1/progress"`, "version 3", "up to 2", "newer rtfshost"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestRecordCorrupt(t *testing.T) {
	good := persistence.EncodeRecord(kindProgress, 1, []byte("payload"))
	flipped := bytes.Clone(good)
	flipped[5] ^= 0x01
	badMagic := bytes.Clone(good)
	badMagic[0] = 'x'
	// A record whose version varint never ends, with a valid checksum.
	badVarint := fixChecksum([]byte{0xB7, byte(kindProgress), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	tests := []struct {
		name, reason string
		data         []byte
		kind         persistence.RecordKind
	}{
		{"empty", "shorter than", nil, kindProgress},
		{"short", "shorter than", good[:5], kindProgress},
		{"magic", "record marker", badMagic, kindProgress},
		{"bitflip", "checksum mismatch", flipped, kindProgress},
		{"truncated", "checksum mismatch", good[:len(good)-1], kindProgress},
		{"kind", "kind is 3, want 4", good, kindProgress + 1},
		{"varint", "malformed format version", badVarint, kindProgress},
		{"overlong-varint", "malformed format version", fixChecksum([]byte{0xB7, byte(kindProgress), 0x81, 0x00, 'p', 0, 0, 0, 0}), kindProgress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := []byte("stream/" + tc.name)
			_, _, err := persistence.DecodeRecord(key, tc.data, tc.kind, 5)
			var ce *persistence.CorruptRecordError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *CorruptRecordError", err)
			}
			if !bytes.Equal(ce.Key, key) || !strings.Contains(err.Error(), string(key)) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q does not name key %s and reason %q", err, key, tc.reason)
			}
		})
	}
}

func TestCorruptRecordErrorWraps(t *testing.T) {
	cause := errors.New("bad value encoding")
	err := error(&persistence.CorruptRecordError{Key: []byte("k"), Reason: "payload", Err: cause})
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "bad value encoding") {
		t.Fatalf("CorruptRecordError does not carry its cause: %v", err)
	}
}

// fixChecksum replaces the trailing CRC-32C of a hand-built record.
func fixChecksum(rec []byte) []byte {
	body := rec[:len(rec)-4]
	sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
	return binary.LittleEndian.AppendUint32(body, sum)
}

// FuzzDecodeRecord checks that DecodeRecord never panics, that it accepts
// exactly what AppendRecord produces, and that every refusal is typed.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{}, uint8(1), uint64(1))
	f.Add(persistence.EncodeRecord(1, 1, []byte("payload")), uint8(1), uint64(1))
	f.Add(persistence.EncodeRecord(2, 300, nil), uint8(2), uint64(299))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, maxVersion uint64) {
		key := []byte("fuzz")
		version, payload, err := persistence.DecodeRecord(key, data, persistence.RecordKind(kind), maxVersion)
		if err != nil {
			var ce *persistence.CorruptRecordError
			var uv *persistence.UnknownVersionError
			if !errors.As(err, &ce) && !errors.As(err, &uv) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again := persistence.EncodeRecord(persistence.RecordKind(kind), version, payload)
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, which re-encodes as %x", data, again)
		}
	})
}
