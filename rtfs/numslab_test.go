package rtfs

import (
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestNumSlabBoxes: numbers boxed from a numSlab behave exactly as
// ordinarily boxed ones, each has a cell of its own (none is reused), the
// backing arrays grow from 4 cells to at most 256 and never beyond the
// hint, and the values stay valid once only they reference the arrays.
func TestNumSlabBoxes(t *testing.T) {
	var want []Value
	for i := 0; i < 700; i++ {
		switch i % 4 {
		case 0:
			want = append(want, Int(-1-i))
		case 1:
			want = append(want, Int(256+i))
		case 2:
			want = append(want, Float(float64(i)+0.25))
		default:
			want = append(want, []Value{Int(math.MaxInt64), Int(math.MinInt64), Float(math.NaN()),
				Float(math.Copysign(0, -1)), Float(math.Inf(-1)), Int(255), Int(0)}[i%7])
		}
	}
	got, sizes := func() ([]Value, []int) {
		var s numSlab
		var sizes []int
		out := make([]Value, len(want))
		for i, w := range want {
			before := len(s.cells)
			switch x := w.(type) {
			case Int:
				out[i] = s.int(x, len(want)-i)
			case Float:
				out[i] = s.float(x, len(want)-i)
			}
			if len(s.cells) > before { // a new array: its size, then the hint
				sizes = append(sizes, len(s.cells)+1, len(want)-i)
			}
		}
		return out, sizes
	}()
	if len(sizes) != 2*8 {
		t.Fatalf("%d backing arrays, want 8", len(sizes)/2)
	}
	for k := 0; k < len(sizes); k += 2 {
		if want := min(4<<(k/2), 256, sizes[k+1]); sizes[k] != want {
			t.Errorf("backing array %d has %d cells, want %d (hint %d)", k/2, sizes[k], want, sizes[k+1])
		}
	}
	runtime.GC()
	runtime.GC()
	cells := map[unsafe.Pointer]int{}
	for i, v := range got {
		checkSameBox(t, i, v, want[i])
		if n, small := v.(Int); small && 0 <= n && n < 256 {
			continue
		}
		p := (*ifaceWords)(unsafe.Pointer(&got[i])).data
		if j, dup := cells[p]; dup {
			t.Fatalf("values %d and %d share a cell", j, i)
		}
		cells[p] = i
	}
}

// checkSameBox fails t unless v is indistinguishable from the ordinarily
// boxed w: dynamic type, bits, ==, Equal, Hash and printing.
func checkSameBox(t *testing.T, i int, v, w Value) {
	t.Helper()
	switch w := w.(type) {
	case Int:
		if x, ok := v.(Int); !ok || x != w || v != Value(w) {
			t.Fatalf("value %d = %#v, want Int %d", i, v, w)
		}
	case Float:
		x, ok := v.(Float)
		if !ok || math.Float64bits(float64(x)) != math.Float64bits(float64(w)) {
			t.Fatalf("value %d = %#v, want Float %v", i, v, w)
		}
		if !math.IsNaN(float64(w)) && (v != Value(w) || !Equal(v, w)) {
			t.Fatalf("value %d = %v is not == / Equal to %v", i, v, w)
		}
	}
	if Hash(v) != Hash(w) || v.String() != w.String() || v.Kind() != w.Kind() {
		t.Fatalf("value %d: hash, printing or kind differ from %v", i, w)
	}
}

// TestJSONDecoderNumbersSurviveReuse: the numbers of one result keep their
// values while the decoder decodes other documents full of numbers and the
// garbage collector runs: no later call writes a cell an earlier result
// uses.
func TestJSONDecoderNumbersSurviveReuse(t *testing.T) {
	doc := func(seed int) (string, []string) {
		var b strings.Builder
		var lits []string
		b.WriteByte('[')
		for i := 0; i < 600; i++ {
			lit := strconv.Itoa(1000*seed + i)
			if i%2 == 1 {
				lit += ".5"
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(lit)
			lits = append(lits, lit)
		}
		b.WriteByte(']')
		return b.String(), lits
	}
	var dec JSONDecoder
	in, lits := doc(7)
	first, err := dec.Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	for seed := 0; seed < 20; seed++ {
		other, _ := doc(100 + seed)
		if _, err := dec.Decode([]byte(other)); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
	}
	v := first.(*Vector)
	for i, lit := range lits {
		if got := v.Index(i).String(); got != lit {
			t.Fatalf("element %d = %s, want %s", i, got, lit)
		}
	}
}

// TestJSONDecoderNumbersShareOneAllocation: the boxed numbers of a small
// document cost one allocation together, not one each (FromJSON); a
// JSONDecoder carries the unused cells of an array over to its next
// documents, so a stream of small documents costs less than one per
// document.
func TestJSONDecoderNumbersShareOneAllocation(t *testing.T) {
	var dec JSONDecoder
	allocs := func(decode func([]byte) (Value, error), in string) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := decode([]byte(in)); err != nil {
				t.Fatal(err)
			}
		})
	}
	const noNumbers, threeNumbers = `{"a": true, "b": null, "c": 7}`, `{"a": 21.5, "b": 12345, "c": -7}`
	if none, three := allocs(FromJSON, noNumbers), allocs(FromJSON, threeNumbers); three != none+1 {
		t.Fatalf("FromJSON: a document with 3 boxed numbers costs %v allocations, one without costs %v: want one more", three, none)
	}
	if none, three := allocs(dec.Decode, noNumbers), allocs(dec.Decode, threeNumbers); three != none {
		t.Fatalf("JSONDecoder: a document with 3 boxed numbers costs %v allocations, one without costs %v: want as many (the arrays carry over)", three, none)
	}
}

// TestArrayMapExactSize: an array-map of n entries holds exactly 2n slots,
// whichever way it was built (MapOf, Assoc, Dissoc, JSON).
func TestArrayMapExactSize(t *testing.T) {
	var dec JSONDecoder
	grown := MapOf()
	for n := 1; n <= arrayMapMax; n++ {
		kvs := make([]Value, 0, 2*n)
		var js strings.Builder
		js.WriteByte('{')
		for i := 0; i < n; i++ {
			kvs = append(kvs, Keyword("k"+strconv.Itoa(i)), Int(i))
			if i > 0 {
				js.WriteByte(',')
			}
			js.WriteString(`"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
		}
		js.WriteByte('}')
		grown = grown.Assoc(Keyword("k"+strconv.Itoa(n-1)), Int(n-1))
		fromJSON, err := dec.Decode([]byte(js.String()))
		if err != nil {
			t.Fatal(err)
		}
		shrunk := MapOf(append(kvs, Keyword("extra"), Nil)...)
		if n < arrayMapMax {
			shrunk = shrunk.Dissoc(Keyword("extra"))
		} else {
			shrunk = MapOf(kvs...)
		}
		for _, m := range []*Map{MapOf(kvs...), grown, fromJSON.(*Map), shrunk} {
			if m.Len() != n || len(m.kv()) != 2*n || int(m.slots) != 2*n || !Equal(m, MapOf(kvs...)) {
				t.Fatalf("%d entries: %v has Len %d, %d slots (cap %d)", n, m, m.Len(), len(m.kv()), int(m.slots))
			}
		}
	}
}

// TestMapOfDistinctKeysByKind: keys of different kinds with the same name
// are distinct, and duplicates of every kind keep the last value.
func TestMapOfDistinctKeysByKind(t *testing.T) {
	m := MapOf(Keyword("a"), Int(1), String("a"), Int(2), Symbol("a"), Int(3), Int(1), Int(4), Float(1), Int(5))
	if m.Len() != 5 {
		t.Fatalf("MapOf of 5 keys of different kinds: Len %d, %v", m.Len(), m)
	}
	dups := []Value{
		Keyword("a"), Int(1), String("a"), Int(2), Keyword("a"), Int(3),
		NewVector(Int(1)), Int(4), String("a"), Int(5), NewVector(Int(1)), Int(6),
	}
	m = MapOf(dups...)
	if m.Len() != 3 {
		t.Fatalf("MapOf with duplicates: Len %d, %v", m.Len(), m)
	}
	for _, kv := range [][2]Value{{Keyword("a"), Int(3)}, {String("a"), Int(5)}, {NewVector(Int(1)), Int(6)}} {
		if v, ok := m.Get(kv[0]); !ok || v != kv[1] {
			t.Errorf("%v = %v, want the last value %v", kv[0], v, kv[1])
		}
	}
}
