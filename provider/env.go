package provider

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

// A streamEnv is what a stream reaches of the provider that hosts it, and
// all it reaches: the provider's lifetime, its logger, the shared circuit
// breakers and run table, the settings a stream reads, the subscribers to
// every stream, and two callbacks into the provider's registry. A stream
// holds no pointer to its Provider; the provider talks to a stream through
// the stream's methods. One env serves all the streams of a provider; it
// is immutable after New.
type streamEnv struct {
	ctx context.Context // ends when the provider closes; a stream's ctx derives from it
	wg  *sync.WaitGroup // counts the streams' goroutines; Close waits for it
	log *slog.Logger

	breakers *breaker.Set // one circuit per origin
	runs     *runTable    // the transport runs in progress, by stream id (runs.go)

	outputLimit   int64 // Options.Limits.OutputLimit(): the bound of what is encoded or shown
	autoConnect   bool  // streams run their transport
	retryAttempts int   // Options.RetryAttempts, passed to transports
	// idleTimeout is the default idle timeout (Options.IdleTimeout).
	idleTimeout time.Duration
	// transportLog is Options.Logger, which transports receive (nil: none).
	transportLog *slog.Logger
	egress       *egress.Policy    // checks every redirect
	cred         egress.Credential // the auth header, bound to its origin
	base         http.RoundTripper // carries every stream's requests

	persistent bool                     // the provider has a store
	space      persistence.SpaceChecker // the store's, when it can tell; else nil
	cluster    leases                   // Options.Cluster; nil alone
	observer   streamObservers          // Options.Observer; nil observes nothing

	// allSubs are the subscribers to every stream, and changeSubs counts
	// the open subscriptions that asked for EventChange (subscribe.go).
	allSubs    *atomic.Pointer[[]*Subscription]
	changeSubs *atomic.Int64

	// enter counts a goroutine of a stream in wg and reports true, unless
	// the provider is closed (registry.enter).
	enter func() bool
	// forget removes a stream that moved to another host from the
	// provider, once its goroutines have exited (registry.forget).
	forget func(*stream)
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
