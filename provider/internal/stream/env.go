package stream

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/transport/breaker"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// A StreamEnv is what a stream reaches of the provider that hosts it, and
// all it reaches: the provider's lifetime, its logger, the shared circuit
// breakers and run table, the settings a stream reads, the subscribers to
// every stream, and two callbacks into the provider's registry. A stream
// holds no pointer to its Provider; the provider talks to a stream through
// the stream's methods. One env serves all the streams of a provider; it
// is immutable after New.
type StreamEnv struct {
	Ctx context.Context // ends when the provider closes; a stream's ctx derives from it
	Wg  *sync.WaitGroup // counts the streams' goroutines; Close waits for it
	Log *slog.Logger

	Breakers *breaker.Set // one circuit per origin
	Runs     *RunTable    // the transport runs in progress, by stream id (runs.go)

	OutputLimit   int64 // Options.Limits.OutputLimit(): the bound of what is encoded or shown
	AutoConnect   bool  // streams run their transport
	RetryAttempts int   // Options.RetryAttempts, passed to transports
	// IdleTimeout is the default idle timeout (Options.IdleTimeout).
	IdleTimeout time.Duration
	// TransportLog is Options.Logger, which transports receive (nil: none).
	TransportLog *slog.Logger
	Egress       *egress.Policy    // checks every redirect
	Cred         egress.Credential // the auth header, bound to its origin
	Base         http.RoundTripper // carries every stream's requests

	Persistent bool                     // the provider has a store
	Space      persistence.SpaceChecker // the store's, when it can tell; else nil
	Cluster    leases                   // Options.Cluster; nil alone
	Observer   streamObservers          // Options.Observer; nil observes nothing

	// AllSubs are the subscribers to every stream, and ChangeSubs counts
	// the open subscriptions that asked for EventChange (subscribe.go).
	AllSubs    *atomic.Pointer[[]*Subscription]
	ChangeSubs *atomic.Int64

	// Enter counts a goroutine of a stream in wg and reports true, unless
	// the provider is closed (registry.enter).
	Enter func() bool
	// Forget removes a stream that moved to another host from the
	// provider, once its goroutines have exited (registry.forget).
	Forget func(*Stream)
}

// leases is what a stream asks of its provider's Cluster: to give the
// stream up once it has ended, or to forget it once it moved.
type leases interface {
	Release(ctx context.Context, id string, ended bool) error
	Forget(id string)
}

// streamObservers is what a stream asks of its provider's Observer: its
// own StreamObserver.
type streamObservers interface {
	StreamStarted(ctx context.Context, s StreamDesc) StreamObserver
}
