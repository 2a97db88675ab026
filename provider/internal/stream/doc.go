// Package stream is one stream of a provider: its definition, its
// goroutines, the way of a chunk from the transport to the processor and of
// the result to the stream's state, outputs and lifecycle, and the records
// it keeps in the store. Package provider holds many streams (start,
// recover, list, the cluster); it makes a Stream with NewStream, or from its
// stored records (Loaded, restore.go), and talks to it through its methods.
// A Stream reaches its provider only through its Env: the provider's
// lifetime, logger, settings, circuit breakers, run table, and two narrow
// interfaces for its cluster and observer.
//
// A chunk's way through a stream, file by file:
//
//	deliver.go    the transport hands it over (Deliver); it is decoded (decode.go) and queued
//	queue.go      the flow: queue, backpressure, wake-ups
//	worker.go     the worker takes it and calls the processor (invoke.go)
//	directive.go  the result is parsed and applied: state, output, directive, lifecycle
//	subscribe.go  the outputs and changes are published to the stream's subscribers
//	failure.go    a chunk the processor fails on: retried, held, or set aside (deadletter.go)
//	stats.go      the counters it moves
//	persist.go    its effect (and, for a source that cannot replay, the chunk) is stored
//
// and around it: definition.go is what the stream was started with,
// stream.go starts its goroutines (launch), spec.go gives its transport
// what it connects with, request.go takes the requests of the provider's
// callers (pause, resume, cancel), progress.go and timeline.go keep its
// milestones and recent events, describe.go is what it says of itself
// (info, inspect), keeper.go is what it asks of its store, recorder.go
// writes its recording, streamobs.go is what it tells its observer,
// jsonvalue.go carries its values in what it reports, and env.go is all it
// reaches of its provider. The store's records (records.go, deliveryrec.go,
// deadletterrec.go, origin.go, runjournal.go) are read back by restore.go.
//
// The names of this package that the provider's API carries (Status,
// Event, Subscription, Delivery, StreamInfo, ...) are kept in package
// provider as aliases; their unexported parts stay here, and the few the
// provider needs are functions (SourceOf, StatusErr, BatchSize, the
// registry's side of a Subscription) rather than methods, so that the
// provider's users do not see them.
//
// Safe for concurrent use as each type's doc says; a Stream's state is
// guarded by its Mu, and the methods ending in Locked expect it held.
package stream
