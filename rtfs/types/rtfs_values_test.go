package types_test

import (
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// These tests check types against package rtfs's own values (an external test
// package: rtfs imports types, and this test imports both).

const processorResult = `:[ :map { :state :any
            :action :[ :enum :continue :pause :resume :cancel :complete ]
            :output :any
            :config :[ :map { :buffer_size :int :timeout_ms :int } ] } ]`

func mustType(tb testing.TB, src string) types.Type {
	tb.Helper()
	nodes, err := syntax.Parse("t.rtfs", []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	ty, err := types.Parse(nodes[0])
	if err != nil {
		tb.Fatal(err)
	}
	return ty
}

func result(action rtfs.Value, bufferSize rtfs.Value) rtfs.Value {
	return rtfs.MapOf(
		rtfs.Keyword("state"), rtfs.MapOf(rtfs.Keyword("readings"), rtfs.NewVector(rtfs.Int(1), rtfs.Float(2.5))),
		rtfs.Keyword("action"), action,
		rtfs.Keyword("output"), rtfs.Nil,
		rtfs.Keyword("config"), rtfs.MapOf(rtfs.Keyword("buffer_size"), bufferSize, rtfs.Keyword("timeout_ms"), rtfs.Int(5)),
	)
}

// TestRTFSValuesImplementViews fails while rtfs.Value is a distinct interface
// type rather than an alias of types.Value: methods such as (*rtfs.Map).Range
// then take func(k, v rtfs.Value) bool, which is not the signature
// types.Mapping requires, so Check could not look inside rtfs collections.
func TestRTFSValuesImplementViews(t *testing.T) {
	views := []struct {
		ok   bool
		what string
	}{
		{isa[types.Number](rtfs.Int(1)), "rtfs.Int as types.Number"},
		{isa[types.Number](rtfs.Float(1)), "rtfs.Float as types.Number"},
		{isa[types.Text](rtfs.String("s")), "rtfs.String as types.Text"},
		{isa[types.Text](rtfs.Keyword("k")), "rtfs.Keyword as types.Text"},
		{isa[types.Sequence](rtfs.NewVector()), "*rtfs.Vector as types.Sequence"},
		{isa[types.Sequence](rtfs.NewList()), "*rtfs.List as types.Sequence"},
		{isa[types.Sequence](rtfs.NewSet()), "*rtfs.Set as types.Sequence"},
		{isa[types.Mapping](rtfs.MapOf()), "*rtfs.Map as types.Mapping"},
	}
	for _, v := range views {
		if !v.ok {
			t.Errorf("%s: not implemented (rtfs.Value must be an alias of types.Value for the view methods' signatures to match)", v.what)
		}
	}
}

func isa[V any](v any) bool {
	_, ok := v.(V)
	return ok
}

func TestCheckRTFSValues(t *testing.T) {
	ty := mustType(t, processorResult)
	if err := types.Check(ty, result(rtfs.Keyword("continue"), rtfs.Int(100))); err != nil {
		t.Errorf("good result: %v", err)
	}
	err := types.Check(ty, result(rtfs.Keyword("explode"), rtfs.Int(100)))
	if err == nil || err.Error() != "at :action: expected one of :continue :pause :resume :cancel :complete, got :explode" {
		t.Errorf("bad action: %v", err)
	}
	err = types.Check(ty, result(rtfs.Keyword("pause"), rtfs.String("x")))
	if err == nil || err.Error() != `at :config :buffer_size: expected int, got string "x"` {
		t.Errorf("bad buffer size: %v", err)
	}
	seq := mustType(t, "[:and [:vector [:union :int :float]] [:min-count 2]]")
	if err := types.Check(seq, rtfs.NewVector(rtfs.Int(1), rtfs.Float(2))); err != nil {
		t.Errorf("vector: %v", err)
	}
	err = types.Check(seq, rtfs.NewVector(rtfs.Int(1), rtfs.String("s")))
	if err == nil || !strings.HasPrefix(err.Error(), "at [1]: expected int or float, got string") {
		t.Errorf("bad vector element: %v", err)
	}
	set := mustType(t, "[:set :keyword]")
	if err := types.Check(set, rtfs.NewSet(rtfs.Keyword("a"), rtfs.Keyword("b"))); err != nil {
		t.Errorf("set: %v", err)
	}
	mapOf := mustType(t, "[:map-of :keyword :int]")
	if err := types.Check(mapOf, rtfs.MapOf(rtfs.Keyword("a"), rtfs.Int(1))); err != nil {
		t.Errorf("map-of: %v", err)
	}
	if err := types.Check(mustType(t, "[:list :string]"), rtfs.NewList(rtfs.String("a"))); err != nil {
		t.Errorf("list: %v", err)
	}
}

// BenchmarkCheckProcessorResult checks a processor result against a
// declared return type (an enum of actions, a nested config map), with rtfs values: the check every processor call pays.
func BenchmarkCheckProcessorResult(b *testing.B) {
	ty := mustType(b, processorResult)
	v := result(rtfs.Keyword("continue"), rtfs.Int(100))
	b.ReportAllocs()
	for b.Loop() {
		if err := types.Check(ty, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckVector checks a 100-element vector of ints.
func BenchmarkCheckVector(b *testing.B) {
	ty := mustType(b, "[:vector [:and :int [:>= 0]]]")
	elems := make([]rtfs.Value, 100)
	for i := range elems {
		elems[i] = rtfs.Int(i)
	}
	v := rtfs.NewVector(elems...)
	b.ReportAllocs()
	for b.Loop() {
		if err := types.Check(ty, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckFailure measures building the error for a bad result.
func BenchmarkCheckFailure(b *testing.B) {
	ty := mustType(b, processorResult)
	v := result(rtfs.Keyword("pause"), rtfs.String("x"))
	b.ReportAllocs()
	for b.Loop() {
		if types.Check(ty, v) == nil {
			b.Fatal("no error")
		}
	}
}
