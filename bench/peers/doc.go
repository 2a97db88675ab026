// Package peers runs the work of rtfshost's pipeline benchmarks
// (provider.BenchmarkPipelineRTFS and BenchmarkProcessorCall) through two
// other engines, so that run.sh can set rtfshost's figures beside theirs,
// measured in the same run on the same machine:
//
//   - Redpanda Connect's engine, github.com/redpanda-data/benthos/v4, through
//     its public/service API: a batched producer func, a `mapping`
//     processor (Bloblang) and a batched consumer func;
//   - go.starlark.net: the anchor processor written in Starlark, called
//     alone (as BenchmarkProcessorCall calls the RTFS one) and behind a
//     minimal host of a channel and a worker goroutine (as the provider
//     runs a stream).
//
// The work per chunk is that of rtfshost's reference processor: decode the
// JSON chunk
// {"temp":21.5,"ts":12345,"sensor":"a"}, add its temp to a list of readings
// kept in the state, output the count, and start over at 100 readings.
//
// cmd/schedtrace reads an execution trace of the provider's pipeline
// benchmark and says how long each of its goroutines ran, waited for a P
// and was blocked, and who woke it (README, Performance).
//
// This is a module of its own, so that the product's go.mod does not carry
// the peers' dependencies; nothing in rtfshost imports it.
package peers
