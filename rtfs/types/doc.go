// Package types implements RTFS type expressions: the annotations written after
// parameters, parameter vectors, def names and let bindings, such as :int,
// :string? or :[ :map { :state :any :action :keyword } ].
//
// Parse turns a form read by package syntax into a Type; Type.String prints it
// back in a form Parse accepts; Check tests a value against a type and returns
// a *CheckError naming the path to the offending part, what was expected and
// what was found. Check allocates nothing when the value conforms (except for
// [:map-of K V], whose check iterates through a callback).
//
// The package does not depend on package rtfs: values are seen through the
// Value interface and the optional views Number, Integer, Text, Sequence and
// Mapping, which rtfs values implement.
//
// Decisions (see docs/rtfs-syntax.md):
//   - :float accepts only floats, :int only ints, :number both.
//   - In a map type, listed keys are required unless their type accepts nil
//     (T?, :nil, :any, a union with nil) or the entry is marked [:k T ?].
//     Extra keys are allowed (maps are open).
//   - An unknown unqualified type name such as :strng is an error; a qualified
//     name (containing '.' or '/'), such as :my.app/Reading, is a custom named
//     type that accepts any value.
//   - [:matches-regex "re"] must match the whole string.
package types
