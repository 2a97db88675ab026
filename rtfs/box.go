package rtfs

import "unsafe"

// ifaceWords is the layout of a non-empty interface value such as Value: a
// type word and a data word. For a type that is not pointer-shaped (Float)
// the data word points to an immutable copy of the value.
type ifaceWords struct {
	tab  unsafe.Pointer
	data unsafe.Pointer
}

// asWords returns vs seen as the words of its values, to compare them
// word for word (the same dynamic type and data pointer imply ==, without
// comparing what the words point to). Never write through it: a write
// must go through vs, with its write barrier.
func asWords(vs []Value) []ifaceWords {
	return unsafe.Slice((*ifaceWords)(unsafe.Pointer(unsafe.SliceData(vs))), len(vs))
}

// boxFloats sets out[i] to Value(fs[i]) for every i (len(out) must equal
// len(fs)) without allocating: each interface's data word points into fs
// instead of to a fresh 8-byte copy, so decoding n floats costs one
// allocation (fs) instead of n. The caller gives up fs: it must never be
// written again, because the boxed values share its memory (a boxed value is
// never written through, by Go or by this package). The garbage collector
// keeps fs alive while any of the values is reachable.
func boxFloats(out []Value, fs []Float) {
	var proto Value = Float(0) // a zero value: boxed without allocating
	tab := (*ifaceWords)(unsafe.Pointer(&proto)).tab
	for i := range fs {
		*(*ifaceWords)(unsafe.Pointer(&out[i])) = ifaceWords{tab: tab, data: unsafe.Pointer(&fs[i])}
	}
}

// boxAt returns the interface value whose type word is proto's and whose
// data word is p. p must point to an immutable value of proto's dynamic
// type, never written again.
func boxAt(proto Value, p unsafe.Pointer) Value {
	var v Value
	*(*ifaceWords)(unsafe.Pointer(&v)) = ifaceWords{tab: (*ifaceWords)(unsafe.Pointer(&proto)).tab, data: p}
	return v
}

// Bounds of a numSlab's backing arrays, in 8-byte cells.
const (
	minNumSlab = 4
	maxNumSlab = 256
)

// A numSlab boxes the Int and Float values of decoded documents from
// shared backing arrays, so that the numbers of a small document cost one
// allocation instead of one each (as boxFloats does for a run of floats).
// Each cell is written once, before its value is published, and never
// again: cells are handed out in order and never reused. A FromJSON call's
// numSlab is dropped with the call; a JSONDecoder's carries its unused
// cells over to the next document, so that a stream of small documents
// costs an allocation every few documents rather than one each. The
// arrays hold no pointers; the garbage collector keeps each one alive
// while any value boxed from it is reachable, so a retained number pins at
// most one array (2 KiB at most). The zero value is ready to use.
type numSlab struct {
	cells []uint64 // the unused cells of the current array
	size  int      // the size of the last array (0 before the first)
	carry bool     // the unused cells serve later documents (JSONDecoder)
}

// maxCarriedSlab bounds the arrays of a numSlab that carries cells over:
// a stream of small documents needs no more to allocate rarely, and each
// of a host's many decoders keeps one.
const maxCarriedSlab = 64

// cell returns an unused cell. At most hint more cells will be needed
// (hint >= 1): arrays grow from 4 cells, doubling up to 256, but are never
// longer than hint unless the numSlab carries cells over (then up to
// maxCarriedSlab, or hint if larger).
func (s *numSlab) cell(hint int) unsafe.Pointer {
	if len(s.cells) == 0 {
		s.size = min(max(2*s.size, minNumSlab), maxNumSlab)
		n := min(s.size, max(hint, 1))
		if s.carry {
			n = max(n, min(s.size, maxCarriedSlab))
		}
		s.cells = make([]uint64, n)
	}
	c := &s.cells[0]
	s.cells = s.cells[1:]
	return unsafe.Pointer(c)
}

// int returns n boxed: Int values 0 to 255, which the runtime boxes without
// allocating, as usual; others in a cell. At most hint numbers remain to
// be boxed, this one included.
func (s *numSlab) int(n Int, hint int) Value {
	if 0 <= n && n < 256 {
		return n
	}
	c := s.cell(hint)
	*(*Int)(c) = n
	return boxAt(Int(0), c)
}

// float returns f boxed in a cell. At most hint numbers remain to be
// boxed, this one included.
func (s *numSlab) float(f Float, hint int) Value {
	c := s.cell(hint)
	*(*Float)(c) = f
	return boxAt(Float(0), c)
}
