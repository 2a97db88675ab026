package capabilities_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A capability over Go types: the argument map becomes a struct, the answer
// struct becomes a map with keyword keys, and a bad argument is refused
// before the function runs, naming the key.
func ExampleTyped() {
	type quote struct {
		SKU string `rtfs:"sku"`
		Qty int    // the key :qty
	}
	type price struct {
		SKU   string  `rtfs:"sku"`
		Total float64 `rtfs:"total"`
	}
	c, err := capabilities.Typed("shop.price", "Price a quantity of one SKU.",
		func(ctx context.Context, q quote) (price, error) {
			return price{SKU: q.SKU, Total: 2.5 * float64(q.Qty)}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	reg := capabilities.NewRegistry()
	if err := reg.Register(c); err != nil {
		log.Fatal(err)
	}
	call := func(arg rtfs.Value) {
		v, err := reg.Call(context.Background(), &capabilities.Call{ID: "shop.price", Args: []rtfs.Value{arg}})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		var p price
		if err := capabilities.ToGo(v, &p); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s costs %.2f\n", p.SKU, p.Total)
	}
	call(rtfs.MapOf(rtfs.Keyword("sku"), rtfs.String("A1"), rtfs.Keyword("qty"), rtfs.Int(4)))
	call(rtfs.MapOf(rtfs.Keyword("sku"), rtfs.String("A1"), rtfs.Keyword("qty"), rtfs.String("four")))
	// Output:
	// A1 costs 10.00
	// error: capability :shop.price: key :qty: expected int, got string "four"
}
