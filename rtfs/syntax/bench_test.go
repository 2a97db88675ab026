package syntax

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParse reads the streaming programs and the other testdata files.
func BenchmarkParse(b *testing.B) {
	files, _ := filepath.Glob("testdata/*.rtfs")
	var src [][]byte
	size := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		src = append(src, data)
		size += len(data)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for i, s := range src {
			if _, err := Parse(files[i], s); err != nil {
				b.Fatal(err)
			}
		}
	}
}
