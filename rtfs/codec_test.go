package rtfs

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// sampleValues covers every encodable kind, nested.
func sampleValues() []Value {
	big := MapOf()
	for i := 0; i < 40; i++ {
		big = big.Assoc(Keyword(fmt.Sprintf("k%d", i)), NewVector(Int(i), Float(float64(i)/3)))
	}
	return []Value{
		Nil, True, False, Int(0), Int(-1), Int(math.MaxInt64), Int(math.MinInt64),
		Float(1.5), Float(math.Inf(-1)), Float(math.Copysign(0, -1)),
		String(""), String("héllo\x00"), Keyword("my.ns/k"), Symbol("process"),
		NewList(), NewList(Int(1), NewList(String("x"))), listView(vectorOfLen(100), 37),
		NewVector(), vectorOfLen(1057),
		MapOf(), MapOf(Keyword("state"), MapOf(Keyword("readings"), NewVector(Float(21.5))), Int(3), Nil),
		big, NewSet(), NewSet(Int(1), String("1"), Keyword("1")),
		lookupBuiltin("count"),
	}
}

func TestValueCodecRoundTrip(t *testing.T) {
	for _, v := range sampleValues() {
		b, err := MarshalValue(v)
		if err != nil {
			t.Fatalf("MarshalValue(%v): %v", v, err)
		}
		got, err := UnmarshalValue(b)
		if err != nil {
			t.Fatalf("UnmarshalValue(MarshalValue(%v)): %v", v, err)
		}
		if !Equal(got, v) || got.Kind() != v.Kind() {
			t.Fatalf("round trip of %v gave %v (%s)", v, got, got.Kind())
		}
		if f, ok := v.(Float); ok && math.Signbit(float64(f)) != math.Signbit(float64(got.(Float))) {
			t.Fatalf("round trip lost the sign of %v", v)
		}
	}
	// NaN survives bit for bit.
	b, _ := MarshalValue(Float(math.NaN()))
	if got, err := UnmarshalValue(b); err != nil || !math.IsNaN(float64(got.(Float))) {
		t.Fatalf("NaN round trip = %v, %v", got, err)
	}
}

func TestValueCodecIsCompact(t *testing.T) {
	b, err := MarshalValue(MapOf(Keyword("n"), Int(5), Keyword("ok"), True))
	if err != nil {
		t.Fatal(err)
	}
	// version, map tag, count, (kw tag, len, "n", int tag, 1 byte), (kw, len, "ok", true)
	if len(b) != 1+1+1+(1+1+1+1+1)+(1+1+2+1) {
		t.Fatalf("encoding is %d bytes: %x", len(b), b)
	}
}

// testFnCodec stands in for the compiler's closure codec: it encodes a
// collider by id and a captured value.
type testFnCodec struct{}

func (testFnCodec) appendFn(e *valueEncoder, fn Value) error {
	c, ok := fn.(*collider)
	if !ok {
		return fmt.Errorf("not a test fn: %v", fn)
	}
	e.appendUvarint(uint64(c.id))
	return e.appendValue(NewVector(Int(c.id)))
}

func (testFnCodec) readFn(d *valueDecoder) (Value, error) {
	id, err := d.readUvarint()
	if err != nil {
		return nil, err
	}
	captured, err := d.readValue()
	if err != nil {
		return nil, err
	}
	if !Equal(captured, NewVector(Int(int64(id)))) {
		return nil, d.errorf("bad captured value %v", captured)
	}
	return &collider{id: int(id)}, nil
}

func TestValueCodecFnHook(t *testing.T) {
	fn := &collider{id: 7}
	v := MapOf(Keyword("processor"), fn)
	if _, err := MarshalValue(v); err == nil || !strings.Contains(err.Error(), "functions need the program's codec") {
		t.Fatalf("MarshalValue of a closure: err = %v", err)
	}
	b, err := marshalValue(nil, v, testFnCodec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalValue(b); err == nil || !strings.Contains(err.Error(), "needs the program's codec") {
		t.Fatalf("UnmarshalValue of an encoded fn: err = %v", err)
	}
	got, err := unmarshalValue(b, testFnCodec{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := got.(*Map).GetKeyword("processor")
	if c, ok := p.(*collider); !ok || c.id != 7 {
		t.Fatalf("decoded fn = %v", p)
	}
	custom := NewBuiltin("host-fn", func(*Thread, []Value) (Value, error) { return Nil, nil })
	if _, err := MarshalValue(custom); err == nil || !strings.Contains(err.Error(), "only core builtins") {
		t.Fatalf("MarshalValue of a non-core builtin: err = %v", err)
	}
}

func TestValueCodecCorruptInput(t *testing.T) {
	good, _ := MarshalValue(MapOf(Keyword("a"), NewVector(Int(300), String("xyz"), Float(2.5))))
	for i := 0; i < len(good); i++ {
		if _, err := UnmarshalValue(good[:i]); err == nil {
			t.Errorf("truncated to %d bytes: no error", i)
		}
	}
	cases := map[string][]byte{
		"unsupported format version": {9, vcNil},
		"unknown value tag 200":      {1, 200},
		"trailing bytes":             {1, vcNil, vcNil},
		"exceeds the remaining":      {1, vcVector, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"unknown builtin":            {1, vcBuiltin, 3, 'z', 'z', 'z'},
		"empty input":                {},
	}
	for want, b := range cases {
		if _, err := UnmarshalValue(b); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalValue(%x) error = %v, want %q", b, err, want)
		}
	}
}

func TestValueCodecDepthBound(t *testing.T) {
	deep := append([]byte{1}, bytes.Repeat([]byte{vcVector, 1}, valueCodecMaxDepth+5)...)
	deep = append(deep, vcNil)
	if _, err := UnmarshalValue(deep); err == nil || !strings.Contains(err.Error(), "nested deeper than") {
		t.Fatalf("deep input: err = %v", err)
	}
	var v Value = Nil
	for i := 0; i < valueCodecMaxDepth+5; i++ {
		v = NewVector(v)
	}
	if _, err := MarshalValue(v); err == nil || !strings.Contains(err.Error(), "nested deeper than") {
		t.Fatalf("deep value: err = %v", err)
	}
	ok := append([]byte{1}, bytes.Repeat([]byte{vcList, 1}, 500)...)
	ok = append(ok, vcNil)
	if _, err := UnmarshalValue(ok); err != nil {
		t.Fatalf("500 levels: %v", err)
	}
}

func FuzzUnmarshalValue(f *testing.F) {
	for _, v := range sampleValues() {
		b, err := MarshalValue(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, vcMap, 2, vcInt, 2, vcNil, vcInt, 2, vcTrue}) // duplicate keys
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := UnmarshalValue(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a canonical form that is stable.
		b2, err := MarshalValue(v)
		if err != nil {
			t.Fatalf("decoded %v but cannot re-encode it: %v", v, err)
		}
		v2, err := UnmarshalValue(b2)
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		b3, err := MarshalValue(v2)
		if err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("encoding not stable: %x vs %x (%v)", b2, b3, err)
		}
		if v.Kind() != v2.Kind() || !equalNaN(v, v2) {
			t.Fatalf("round trip changed %v into %v", v, v2)
		}
	})
}

// equalNaN is Equal, except that values containing NaN count as equal
// when they encode to the same bytes (NaN differs from itself under Equal).
func equalNaN(a, b Value) bool {
	if Equal(a, b) {
		return true
	}
	ea, err1 := MarshalValue(a)
	eb, err2 := MarshalValue(b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}
