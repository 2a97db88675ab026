package rtfs

import (
	"fmt"
)

// MarshalValue encodes v, closures of this program included, with the value
// codec of docs/rtfs-values.md. A closure is written as its function id and
// captured values, so the bytes decode only with UnmarshalValue of the same
// program (same Hash): store the hash beside them. Cost: O(size of v in
// memory): shared structure is written once.
func (p *Program) MarshalValue(v Value) ([]byte, error) {
	return p.MarshalValueOpts(v, EncodeOptions{})
}

// MarshalValueOpts is MarshalValue with a bound: past o.MaxBytes it stops
// with a *LimitError (LimitOutput), which the error wraps.
func (p *Program) MarshalValueOpts(v Value, o EncodeOptions) ([]byte, error) {
	b, err := marshalValue(make([]byte, 0, 64), v, programFns{p}, o)
	if err != nil {
		return nil, fmt.Errorf("rtfs: marshal value: %w", err)
	}
	return b, nil
}

// UnmarshalValue decodes bytes written by MarshalValue of the same program.
// Corrupt input, and a function id or captured-value count that does not
// fit the program, are errors; it never panics.
func (p *Program) UnmarshalValue(b []byte) (Value, error) {
	v, err := unmarshalValue(b, programFns{p})
	if err != nil {
		return nil, fmt.Errorf("rtfs: unmarshal value: %w", err)
	}
	return v, nil
}

// programFns implements the value codec's function hook for a program:
// a closure is its function id, the count of captured values and the values.
type programFns struct{ p *Program }

func (c programFns) appendFn(e *valueEncoder, fn Value) error {
	cl, ok := fn.(*Closure)
	if !ok {
		return fmt.Errorf("cannot encode %s", describe(fn))
	}
	if cl.fn.prog != nil && cl.fn.prog != c.p {
		return fmt.Errorf("cannot encode %s: it belongs to program %s", cl, cl.fn.prog.name)
	}
	e.appendUvarint(uint64(cl.fn.code.ID))
	e.appendUvarint(uint64(len(cl.free)))
	for _, x := range cl.free {
		if err := e.appendValue(x); err != nil {
			return err
		}
	}
	return nil
}

func (c programFns) readFn(d *valueDecoder) (Value, error) {
	id, err := d.readUvarint()
	if err != nil {
		return nil, err
	}
	if id >= uint64(len(c.p.funcs)) {
		return nil, d.errorf("function id %d out of range (%d functions)", id, len(c.p.funcs))
	}
	fi := c.p.funcs[id]
	n, err := d.readCount(1)
	if err != nil {
		return nil, err
	}
	if n != fi.code.NumFree {
		return nil, d.errorf("function %d captures %d values, not %d", id, fi.code.NumFree, n)
	}
	if n == 0 {
		return fi.static, nil
	}
	cl := &Closure{fn: fi, free: make([]Value, n)}
	for i := range cl.free {
		if cl.free[i], err = d.readValue(); err != nil {
			return nil, err
		}
	}
	return cl, nil
}
