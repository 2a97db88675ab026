package rtfs_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Compile a program, run its top level to define the processor, then call
// the processor once per chunk, threading its :state through.
func Example_processor() {
	src := `
(defn count-temps [state chunk meta]
  :[ :map { :state :any :action :keyword :output :any } ]
  (let [readings (conj (:readings state) (:temp chunk))]
    (if (< (count readings) 3)
      {:state {:readings readings} :action :continue :output (count readings)}
      {:state {:readings readings} :action :complete :output (avg readings)})))`
	prog, err := rtfs.Compile("temps.rtfs", []byte(src))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	th := rtfs.NewThread(rtfs.Limits{MaxSteps: 100_000})
	out, err := th.Run(ctx, prog)
	if err != nil {
		log.Fatal(err)
	}
	proc, _ := out.Globals.Get("count-temps")
	var state rtfs.Value = rtfs.MapOf(rtfs.Keyword("readings"), rtfs.NewVector())
	meta := rtfs.MapOf(rtfs.Keyword("stream-id"), rtfs.String("s1"))
	for _, temp := range []float64{20, 21, 25} {
		chunk := rtfs.MapOf(rtfs.Keyword("temp"), rtfs.Float(temp))
		res, err := th.Call(ctx, out.Globals, proc, state, chunk, meta)
		if err != nil {
			log.Fatal(err)
		}
		m := res.Value.(*rtfs.Map)
		action, _ := m.GetKeyword("action")
		output, _ := m.GetKeyword("output")
		state, _ = m.GetKeyword("state")
		fmt.Println(action, output)
	}
	// Output:
	// :continue 1
	// :continue 2
	// :complete 22.0
}

// A host call suspends the program. The continuation is plain data: marshal
// it, store it, and later resume a decoded copy, here on another Thread.
func Example_suspendResume() {
	src := `
(defn fetch-city [id] (call :weather.lookup {:id id}))
(let [city (fetch-city 7)]
  (str "weather in " (:name city)))`
	prog, err := rtfs.Compile("suspend.rtfs", []byte(src))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(ctx, prog)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("host call:", out.Call.Capability, out.Call.Args[0])

	blob, err := out.Continuation.MarshalBinary()
	if err != nil {
		log.Fatal(err)
	}
	k, err := rtfs.UnmarshalContinuation(prog, blob)
	if err != nil {
		log.Fatal(err)
	}
	answer := rtfs.MapOf(rtfs.Keyword("name"), rtfs.String("Paris"))
	out, err = rtfs.NewThread(rtfs.Limits{}).Resume(ctx, k, answer)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Value)
	// Output:
	// host call: weather.lookup {:id 7}
	// "weather in Paris"
}
