package mock

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// TestTransportSuite runs the transport conformance suite on the mock: its
// producers are goroutines that the test stops.
func TestTransportSuite(t *testing.T) { transporttest.Run(t, suiteHarness()) }

// BenchmarkCancel: how long Run takes to return after a cancel.
func BenchmarkCancel(b *testing.B) { transporttest.BenchmarkCancel(b, suiteHarness()) }

func suiteHarness() transporttest.Harness {
	return transporttest.Harness{
		Finite: func(t testing.TB, n int) transporttest.Source {
			tr, src := newSuiteSource(t)
			go func() {
				for i := range n {
					if src.Send(context.Background(), transport.Chunk{Data: []byte(strconv.Itoa(i))}) != nil {
						return
					}
				}
				src.Close()
			}()
			return transporttest.Source{Transport: tr, Spec: transport.Spec{StreamID: "suite"}}
		},
		Endless: func(t testing.TB) transporttest.Source {
			tr, src := newSuiteSource(t)
			var produced atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					if src.Send(ctx, transport.Chunk{Data: []byte(strconv.Itoa(i))}) != nil {
						return
					}
					produced.Add(1)
				}
			}()
			t.Cleanup(func() { cancel(); <-done })
			return transporttest.Source{Transport: tr, Spec: transport.Spec{StreamID: "suite"},
				Produced: func() int { return int(produced.Load()) }}
		},
		Failing: func(t testing.TB) transporttest.Source {
			tr, src := newSuiteSource(t)
			src.Fail(errors.New("the producer broke"))
			return transporttest.Source{Transport: tr, Spec: transport.Spec{StreamID: "suite"}}
		},
		Index: func(c transport.Chunk) (int, bool) {
			i, err := strconv.Atoi(string(c.Data))
			return i, err == nil
		},
	}
}

func newSuiteSource(testing.TB) (*Transport, *Source) {
	tr := &Transport{}
	return tr, tr.Source("suite")
}
