package capabilities

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

type lineItem struct {
	SKU   string  `rtfs:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price,omitempty"`
}

type order struct {
	OrderID  string            `doc:"the order's id"`
	Items    []lineItem        // required: no omitempty
	Note     *string           // optional: a pointer
	Tags     map[string]string `rtfs:",omitempty"`
	Priority rtfs.Keyword      `json:"priority,omitempty"`
	When     time.Time         `json:",omitzero"`
	Extra    rtfs.Value        `rtfs:"extra,omitempty"`
	Skipped  int               `rtfs:"-"`
}

type total struct {
	OrderID string  `rtfs:"order-id"`
	Sum     float64 `rtfs:"sum"`
	Lines   int     `rtfs:"lines"`
	Warning string  `rtfs:"warning,omitempty"`
}

func read(t *testing.T, src string) rtfs.Value {
	t.Helper()
	prog, err := rtfs.Compile("test.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil {
		t.Fatal(err)
	}
	return out.Value
}

func TestTypedCapability(t *testing.T) {
	var seen order
	c, err := Typed("shop.total", "Sum an order.", func(ctx context.Context, o order) (total, error) {
		if CallOf(ctx) == nil || CallOf(ctx).ID != "shop.total" {
			t.Errorf("CallOf = %+v, want the call being served", CallOf(ctx))
		}
		seen = o
		tot := total{OrderID: o.OrderID, Lines: len(o.Items)}
		for _, it := range o.Items {
			tot.Sum += float64(it.Qty) * it.Price
		}
		return tot, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []Key{
		{Name: "order-id", Type: "string", Required: true, Doc: "the order's id"},
		{Name: "items", Type: "vector|list|set", Required: true},
		{Name: "note", Type: "string"},
		{Name: "tags", Type: "map"},
		{Name: "priority", Type: "keyword"},
		{Name: "when", Type: "string"},
		{Name: "extra", Type: "any"},
	}
	if !reflect.DeepEqual(c.Input.Keys, wantKeys) || c.Input.Type != "map" || c.Input.Optional {
		t.Errorf("input schema = %+v\nwant keys %+v", c.Input, wantKeys)
	}
	if c.Output == nil || len(c.Output.Keys) != 4 || c.Output.Keys[3].Required {
		t.Errorf("output schema = %+v", c.Output)
	}
	r := newReg(t, c)

	arg := read(t, `{:order-id "o-7" :items [{:sku "A1" :qty 2 :price 1.5} {"sku" "B2" "qty" 1 "price" 3}]
	                 :note "gift" :tags {:color "red"} :priority :high :when "2026-11-28T10:00:00Z" :extra [1 :two]}`)
	v, err := r.Call(context.Background(), &Call{ID: "shop.total", Args: []rtfs.Value{arg}})
	if err != nil {
		t.Fatal(err)
	}
	var got total
	if err := ToGo(v, &got); err != nil || got != (total{OrderID: "o-7", Sum: 6, Lines: 2}) {
		t.Errorf("answer = %s (%+v, %v), want order o-7, sum 6.0, 2 lines", v, got, err)
	}
	if _, has := v.(*rtfs.Map).GetKeyword("warning"); has {
		t.Errorf("answer %s has the empty :warning, which omitempty leaves out", v)
	}
	if seen.Note == nil || *seen.Note != "gift" || seen.Tags["color"] != "red" || seen.Priority != "high" ||
		!seen.When.Equal(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)) || seen.Items[1].SKU != "B2" {
		t.Errorf("decoded %+v", seen)
	}
	if _, ok := seen.Extra.(*rtfs.Vector); !ok {
		t.Errorf("extra = %#v, want the RTFS vector passed through", seen.Extra)
	}

	bad := []struct{ arg, want string }{
		{`{:items []}`, "capability :shop.total: key :order-id: required string is missing"},
		{`{:order-id 7 :items []}`, "capability :shop.total: key :order-id: expected string, got int 7"},
		{`{:order-id "o" :items [{:sku "A" :qty "two"}]}`, `capability :shop.total: key :items: [0].qty: expected int, got string "two"`},
		{`{:order-id "o" :items [{:sku "A" :qty 1} {:qty 1}]}`, "key :items: [1].sku: required key is missing"},
		{`{:order-id "o" :items [{:sku "A" :qty 1 :colour "red"}]}`, "key :items: [0]: unknown key :colour (known keys: :sku :qty :price)"},
		{`{:order-id "o" :items [] :when "yesterday"}`, `key :when: time.Time: parsing time "yesterday"`},
		{`{:order-id "o" :items [] :oderid 1}`, "unknown key :oderid"},
		{`"o-7"`, `expected a map argument, got string "o-7"`},
	}
	for _, b := range bad {
		_, err := r.Call(context.Background(), &Call{ID: "shop.total", Args: []rtfs.Value{read(t, b.arg)}})
		var ce *Error
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err = %v, want an *Error containing %q", b.arg, err, b.want)
		}
	}
}

func TestTypedShapes(t *testing.T) {
	ctx := context.Background()
	// A scalar input and output.
	double, err := Typed("m.double", "", func(_ context.Context, n int32) (int64, error) { return int64(n) * 2, nil })
	if err != nil {
		t.Fatal(err)
	}
	// No input at all.
	now, err := Typed("m.version", "", func(context.Context, struct{}) (string, error) { return "v1", nil })
	if err != nil {
		t.Fatal(err)
	}
	// A map input takes any keys; an error from the function is wrapped.
	boom := errors.New("boom")
	count, err := Typed("m.count", "", func(_ context.Context, m map[string]any) (int, error) {
		if m["fail"] == true {
			return 0, boom
		}
		return len(m), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newReg(t, double, now, count)
	call := func(id string, args ...rtfs.Value) (rtfs.Value, error) {
		return r.Call(ctx, &Call{ID: id, Args: args})
	}
	if v, err := call("m.double", rtfs.Int(21)); err != nil || v != rtfs.Int(42) {
		t.Errorf("double 21 = %v, %v", v, err)
	}
	if _, err := call("m.double", rtfs.Int(math.MaxInt32+1)); err == nil || !strings.Contains(err.Error(), "2147483648 does not fit in int32") {
		t.Errorf("double past int32: %v", err)
	}
	if v, err := call("m.version"); err != nil || v != rtfs.String("v1") {
		t.Errorf("version = %v, %v", v, err)
	}
	if v, err := call("m.count", read(t, `{:a 1 "b" [1 2]}`)); err != nil || v != rtfs.Int(2) {
		t.Errorf("count = %v, %v", v, err)
	}
	if _, err := call("m.count", read(t, `{:fail true}`)); !errors.Is(err, boom) {
		t.Errorf("count fail: err = %v, want boom wrapped", err)
	}

	// Types that have no RTFS form are refused at once.
	if _, err := Typed("m.bad", "", func(context.Context, chan int) (int, error) { return 0, nil }); err == nil || !strings.Contains(err.Error(), "input chan int") {
		t.Errorf("chan input: %v", err)
	}
	if _, err := Typed("m.bad", "", func(context.Context, struct{ F func() }) (int, error) { return 0, nil }); err == nil || !strings.Contains(err.Error(), "field :f") {
		t.Errorf("func field: %v", err)
	}
	if _, err := Typed("m.bad", "", func(context.Context, int) (map[int]string, error) { return nil, nil }); err == nil || !strings.Contains(err.Error(), "map keys must be strings") {
		t.Errorf("int-keyed output: %v", err)
	}
}

func TestConvertRoundTrip(t *testing.T) {
	type inner struct {
		Name string
		Vals []float64 `json:"vals,omitempty"`
	}
	type outer struct {
		inner               // embedded: its fields are the outer's
		ID       uint16     `json:"id"`
		Children []*inner   `json:"children"`
		Raw      *rtfs.Map  `json:"raw,omitempty"`
		Any      any        `json:"any"`
		Grid     [2][2]int8 `json:"grid"`
	}
	x := outer{
		inner:    inner{Name: "root", Vals: []float64{1.5, 2}},
		ID:       7,
		Children: []*inner{{Name: "a"}, nil},
		Raw:      rtfs.MapOf(rtfs.Keyword("k"), rtfs.Int(1)),
		Any:      map[string]any{"n": int64(3), "l": []any{"s", true, nil}},
		Grid:     [2][2]int8{{1, 2}, {3, 4}},
	}
	v, err := FromGo(x)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(*rtfs.Map)
	if got, _ := m.GetKeyword("name"); got != rtfs.String("root") {
		t.Errorf(":name = %v in %s", got, v)
	}
	kids, _ := m.GetKeyword("children")
	if kids.String() != `[{:name "a"} nil]` {
		t.Errorf(":children = %s", kids)
	}
	var back outer
	if err := ToGo(v, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, x) {
		t.Errorf("round trip:\n got %#v\nwant %#v", back, x)
	}

	// Out of range and wrong shapes name the path.
	for _, c := range []struct {
		src  string
		dst  any
		want string
	}{
		{`{:id -1 :children [] :any 1 :grid [[1 2] [3 4]] :name "x"}`, new(outer), ".id: -1 does not fit in uint16"},
		{`{:id 1 :children [] :any 1 :grid [[1 2] [3 400]] :name "x"}`, new(outer), ".grid[1][1]: 400 does not fit in int8"},
		{`{:id 1 :children [] :any 1 :grid [[1 2]] :name "x"}`, new(outer), ".grid: expected 2 elements, got 1"},
		{`{:id 1 :children [{:name 3}] :any 1 :grid [[1 2] [3 4]] :name "x"}`, new(outer), ".children[0].name: expected string, got int 3"},
		{`{1 2}`, new(map[string]int), "map key int 1 is not a keyword or a string"},
		{`[1 2]`, new(map[string]int), "expected map, got vector"},
	} {
		err := ToGo(read(t, c.src), c.dst)
		if err == nil || err.Error() != c.want {
			t.Errorf("ToGo(%s) = %v, want %q", c.src, err, c.want)
		}
	}
	if err := ToGo(rtfs.Int(1), outer{}); err == nil || !strings.Contains(err.Error(), "non-nil pointer") {
		t.Errorf("ToGo into a non-pointer: %v", err)
	}
	if _, err := FromGo(uint64(math.MaxUint64)); err == nil {
		t.Error("FromGo(MaxUint64) succeeded")
	}
	if _, err := FromGo(map[int]int{1: 1}); err == nil {
		t.Error("FromGo(map[int]int) succeeded")
	}
	type node struct{ Next *node }
	loop := &node{}
	loop.Next = loop
	if _, err := FromGo(loop); err == nil || !strings.Contains(err.Error(), "too deep") {
		t.Errorf("FromGo(cycle) = %v", err)
	}
}

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{
		"StreamID": "stream-id", "MaxSteps": "max-steps", "URL": "url", "HTTPServer": "http-server",
		"ID": "id", "A": "a", "Utf8Name": "utf8-name", "already_snake": "already-snake", "X2Y": "x2-y",
	} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}
