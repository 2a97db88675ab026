package rtfs

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
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
	b, err := marshalValue(nil, v, testFnCodec{}, EncodeOptions{})
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
		"unsupported format version":              {9, vcNil},
		"names no value written before":           {2, vcVector, 1, vcRef, 0},
		"value tag 15 is not in format version 1": {1, vcRef, 0},
		"value tag 16 is not in format version 1": {1, vcRegex, 1, 'a'},
		"value tag 18 is not in format version 1": {1, vcSorted, vcNil, vcSet, 0},
		"unknown value tag 19":                    {2, 19},
		"unknown value tag 200":                   {1, 200},
		"trailing bytes":                          {1, vcNil, vcNil},
		"exceeds the remaining":                   {1, vcVector, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"unknown builtin":                         {1, vcBuiltin, 3, 'z', 'z', 'z'},
		"empty input":                             {},
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

// valueV1 is a value as MarshalValue wrote it before refs (format version
// 1): stores hold such bytes, and they must still decode.
const valueV1 = "010b05070573746174650b01070872656164696e67730a020500000000008035400500000000000008c007067368617265640a040a03040205000000000000044006236120737472696e67206f66206d6f7265207468616e207369787465656e2062797465730a03040205000000000000044006236120737472696e67206f66206d6f7265207468616e207369787465656e20627974657306236120737472696e67206f66206d6f7265207468616e207369787465656e20627974657306236120737472696e67206f66206d6f7265207468616e207369787465656e20627974657307037365740c02040207017807046c697374090508017301030204d7040702666e0d05636f756e74"

// sharedSample is the value of valueV1, its shared parts shared.
func sharedSample() Value {
	long := String("a string of more than sixteen bytes")
	inner := NewVector(Int(1), Float(2.5), long)
	return MapOf(Keyword("state"), MapOf(Keyword("readings"), NewVector(Float(21.5), Float(-3))),
		Keyword("shared"), NewVector(inner, inner, long, long),
		Keyword("set"), NewSet(Int(1), Keyword("x")),
		Keyword("list"), NewList(Symbol("s"), Nil, True, False, Int(-300)),
		Keyword("fn"), lookupBuiltin("count"))
}

func TestValueCodecReadsVersion1(t *testing.T) {
	b, err := hex.DecodeString(valueV1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalValue(b)
	if err != nil {
		t.Fatalf("version 1 bytes: %v", err)
	}
	if want := sharedSample(); !Equal(got, want) {
		t.Fatalf("version 1 decoded to %v, want %v", got, want)
	}
	// A value that shares nothing is written as version 1 wrote it, byte
	// for byte, so that a release of version 1 alone reads it.
	plain := MapOf(Keyword("state"), MapOf(Keyword("readings"), NewVector(Float(21.5), Float(-3))))
	want := []byte{1, vcMap, 1, vcKeyword, 5, 's', 't', 'a', 't', 'e', vcMap, 1, vcKeyword, 8, 'r', 'e', 'a', 'd', 'i', 'n', 'g', 's', vcVector, 2}
	if pb, err := MarshalValue(plain); err != nil || !bytes.Equal(pb[:len(want)], want) || !bytes.Contains(b, pb[3:]) {
		t.Fatalf("a value without sharing: %x, %v; want version 1's bytes", pb, err)
	}
	// Written again, it is version 2 and shorter: the vector and the text
	// met twice are refs the second time.
	b2, err := MarshalValue(got)
	if err != nil {
		t.Fatal(err)
	}
	if b2[0] != 2 || len(b2) >= len(b) {
		t.Fatalf("re-encoded: version %d, %d bytes (version 1: %d)", b2[0], len(b2), len(b))
	}
}

// sharedTower returns a vector of two references to a vector of two
// references ... n levels: 2^n elements in n vectors.
func sharedTower(n int) Value {
	var v Value = NewVector(Int(1), String("a shared text of some length"))
	for i := 0; i < n; i++ {
		v = NewVector(v, v)
	}
	return v
}

func TestValueCodecWritesSharedStructureOnce(t *testing.T) {
	// The store's codec for a stream's state and outputs: 2^60 elements in
	// 60 vectors take a few hundred bytes, and decode to the same sharing.
	v := sharedTower(60)
	b, err := MarshalValue(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 60*8+64 {
		t.Fatalf("a 60-level tower of shared pairs encodes to %d bytes", len(b))
	}
	got, err := UnmarshalValue(b)
	if err != nil {
		t.Fatal(err)
	}
	x := got.(*Vector)
	if x.Index(0) != x.Index(1) {
		t.Fatal("decoded pairs do not share their halves")
	}
	if !Equal(sharedTower(8), func() Value {
		w := got
		for i := 0; i < 52; i++ {
			w = w.(*Vector).Index(1)
		}
		return w
	}()) {
		t.Fatal("decoded tower differs")
	}
	// Closures that capture the same values are written once too.
	p := mustCompile(t, `(defn mk [x] (fn [] x))`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	mk, _ := g.Get("mk")
	out, err := NewThread(Limits{}).Call(context.Background(), g, mk, sharedTower(20))
	if err != nil {
		t.Fatal(err)
	}
	fns := NewVector(out.Value, out.Value, out.Value)
	b, err = p.MarshalValue(fns)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 20*8+64 {
		t.Fatalf("three references to one closure over a 20-level tower take %d bytes", len(b))
	}
	back, err := p.UnmarshalValue(b)
	if err != nil {
		t.Fatal(err)
	}
	if bv := back.(*Vector); bv.Index(0) != bv.Index(2) {
		t.Fatal("decoded closures are not one")
	}
}

func TestValueCodecBound(t *testing.T) {
	v := NewVector(String(strings.Repeat("x", 1000)), vectorOfLen(500))
	_, err := MarshalValueOpts(v, EncodeOptions{MaxBytes: 600})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitOutput || le.Max != 600 {
		t.Fatalf("MarshalValueOpts past its bound: %v", err)
	}
	if _, err := MarshalValueOpts(v, EncodeOptions{MaxBytes: 4000}); err != nil {
		t.Fatalf("within its bound: %v", err)
	}
}

func TestValueCodecVersion2Kinds(t *testing.T) {
	// Regexes, lazy sequences and sorted collections are version 2's tags,
	// with refs: each round-trips (its order, its sharing, its closures)
	// and the encoding says version 2, which a version 1 reader refuses.
	p := mustCompile(t, `
(def nat (iterate inc 0))
(def pat #"(\w+)@(\w+)\.(com|org|net)$")
(def state {:re pat :re2 pat :res [pat pat]
            :nat nat :nats [nat nat] :r (range) :c (cycle [1 2 3]) :lz (lazy-seq [1 2])
            :ss (sorted-set 3 1 2) :sm (sorted-map :b 2 :a 1)
            :by (sorted-map-by (fn [a b] (compare b a)) 1 :x 2 :y 3 :z)
            :gt (sorted-set-by > 1 3 2)})
(defn use [s]
  [(take 3 (:nat s)) (first (:lz s)) (re-find (:re s) "me@host.org")
   (assoc (:by s) 5 :w) (conj (:gt s) 0 9) (conj (:ss s) 0)])`)
	out := mustRun(t, NewThread(Limits{}), p)
	state, _ := out.Globals.Get("state")
	b, err := p.MarshalValue(state)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 2 {
		t.Fatalf("version %d, want 2", b[0])
	}
	if _, err := p.UnmarshalValue(append([]byte{1}, b[1:]...)); err == nil || !strings.Contains(err.Error(), "not in format version 1") {
		t.Fatalf("as version 1: %v", err)
	}
	v, err := p.UnmarshalValue(b)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(*Map)
	get := func(k string) Value { x, _ := m.GetKeyword(k); return x }
	if re := get("re").(*Regex); re != get("re2") || re != get("res").(*Vector).Index(1) || re.Pattern() != `(\w+)@(\w+)\.(com|org|net)$` {
		t.Errorf("regex: %v, shared %v", re, re == get("re2"))
	}
	if nats := get("nats").(*Vector); get("nat") != nats.Index(0) || nats.Index(0) != nats.Index(1) {
		t.Error("a lazy sequence met twice decodes to two")
	}
	for k, want := range map[string]string{
		"ss": "#{1 2 3}", "sm": "{:a 1 :b 2}", "by": "{3 :z 2 :y 1 :x}", "gt": "#{3 2 1}",
		"r": "(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 ...)", "c": "(1 2 3 1 2 3 1 2 3 1 2 3 1 2 3 1 ...)",
	} {
		sorted := k != "r" && k != "c"
		if got := get(k).String(); got != want || sorted != (sortedOf(get(k)) != nil) {
			t.Errorf("%s decoded to %s, want %s (sorted: %v)", k, got, want, sortedOf(get(k)) != nil)
		}
	}
	// The decoded values work: take from the lazy ones, search with the
	// regex, add to the sorted ones (the RTFS comparator's included).
	use, _ := out.Globals.Get("use")
	r, err := NewThread(Limits{}).Call(context.Background(), out.Globals, use, v)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Value.String(), `[(0 1 2) 1 ["me@host.org" "me" "host" "org"] {5 :w 3 :z 2 :y 1 :x} #{9 3 2 1 0} #{0 1 2 3}]`; got != want {
		t.Errorf("use of the decoded state: %s, want %s", got, want)
	}
	// A value with none of version 2's tags is still version 1.
	if b, err := MarshalValue(NewVector(Int(1), String("x"))); err != nil || b[0] != 1 {
		t.Errorf("plain value: %x, %v", b, err)
	}
}
