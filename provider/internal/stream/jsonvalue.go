package stream

import (
	"encoding/json"
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A JSONValue is an RTFS value inside a StreamInfo: it marshals with
// rtfs.OutputJSON and unmarshals with rtfs.FromJSON (object keys become
// keywords), so a StreamInfo survives a trip through JSON up to the
// one-way JSON mapping of docs/rtfs-values.md. A nil V is nil.
type JSONValue struct {
	V rtfs.Value
	// Max bounds V's JSON (0: none); the provider sets it to its output
	// limit. A value past it marshals as a string that says so.
	Max int64
}

// MarshalJSON implements json.Marshaler.
func (j JSONValue) MarshalJSON() ([]byte, error) {
	if j.V == nil {
		return []byte("null"), nil
	}
	b, err := rtfs.OutputJSON(j.V, j.Max)
	if err != nil {
		return json.Marshal("not shown: " + err.Error())
	}
	return b, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (j *JSONValue) UnmarshalJSON(b []byte) error {
	v, err := rtfs.FromJSON(b)
	if err != nil {
		return fmt.Errorf("provider: decode a value of a stream snapshot: %w", err)
	}
	j.V = v
	return nil
}

func (j JSONValue) value() rtfs.Value { return orNil(j.V) }

// orNil is v, or rtfs.Nil for a nil v.
func orNil(v rtfs.Value) rtfs.Value {
	if v == nil {
		return rtfs.Nil
	}
	return v
}
