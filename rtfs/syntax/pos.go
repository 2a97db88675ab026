package syntax

import "fmt"

// A Pos is a position in a source file: 16 bytes, the file name shared by
// pointer among all the positions of one file. The zero Pos is "unknown".
type Pos struct {
	file      *string
	Line, Col int32 // 1-based; Col counts bytes
}

// MakePos returns the position line:col in the file whose name *file holds.
func MakePos(file *string, line, col int32) Pos { return Pos{file, line, col} }

// Filename returns the position's file name, or "" if unknown.
func (p Pos) Filename() string {
	if p.file == nil {
		return ""
	}
	return *p.file
}

// IsValid reports whether the position is known.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String formats the position as file:line:col (or line:col without a file).
func (p Pos) String() string {
	if p.file == nil || *p.file == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", *p.file, p.Line, p.Col)
}
