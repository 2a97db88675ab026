package provider

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
)

// TestAPIHidesTheStream: no method a user of Provider can call takes or
// returns the stream's own machinery (a Stream, its records, its env, the
// persister),
// directly or inside a function type: the stream package is internal, and
// what users see of it are the aliases of stream.go.
func TestAPIHidesTheStream(t *testing.T) {
	hidden := []reflect.Type{reflect.TypeFor[*stream.Stream](), reflect.TypeFor[*stream.Loaded](),
		reflect.TypeFor[*stream.StreamEnv](), reflect.TypeFor[*stream.Persister]()}
	var mentions func(reflect.Type) bool
	mentions = func(ty reflect.Type) bool {
		for _, h := range hidden {
			if ty == h || ty == h.Elem() {
				return true
			}
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			return mentions(ty.Elem())
		case reflect.Map:
			return mentions(ty.Key()) || mentions(ty.Elem())
		case reflect.Func:
			for i := range ty.NumIn() {
				if mentions(ty.In(i)) {
					return true
				}
			}
			for i := range ty.NumOut() {
				if mentions(ty.Out(i)) {
					return true
				}
			}
		}
		return false
	}
	pt := reflect.TypeFor[*Provider]()
	if pt.NumMethod() == 0 {
		t.Fatal("Provider has no exported methods: reflection sees nothing")
	}
	for i := range pt.NumMethod() {
		m := pt.Method(i)
		if mentions(m.Type) {
			t.Errorf("Provider.%s %s exposes the stream package's types", m.Name, strings.TrimPrefix(m.Type.String(), "func"))
		}
	}
}
