package types

// Integer is an optional view implemented by int values: Int64 returns the exact
// integer. Checks that compare ints (:enum, :val, :> ...) use it when present
// and fall back to Number.Float64 otherwise (exact up to 2^53).
type Integer interface {
	Value
	Int64() int64 // the exact integer
}
