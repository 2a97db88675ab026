package rtfs

import (
	"fmt"
	"testing"
)

// Benchmarks of the value layer. Run with
//   go test ./rtfs/ -run '^$' -bench 'Conj|Assoc|GetKeyword|JSON|Hash|Builtin' -benchmem

var sinkValue Value

func vectorOfLen(n int) *Vector {
	elems := make([]Value, n)
	for i := range elems {
		elems[i] = Int(i)
	}
	return NewVector(elems...)
}

// benchConj conjoins onto vectors of n, n+1, ..., n+31 elements in turn,
// so the 32 tail states each count once: the cost per conj of a vector
// growing around that size. Every Conj starts from the same bases, so it
// pays the full copy of its size.
func benchConj(b *testing.B, n int) {
	bases := make([]*Vector, vwidth)
	bases[0] = vectorOfLen(n)
	for i := 1; i < vwidth; i++ {
		bases[i] = bases[i-1].Conj(Int(n + i))
	}
	x := Float(21.5)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkValue = bases[i&vmask].Conj(x)
	}
}

func BenchmarkConj100(b *testing.B)  { benchConj(b, 100) }
func BenchmarkConj100k(b *testing.B) { benchConj(b, 100_000) }

// BenchmarkConj100kFullTail is the worst case: the 100,000-element vector's
// tail is full, so every Conj pushes it into the trie.
func BenchmarkConj100kFullTail(b *testing.B) {
	v := vectorOfLen(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkValue = v.Conj(Int(i))
	}
}

// BenchmarkConjGrow grows a vector from empty to 100,000 elements,
// including the tail pushes into the trie (reported per element).
func BenchmarkConjGrow(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		v := NewVector()
		for j := 0; j < 1000; j++ {
			v = v.Conj(Int(j))
		}
		sinkValue = v
	}
}

func BenchmarkVectorAssoc100k(b *testing.B) {
	v := vectorOfLen(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkValue, _ = v.Assoc(i%90_000, Int(i))
	}
}

func BenchmarkMapAssocArrayMap(b *testing.B) {
	m := MapOf(Keyword("readings"), NewVector(), Keyword("count"), Int(3), Keyword("sensor"), String("a"))
	rs := NewVector(Int(1))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkValue = m.Assoc(Keyword("readings"), rs)
	}
}

func BenchmarkMapAssocHashMap1000(b *testing.B) {
	m := MapOf()
	for i := 0; i < 1000; i++ {
		m = m.Assoc(Keyword(fmt.Sprintf("k%d", i)), Int(i))
	}
	k := Keyword("k500")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkValue = m.Assoc(k, Int(i))
	}
}

var sinkOK bool

func BenchmarkGetKeywordArrayMap(b *testing.B) {
	m := MapOf(Keyword("temp"), Float(21.5), Keyword("ts"), Int(12345), Keyword("sensor"), String("a"))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sinkValue, sinkOK = m.GetKeyword("sensor")
	}
}

func BenchmarkGetKeywordHashMap1000(b *testing.B) {
	m := MapOf()
	for i := 0; i < 1000; i++ {
		m = m.Assoc(Keyword(fmt.Sprintf("k%d", i)), Int(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sinkValue, sinkOK = m.GetKeyword("k500")
	}
}

var chunkJSON = []byte(`{"seq": 12, "event": "reading", "data": {"city": "Paris", "temperature_c": 21.5,` +
	` "humidity_pct": 63, "conditions": "cloudy", "tags": ["a", "b"]}}`)

func BenchmarkFromJSONChunk(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(chunkJSON)))
	for i := 0; i < b.N; i++ {
		v, err := FromJSON(chunkJSON)
		if err != nil {
			b.Fatal(err)
		}
		sinkValue = v
	}
}

func BenchmarkToJSONChunk(b *testing.B) {
	v, err := FromJSON(chunkJSON)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		out, err := ToJSON(v)
		if err != nil {
			b.Fatal(err)
		}
		sinkValue = String(out)
	}
}

// BenchmarkHashCached measures Hash of a large vector after its first
// call: the cached hash makes it O(1).
func BenchmarkHashCached(b *testing.B) {
	v := vectorOfLen(100_000)
	Hash(v)
	b.ReportAllocs()
	b.ResetTimer()
	var h uint64
	for i := 0; i < b.N; i++ {
		h += Hash(v)
	}
	sinkValue = Int(h & 1)
}

func BenchmarkBuiltinAddInts(b *testing.B) {
	add := lookupBuiltin("+")
	args := []Value{Int(40), Int(2)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sinkValue, _ = add.call(nil, args)
	}
}

func BenchmarkBuiltinGet(b *testing.B) {
	get := lookupBuiltin("get")
	args := []Value{MapOf(Keyword("temp"), Float(21.5), Keyword("ts"), Int(12345)), Keyword("ts")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sinkValue, _ = get.call(nil, args)
	}
}

// BenchmarkBuiltinUnpack calls builtins whose arguments are unpacked and
// checked by type (ints, numbers, strings, counts, collections, optional
// arguments): the cost of the checks on the call path.
func BenchmarkBuiltinUnpack(b *testing.B) {
	for _, c := range []struct {
		name string
		args []Value
	}{
		{"pow", []Value{Int(2), Float(0.5)}},
		{"clojure.math/scalb", []Value{Float(1.5), Int(3)}},
		{"subs", []Value{String("hello world"), Int(2), Int(5)}},
		{"starts-with?", []Value{String("hello world"), String("hell")}},
		{"take-last", []Value{Int(2), NewVector(Int(1), Int(2), Int(3))}},
		{"bit-and", []Value{Int(12), Int(10)}},
		{"parse-boolean", []Value{String("true")}},
	} {
		fn := lookupBuiltin(c.name)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sinkValue, _ = fn.call(nil, c.args)
			}
		})
	}
}
