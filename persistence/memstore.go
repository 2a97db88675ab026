package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MemStore is an in-memory Store for tests and for hosts that need no
// durability. It has the semantics of BadgerStore (atomic batches, ordered
// prefix scans over a snapshot, copies in and out) without the disk: its
// contents are lost when the process ends. It is safe for concurrent use.
type MemStore struct {
	mu     sync.RWMutex
	closed bool
	values map[string][]byte
	keys   []string // sorted keys of values
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{values: make(map[string][]byte)}
}

// Commit implements Store. It copies every value, so the caller keeps
// ownership of b. Cost: O(ops × log keys) plus O(keys) per new or deleted key.
func (m *MemStore) Commit(ctx context.Context, b *Batch) error {
	if err := b.validate(); err != nil {
		return fmt.Errorf("persistence: commit of %d operations: %w", b.Len(), err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persistence: commit of %d operations: %w", b.Len(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("persistence: commit of %d operations: %w", b.Len(), ErrClosed)
	}
	for _, op := range b.ops {
		if op.Delete {
			m.remove(string(op.Key))
		} else {
			m.put(string(op.Key), bytes.Clone(op.Value))
		}
	}
	return nil
}

func (m *MemStore) put(key string, value []byte) {
	if value == nil {
		value = []byte{}
	}
	if _, ok := m.values[key]; !ok {
		i, _ := slices.BinarySearch(m.keys, key)
		m.keys = slices.Insert(m.keys, i, key)
	}
	m.values[key] = value
}

func (m *MemStore) remove(key string) {
	if _, ok := m.values[key]; !ok {
		return
	}
	delete(m.values, key)
	i, _ := slices.BinarySearch(m.keys, key)
	m.keys = slices.Delete(m.keys, i, i+1)
}

// Get implements Store.
func (m *MemStore) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("persistence: get %q: %w", key, err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("persistence: get %q: %w", key, ErrClosed)
	}
	v, ok := m.values[string(key)]
	if !ok {
		return nil, fmt.Errorf("persistence: get %q: %w", key, ErrNotFound)
	}
	return bytes.Clone(v), nil
}

// Scan implements Store. The snapshot is taken under a read lock and fn runs
// without it, so fn may commit. Cost: O(log keys + matching keys).
func (m *MemStore) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	keys, values, err := m.snapshot(prefix)
	if err != nil {
		return fmt.Errorf("persistence: scan %q: %w", prefix, err)
	}
	for i, k := range keys {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("persistence: scan %q: %w", prefix, err)
		}
		if err := fn([]byte(k), values[i]); err != nil {
			if errors.Is(err, ErrStopScan) {
				return nil
			}
			return fmt.Errorf("persistence: scan %q stopped at key %q: %w", prefix, k, err)
		}
	}
	return nil
}

func (m *MemStore) snapshot(prefix []byte) ([]string, [][]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, nil, ErrClosed
	}
	p := string(prefix)
	start, _ := slices.BinarySearch(m.keys, p)
	end := start
	for end < len(m.keys) && strings.HasPrefix(m.keys[end], p) {
		end++
	}
	keys := slices.Clone(m.keys[start:end])
	values := make([][]byte, len(keys))
	for i, k := range keys {
		values[i] = bytes.Clone(m.values[k])
	}
	return keys, values, nil
}

// Close implements Store. It drops the contents.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.values, m.keys = nil, nil
	return nil
}
