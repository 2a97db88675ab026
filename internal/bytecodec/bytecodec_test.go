package bytecodec

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// sample writes one field of each kind.
func sample() []byte {
	e := Encoder{}
	e.Uint(300)
	e.Int(-5)
	e.Bytes([]byte("raw"))
	e.Str("text")
	e.Bool(true)
	e.Float(-1.5)
	e.Uint(2) // a count of two elements
	e.Int(7)
	e.Int(8)
	e.B = append(e.B, 0xAB)                   // a byte
	e.B = append(e.B, 1, 0, 0, 0)             // a uint32
	e.B = append(e.B, 2, 0, 0, 0, 0, 0, 0, 0) // a uint64
	return AppendStr(e.B, "tail")
}

// read reads sample's fields back.
func read(d *Decoder) []any {
	out := []any{d.Uint("u"), d.Int("i"), string(d.Bytes("b")), d.Str("s"), d.Bool("bool"), d.Float("f")}
	n := d.Count("count")
	for range n {
		out = append(out, d.Int("element"))
	}
	return append(out, d.Byte("byte"), d.Uint32("u32"), d.Uint64("u64"), d.Str("tail"))
}

// Every field reads back as written, in order, and the input ends where
// the last field does.
func TestRoundTrip(t *testing.T) {
	d := NewDecoder(sample())
	got := read(d)
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	want := []any{uint64(300), int64(-5), "raw", "text", true, -1.5, int64(7), int64(8), byte(0xAB), uint32(1), uint64(2), "tail"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d = %v (%T), want %v (%T)", i, got[i], got[i], want[i], want[i])
		}
	}
	if d.More() {
		t.Error("More after the last field")
	}
}

// Cut anywhere, the input is an error naming a field and the byte where it
// went wrong (truncated), never a panic or a silent zero.
func TestTruncatedInputNamesTheField(t *testing.T) {
	b := sample()
	for n := range len(b) {
		d := NewDecoder(b[:n])
		read(d)
		err := d.End()
		if err == nil {
			t.Fatalf("cut to %d bytes: no error", n)
		}
		if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "field ") || !strings.Contains(err.Error(), "at byte ") {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
}

// The first failure sticks: later reads return zero values and do not
// move, and the error is the first one's.
func TestFirstFailureSticks(t *testing.T) {
	d := NewDecoder([]byte{2, 1})
	if v := d.Bool("flag"); v || d.Err() == nil || !strings.Contains(d.Err().Error(), "field flag at byte 0: bad boolean") {
		t.Fatalf("Bool of 2 = %v, err %v", v, d.Err())
	}
	if d.Uint("next") != 0 || d.Str("s") != "" || d.Offset() != 0 || !strings.Contains(d.Err().Error(), "flag") {
		t.Fatalf("a read after the failure moved or changed the error: offset %d, %v", d.Offset(), d.Err())
	}
}

// A count or a length larger than the input fails at once, without
// allocating what it says; bytes left over are an error.
func TestCountsAndTrailingBytes(t *testing.T) {
	e := Encoder{}
	e.Uint(math.MaxUint64)
	if d := NewDecoder(e.B); d.Count("entries") != 0 || !errors.Is(d.Err(), ErrTruncated) || !strings.Contains(d.Err().Error(), "entries") {
		t.Fatalf("huge count: %v", d.Err())
	}
	if d := NewDecoder(e.B); d.Bytes("blob") != nil || !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("huge length: %v", d.Err())
	}
	if d := NewDecoder([]byte{1, 2, 3}); d.Byte("b") != 1 || d.End() == nil || !strings.Contains(d.End().Error(), "2 trailing bytes") {
		t.Fatalf("trailing bytes: %v", d.End())
	}
	if d := NewDecoder([]byte{1}); d.Next("n", -1) != nil || d.Err() == nil {
		t.Fatal("a negative length read something")
	}
}

// Byte strings share the input but are capped: appending to one does not
// overwrite the next field.
func TestBytesAreCapped(t *testing.T) {
	e := Encoder{}
	e.Bytes([]byte("ab"))
	e.Str("cd")
	d := NewDecoder(e.B)
	b := d.Bytes("first")
	_ = append(b, 'X')
	if s := d.Str("second"); s != "cd" {
		t.Fatalf("second field = %q after appending to the first", s)
	}
}
