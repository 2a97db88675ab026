// Package syntax reads RTFS 2.0 source text into forms.
//
// Parse turns a file into a slice of Node values: *Nil, *Bool, *Int, *Float,
// *String, *Keyword, *Symbol, *List, *Vector, *Map, *Set and *TypeExpr, each
// with the Pos of its first character. Reader sugar is expanded while reading:
//
//	'x        (quote x)
//	`x ~x ~@x (quasiquote x) (unquote x) (unquote-splicing x)
//	@x        (deref x)
//	#(+ % %2) (fn [%1 %2] (+ %1 %2))     (%& is the rest parameter)
//	^:kw x    x with Meta {:kw true}; ^{...} x merges the map; ^T x is {:tag T}
//	^:delegation :remote "id" x   x with Meta {:delegation :remote :delegation-target "id"}
//	:[ ... ]  a *TypeExpr (a colon directly followed by '[')
//
// Comments are ';' to the end of the line and '#| ... |#' blocks, which nest.
// Commas are whitespace. Nesting deeper than MaxNesting is an error, so that no
// input can exhaust the Go stack of the reader or of its consumers.
//
// Reader errors are *Error values whose message is one line prefixed by
// file:line:col; an unterminated string, collection or comment reports the
// position of its opening delimiter.
package syntax
