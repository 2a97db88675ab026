package rtfs

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// sameJSONResult fails t unless got/gotErr is exactly what the legacy
// decoder gives for in: the same error text, or values that are Equal and
// print the same (which also checks kinds, 1 vs 1.0, and map order).
func sameJSONResult(t *testing.T, who string, in []byte, got Value, gotErr error) {
	t.Helper()
	want, wantErr := legacyFromJSON(in)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s(%q): error %v, legacy error %v", who, in, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !Equal(got, want) || got.String() != want.String() {
		t.Fatalf("%s(%q) = %v, legacy = %v", who, in, got, want)
	}
}

// randomJSON writes a random JSON value of at most depth levels, drawing
// keys and strings from small pools (so they repeat, as in a stream) and
// now and then from fresh ones, with escapes, non-ASCII and invalid bytes.
func randomJSON(r *rand.Rand, b *strings.Builder, depth int) {
	switch k := r.IntN(10); {
	case depth > 0 && k < 2:
		n := r.IntN(12)
		if r.IntN(8) == 0 {
			n = 20 + r.IntN(30) // beyond the array-map size
		}
		b.WriteByte('{')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRandomString(r, b, 6)
			b.WriteString(": ")
			randomJSON(r, b, depth-1)
		}
		b.WriteByte('}')
	case depth > 0 && k < 4:
		n := r.IntN(6)
		if r.IntN(6) == 0 {
			n = 30 + r.IntN(80) // beyond one vector tail
		}
		b.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			randomJSON(r, b, depth-1)
		}
		b.WriteByte(']')
	case k < 6:
		writeRandomString(r, b, 8)
	case k < 8:
		nums := []string{"0", "-1", "255", "256", "-300", "21.5", "1e3", "-0.0", "9223372036854775807",
			"9223372036854775808", "-9223372036854775809", "3.25E-2"}
		b.WriteString(nums[r.IntN(len(nums))])
	default:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	}
}

func writeRandomString(r *rand.Rand, b *strings.Builder, pool int) {
	parts := []string{"a", "city", "temperature_c", `\n`, `\"`, `\u00e9`, `\ud83d\ude00`, `\ud800`, "é", "\xff",
		"my.ns/k", strings.Repeat("long", 10), "", "x"}
	b.WriteByte('"')
	if r.IntN(4) == 0 {
		b.WriteString("fresh" + strconv.Itoa(r.IntN(1<<30)))
	} else {
		for i := r.IntN(pool) % 3; i >= 0; i-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
	}
	b.WriteByte('"')
}

func TestJSONDecoderMatchesLegacy(t *testing.T) {
	inputs := append([]string{}, jsonSeeds...)
	inputs = append(inputs, `null`, `-12`, `1e999`, `"\u12"`, `{"a" 1}`, `[1,]`, "{\n  \"a\": tru}",
		`{"a": 1, "a": 2}`, `{"k\n": "v\t", "k\n": "w"}`, strings.Repeat("[", 40)+strings.Repeat("]", 39),
		`{"pad": "`+strings.Repeat("p", jsonShareMax)+`", "b": ["x", "y"]}`)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		randomJSON(r, &b, 4)
		s := b.String()
		if i%5 == 0 && len(s) > 1 {
			s = s[:r.IntN(len(s))] // truncated: an error at some offset
		}
		inputs = append(inputs, s)
	}
	var dec JSONDecoder // one decoder for all: its tables carry over
	for _, in := range inputs {
		got, err := FromJSON([]byte(in))
		sameJSONResult(t, "FromJSON", []byte(in), got, err)
		got, err = dec.Decode([]byte(in))
		sameJSONResult(t, "Decode", []byte(in), got, err)
	}
}

func FuzzJSONDecoder(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var dec JSONDecoder
		for range 2 { // cold tables, then warm ones
			v, err := dec.Decode(data)
			sameJSONResult(t, "Decode", data, v, err)
		}
	})
}

func TestJSONDecoderInterns(t *testing.T) {
	var dec JSONDecoder
	in := []byte(`{"city": "Paris", "long": "` + strings.Repeat("z", maxInternString+1) + `"}`)
	a, err := dec.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dec.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	keyData := func(v Value, i int) *byte { return unsafe.StringData(string(v.(*Map).kv()[i].(Keyword))) }
	valData := func(v Value, i int) *byte { return unsafe.StringData(string(v.(*Map).kv()[i].(String))) }
	if keyData(a, 0) != keyData(b, 0) || valData(a, 1) != valData(b, 1) {
		t.Errorf("key :city or value \"Paris\" not shared between two decodes")
	}
	if valData(a, 3) == valData(b, 3) {
		t.Errorf("a string longer than %d bytes was interned", maxInternString)
	}
}

func TestJSONDecoderTablesBounded(t *testing.T) {
	var dec JSONDecoder
	for i := 0; i < 3*maxInternKeys; i++ {
		n := strconv.Itoa(i)
		in := `{"key` + n + `": "val` + n + `", "` + strings.Repeat("k", maxInternKey+1) + `": 1}`
		v, err := dec.Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := v.(*Map).GetKeyword("key" + n); got != String("val"+n) {
			t.Fatalf("decode %d: :key%s = %v", i, n, got)
		}
		if dec.keys.len() > maxInternKeys || dec.strs.len() > maxInternStrings {
			t.Fatalf("after %d distinct keys: %d keys, %d strings interned; bounds %d, %d",
				i+1, dec.keys.len(), dec.strs.len(), maxInternKeys, maxInternStrings)
		}
	}
	if _, ok := dec.keys.m[strings.Repeat("k", maxInternKey+1)]; ok {
		t.Errorf("a key longer than %d bytes was interned", maxInternKey)
	}
}

// TestJSONDecoderResultsIndependent checks that results alias neither the
// input nor the decoder's scratch space, which later calls overwrite.
func TestJSONDecoderResultsIndependent(t *testing.T) {
	var dec JSONDecoder
	in := []byte(`{"esc\n": "tab\there", "plain": ["é", "x\"y"]}`)
	first, err := dec.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	want := first.String()
	for i := range in {
		in[i] = '#'
	}
	for _, s := range []string{`{"zzz\n": "qqq\tqqqq", "plain": ["ü", "a\"b"]}`, `["\u0041\u0042\u0043\u0044\u0045\u0046"]`, `{"x": [1, `} {
		_, _ = dec.Decode([]byte(s))
	}
	if got := first.String(); got != want {
		t.Fatalf("first result changed after the input was overwritten and the decoder reused: %s, was %s", got, want)
	}
	m := first.(*Map)
	if v, _ := m.GetKeyword("esc\n"); v != String("tab\there") {
		t.Fatalf(`:"esc\n" = %v`, v)
	}
}

// TestJSONDecoderAfterError checks that an error mid-way (values of open
// objects on the scratch stack) leaves the decoder ready for the next call.
func TestJSONDecoderAfterError(t *testing.T) {
	var dec JSONDecoder
	if _, err := dec.Decode([]byte(`{"a": [1, 2, {"b": "c", "d": tru`)); err == nil ||
		!strings.Contains(err.Error(), "invalid literal, expected true") {
		t.Fatalf("err = %v", err)
	}
	if len(dec.stack) != 0 {
		t.Fatalf("stack holds %d values after an error", len(dec.stack))
	}
	for _, v := range dec.stack[:cap(dec.stack)] {
		if v != nil {
			t.Fatalf("stack scratch still references %v after an error", v)
		}
	}
	v, err := dec.Decode([]byte(`{"a": [1]}`))
	if err != nil || v.String() != "{:a [1]}" {
		t.Fatalf("after an error: %v, %v", v, err)
	}
}

func TestJSONDecoderDropsHugeScratch(t *testing.T) {
	var dec JSONDecoder
	big := "[" + strings.Repeat("1,", 2*maxKeptStack) + "1]"
	esc := `"` + strings.Repeat(`\n`, maxKeptBuf) + `"`
	for _, in := range []string{big, esc} {
		if _, err := dec.Decode([]byte(in)); err != nil {
			t.Fatal(err)
		}
	}
	if cap(dec.stack) > maxKeptStack || cap(dec.buf) > maxKeptBuf {
		t.Fatalf("scratch kept after huge inputs: stack cap %d, buf cap %d", cap(dec.stack), cap(dec.buf))
	}
	if !json.Valid([]byte(big)) {
		t.Fatal("test input is not JSON")
	}
}

// counterJSON is a counter.v1 chunk of the reference server.
var counterJSON = []byte(`{"n": 123456}`)

// BenchmarkJSONDecoderChunk is BenchmarkFromJSONChunk with one reused
// JSONDecoder, as a stream uses it.
func BenchmarkJSONDecoderChunk(b *testing.B) {
	benchDecoder(b, chunkJSON)
}

// BenchmarkJSONDecoderCounter decodes counter.v1 chunks.
func BenchmarkJSONDecoderCounter(b *testing.B) {
	benchDecoder(b, counterJSON)
}

func benchDecoder(b *testing.B, data []byte) {
	var dec JSONDecoder
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		v, err := dec.Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		sinkValue = v
	}
}

// DecodeReusing builds a top-level object in the spare map it is given
// when the object fits, and decodes everything else exactly as Decode does;
// with a warm decoder and a spare of the chunk's shape it allocates nothing.
func TestJSONDecoderReusesSpare(t *testing.T) {
	var dec JSONDecoder
	first, err := dec.Decode([]byte(`{"sensor":"a","temp":21.5,"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	spare := first.(*Map)
	for _, tc := range []struct {
		in    string
		reuse bool
	}{
		{`{"sensor":"b","temp":-3.25,"ok":false}`, true},
		{`{"sensor":"c","inner":{"x":[1,2]}}`, true}, // fewer entries; the inner map is the heap's
		{`{"a":1,"b":2,"c":3,"d":4}`, false},         // more entries than the spare holds
		{`[1,2,3]`, false},
		{`"text"`, false},
		{`{"a":1,"a":2}`, false}, // a repeated key: built as Decode builds it
	} {
		want, err := FromJSON([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.DecodeReusing([]byte(tc.in), spare)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if reused := got == Value(spare); reused != tc.reuse {
			t.Errorf("%s: reused the spare = %v, want %v", tc.in, reused, tc.reuse)
		}
		if !Equal(got, want) || Hash(got) != Hash(want) || got.String() != want.String() {
			t.Errorf("%s: decoded %v, want %v", tc.in, got, want)
		}
		if m, ok := got.(*Map); ok && m == spare {
			if inner, ok := m.GetKeyword("inner"); ok && inner == Value(spare) {
				t.Errorf("%s: a nested object was built in the spare", tc.in)
			}
		}
	}

	doc := []byte(`{"sensor":"a","ok":true,"n":7}`)
	m, _ := dec.Decode(doc)
	spare = m.(*Map)
	if n := testing.AllocsPerRun(100, func() {
		if v, err := dec.DecodeReusing(doc, spare); err != nil || v != Value(spare) {
			t.Fatalf("DecodeReusing = %v, %v", v, err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per decode into a spare, want 0", n)
	}
}
