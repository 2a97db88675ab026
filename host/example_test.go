package host_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// A Go program embeds the host, registers a capability of its own and runs
// an RTFS program that starts a stream on the mock transport, processes each
// reading with the capability, and waits for the stream's result.
func Example() {
	source := &mock.Transport{}
	h, err := host.New(host.Options{
		Streams: provider.Options{Transports: transport.NewCatalog(mock.Kind(source))},
		Stdout:  os.Stdout,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	// An embedder capability: Fahrenheit to Celsius, rounded.
	err = h.Register(capabilities.Capability{
		ID:          "units.f-to-c",
		Description: "Convert a Fahrenheit temperature to Celsius.",
		Input:       &capabilities.Schema{Type: "number"},
		Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
			f := float64(c.Args[0].(rtfs.Int))
			return capabilities.Now(rtfs.Int(int64((f-32)*5/9 + 0.5))), nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	prog, err := rtfs.Compile("weather.rtfs", []byte(`
(defn track [state chunk meta]
  (let [c (call :units.f-to-c (:temp_f chunk))
        readings (conj (:readings state) c)]
    (println "reading" (:seq meta) "is" c "C")
    {:state (assoc state :readings readings)
     :output {:count (count readings) :max (apply max readings)}}))

(call :mcp.stream.start {:endpoint "paris" :stream-id "paris" :transport :mock
                         :processor track :initial-state {:readings []}})
(call :mcp.stream.await {:stream-id "paris" :timeout-ms 10000})
`))
	if err != nil {
		log.Fatal(err)
	}

	// The source: three readings, then the end of the stream.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		src := source.Source("paris")
		for _, f := range []int{50, 68, 59} {
			if err := src.SendJSON(context.Background(), "reading", map[string]int{"temp_f": f}); err != nil {
				log.Print(err)
				return
			}
		}
		src.Close()
	}()

	result, err := h.Run(context.Background(), prog)
	wg.Wait()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result:", result)
	// Output:
	// reading 1 is 10 C
	// reading 2 is 20 C
	// reading 3 is 15 C
	// result: {:count 3 :max 20}
}

// Open assembles a host with the default transports (raw SSE, MCP over
// HTTP, stdio and exec) and, with a DataDir, a durable store. This program
// streams a command's output: each line a chunk.
func ExampleOpen() {
	h, err := host.Open(host.OpenOptions{Options: host.Options{Stdout: os.Stdout}})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	prog, err := rtfs.Compile("lines.rtfs", []byte(`
(defn words [n chunk meta]
  {:state (+ n (count (split (:line chunk) " ")))})

(def s (call :mcp.stream.start
         {:transport :exec :command "printf" :args ["one two\nthree\n"]
          :processor words :initial-state 0}))
(call :mcp.stream.await {:stream-id (:stream-id s)})
(:current-state (call :mcp.stream.inspect {:stream-id (:stream-id s)}))
`))
	if err != nil {
		log.Fatal(err)
	}
	v, err := h.Run(context.Background(), prog)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("words:", v)
	// Output:
	// words: 3
}
