package persistence

import (
	"fmt"
	"strings"
	"testing"
)

func mergeString(b *Batch) string {
	var parts []string
	for _, op := range b.ops {
		if op.Delete {
			parts = append(parts, "-"+string(op.Key))
		} else {
			parts = append(parts, string(op.Key)+"="+string(op.Value))
		}
	}
	return strings.Join(parts, " ")
}

var mergeOps = []Op{
	{Key: []byte("a"), Value: []byte("1")},
	{Key: []byte("b"), Value: []byte("1")},
	{Key: []byte("a"), Value: []byte("2")},
	{Key: []byte("c"), Value: []byte("1")},
	{Key: []byte("b"), Delete: true},
	{Key: []byte("c"), Value: []byte("2")},
}

func TestMergerKeepsLastWritePerKey(t *testing.T) {
	m := newMerger()
	b, replaced := m.merge(mergeOps)
	if got := mergeString(b); got != "a=2 -b c=2" || replaced != 3 {
		t.Fatalf("merge = %q, %d replaced; want a=2 -b c=2, 3 replaced", got, replaced)
	}
	// The merger is reused across commits; nothing may leak from the last.
	b, replaced = m.merge(mergeOps[3:4])
	if got := mergeString(b); got != "c=1" || replaced != 0 {
		t.Fatalf("second merge = %q, %d replaced", got, replaced)
	}
}

// TestMergerHashCollisions makes every key hash alike: operations on
// different keys must all survive, in order, so the store still applies the
// last write per key.
func TestMergerHashCollisions(t *testing.T) {
	m := newMerger()
	m.hash = func([]byte) uint64 { return 42 }
	b, _ := m.merge(mergeOps)
	// "a" owns the hash slot and is merged; "b" and "c" are kept in order.
	if got := mergeString(b); got != "a=2 b=1 c=1 -b c=2" {
		t.Fatalf("merge with colliding hashes = %q", got)
	}
	final := map[string]string{}
	for _, op := range b.ops {
		if op.Delete {
			delete(final, string(op.Key))
		} else {
			final[string(op.Key)] = string(op.Value)
		}
	}
	if got := fmt.Sprint(final); got != "map[a:2 c:2]" {
		t.Fatalf("applying the merged batch gives %s, want map[a:2 c:2]", got)
	}
}
