package host_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// orders is the program of the durable example: a stream prices each
// order with the embedder's capability :shop.price, and the program waits
// for the stream's result.
const orders = `
(defn price-orders [state order meta]
  (let [p (call :shop.price {:sku (:sku order) :qty (:qty order)})
        s {:orders (inc (:orders state)) :cents (+ (:cents state) (:cents p))}]
    (if (:last order)
      {:state s :action :complete :output s}
      {:state s :output {:seq (:seq meta) :cents (:cents s)}})))

(call :mcp.stream.start {:stream-id "orders" :endpoint "orders" :transport :mock
                         :processor price-orders :initial-state {:orders 0 :cents 0}})
(call :mcp.stream.await {:stream-id "orders"})
`

// quote and price are the Go types of :shop.price's argument and answer.
type quote struct {
	SKU string `rtfs:"sku"`
	Qty int    `rtfs:"qty"`
}

type price struct {
	Cents int `rtfs:"cents"`
}

// openShop opens the durable host of dir with the mock transport src and
// registers :shop.price, as every process of the embedder does before it
// runs or recovers anything.
func openShop(dir string, src *mock.Transport) *host.Host {
	h, err := host.Open(host.OpenOptions{DataDir: dir, AddTransports: []transport.Kind{mock.Kind(src)}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := capabilities.Typed("shop.price", "Price a quantity of one SKU, in cents.",
		func(ctx context.Context, q quote) (price, error) {
			return price{Cents: 250 * q.Qty}, nil
		})
	if err == nil {
		err = h.Register(c)
	}
	if err != nil {
		log.Fatal(err)
	}
	return h
}

// sendOrder sends one order, with id as the chunk's id (the stream's
// cursor once the chunk is processed).
func sendOrder(src *mock.Transport, id, sku string, qty int, last bool) {
	data := fmt.Sprintf(`{"sku":%q,"qty":%d,"last":%t}`, sku, qty, last)
	if err := src.Source("orders").Send(context.Background(), transport.Chunk{ID: id, Data: []byte(data)}); err != nil {
		log.Fatal(err)
	}
}

// A durable host: a program starts a stream and waits on it; Go follows
// the stream's outputs, reads its snapshot, pauses and resumes it. The
// process then stops in the middle (Close, as a crash would leave the
// store), and a second process opens the same directory, registers its
// capability, recovers: the stream goes on from the chunk after its
// cursor, and the waiting program finishes with a value Go reads as a
// struct.
func Example_durable() {
	dir, err := os.MkdirTemp("", "shop")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The first process.
	src := &mock.Transport{}
	h := openShop(dir, src)
	// Pending: the subscription waits for the stream the program starts,
	// so it sees its first output.
	sub, err := h.Provider().Subscribe("orders", provider.SubscribeOptions{Pending: true, Lossless: true})
	if err != nil {
		log.Fatal(err)
	}
	prog, err := rtfs.Compile("orders.rtfs", []byte(orders))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { _, err := h.Run(ctx, prog); ran <- err }()

	sendOrder(src, "o-1", "A1", 2, false)
	fmt.Println("output:", (<-sub.C()).Output)
	info, err := h.Provider().Info("orders", provider.InspectOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("state:", info.Status.State, "processed:", info.Stats.ProcessedChunks, "current:", info.CurrentState.V)

	st, err := h.Provider().Pause(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("paused:", st.State)
	if st, err = h.Provider().Resume(ctx, "orders"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed:", st.State)
	sendOrder(src, "o-2", "B7", 1, false)
	fmt.Println("output:", (<-sub.C()).Output)

	// The process stops before the stream ends: the program stays parked
	// on its await, the stream's state and cursor stay in the store. The
	// program parks (is stored) when it reaches the await, which it may do
	// after the stream's outputs: stopping before then would end the run.
	for h.Parked() == 0 {
		if ctx.Err() != nil {
			log.Fatal("the program never parked: ", ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the program stays parked:", errors.Is(<-ran, host.ErrParkInterrupted))

	// The second process: register, then recover.
	src = &mock.Transport{}
	h = openShop(dir, src)
	defer h.Close()
	if err := h.Recover(ctx); err != nil {
		log.Fatal(err)
	}
	<-src.Source("orders").Started()
	fmt.Println("recovered after:", src.Source("orders").Cursor())
	sendOrder(src, "o-3", "A1", 4, true)
	if err := h.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	done, err := h.ResumedPrograms(ctx)
	if err != nil || len(done) != 1 {
		log.Fatal(done, err)
	}
	var total struct {
		Orders int `rtfs:"orders"`
		Cents  int `rtfs:"cents"`
	}
	if err := capabilities.ToGo(done[0].Result, &total); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d orders, %d cents\n", total.Orders, total.Cents)
	// Output:
	// output: {:seq 1 :cents 500}
	// state: active processed: 1 current: {:orders 1 :cents 500}
	// paused: paused
	// resumed: active
	// output: {:seq 2 :cents 750}
	// the program stays parked: true
	// recovered after: o-2
	// 3 orders, 1750 cents
}
