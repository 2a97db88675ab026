package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/transport/breaker"
)

// snapshotCollector reads the provider's stream snapshot at each scrape: the
// gauges that describe the present (how many streams are in each state, how
// full their queues are) rather than count events.
type snapshotCollector struct {
	o        *Observer
	p        *provider.Provider
	streams  *prometheus.Desc
	depth    *prometheus.Desc
	capacity *prometheus.Desc

	breakerState    *prometheus.Desc
	breakerFailures *prometheus.Desc
	breakerOpened   *prometheus.Desc
	breakerRejected *prometheus.Desc
}

// states lists every state, so that each has a series (0 included).
var states = []provider.State{provider.StateActive, provider.StatePaused, provider.StateFailed, provider.StateCompleted, provider.StateCancelled, provider.StateError}

func newSnapshotCollector(o *Observer, p *provider.Provider) *snapshotCollector {
	return &snapshotCollector{
		o: o, p: p,
		streams: prometheus.NewDesc(ns+"_streams", "Streams the host holds, by state (ended ones until they are removed).", []string{"state"}, nil),
		depth: prometheus.NewDesc(ns+"_queue_depth", "Chunks waiting in the queues of the streams that have not ended.",
			o.streamLabels, nil),
		capacity: prometheus.NewDesc(ns+"_queue_capacity", "Queue capacity of the streams that have not ended (depth/capacity is how full they are).",
			o.streamLabels, nil),
		breakerState: prometheus.NewDesc(ns+"_breaker_state", "Circuit breaker of each origin that failed lately: 0 closed, 1 open, 2 half-open (its probe under way).",
			[]string{"origin"}, nil),
		breakerFailures: prometheus.NewDesc(ns+"_breaker_failures", "Consecutive failed attempts on each origin that failed lately.",
			[]string{"origin"}, nil),
		breakerOpened:   prometheus.NewDesc(ns+"_breaker_opened_total", "Times a circuit breaker opened.", nil, nil),
		breakerRejected: prometheus.NewDesc(ns+"_breaker_rejections_total", "Starts and reconnects refused at once by an open circuit.", nil, nil),
	}
}

// breakerValue is the value of rtfshost_breaker_state.
var breakerValue = map[string]float64{breaker.Closed: 0, breaker.Open: 1, breaker.HalfOpen: 2}

// Describe implements prometheus.Collector.
func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.streams
	ch <- c.depth
	ch <- c.capacity
	ch <- c.breakerState
	ch <- c.breakerFailures
	ch <- c.breakerOpened
	ch <- c.breakerRejected
}

// Collect implements prometheus.Collector. It costs one snapshot of every
// stream without its state or queue: O(streams).
func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	infos := c.p.Infos(provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	count := make(map[provider.State]int, len(states))
	type key struct{ transport, endpoint, id string }
	type fill struct{ depth, capacity int64 }
	queues := make(map[key]*fill)
	for i := range infos {
		in := &infos[i]
		count[in.Status.State]++
		if in.Status.State.Terminal() {
			continue
		}
		k := key{in.Transport.Kind, c.o.endpoints.label(in.Endpoint), ""}
		if c.o.opts.PerStream {
			k.id = in.StreamID
		}
		f := queues[k]
		if f == nil {
			f = &fill{}
			queues[k] = f
		}
		f.depth += in.Stats.QueuedChunks
		f.capacity += int64(in.QueueCapacity)
	}
	for _, st := range states {
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(count[st]), string(st))
	}
	for k, f := range queues {
		lv := []string{k.transport, k.endpoint}
		if c.o.opts.PerStream {
			lv = append(lv, k.id)
		}
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(f.depth), lv...)
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(f.capacity), lv...)
	}
	// The origins are bounded by the breaker (breaker.DefaultMaxOrigins,
	// only those that failed lately) and by the egress policy.
	for _, b := range c.p.Breakers() {
		ch <- prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, breakerValue[b.State], b.Origin)
		ch <- prometheus.MustNewConstMetric(c.breakerFailures, prometheus.GaugeValue, float64(b.Failures), b.Origin)
	}
	opened, rejected := c.p.BreakerCounts()
	ch <- prometheus.MustNewConstMetric(c.breakerOpened, prometheus.CounterValue, float64(opened))
	ch <- prometheus.MustNewConstMetric(c.breakerRejected, prometheus.CounterValue, float64(rejected))
}
