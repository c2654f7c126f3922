package tokenreview

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// Defaults of the rates of new-token lookups (see Config.NewTokenRate).
const (
	// DefaultNewTokenRate is the new-token lookups per second /authenticate makes, and
	// separately the public doors make in all: about 2.5 GitHub calls each (GET /user, the
	// membership of each allowed org, GET /user/teams), a fraction of a GitHub App's or
	// OAuth app's hourly budget only if the flood lasts.
	DefaultNewTokenRate = 20.0
	// DefaultClientNewTokenRate is the new-token lookups per second one client address makes
	// at the public doors: a person logs in a few times a day.
	DefaultClientNewTokenRate = 0.5
	// maxClients bounds the per-client limiters kept (an LRU): a client dropped from it starts
	// with a full burst again, which the public doors' overall rate still bounds.
	maxClients = 10000
)

// burst is the bucket size of a rate: five seconds' worth, at least 5.
func burst(perSecond float64) int {
	return max(5, int(math.Ceil(5*perSecond)))
}

// ThrottledError answers a review of a new token (no identity cached) beyond the rate of
// new-token lookups of its door or client address: GitHub is not asked. It is ErrUnavailable
// (503 at /authenticate, whose caller kube-apiserver retries); the public doors answer 429 with
// Retry-After.
type ThrottledError struct {
	// RetryAfter is when the limiter admits the next new token of that client or door.
	RetryAfter time.Duration
	// Client reports a limit of one client address, rather than of the door in all.
	Client bool
}

func (e *ThrottledError) Error() string {
	who := "at this door"
	if e.Client {
		who = "from your address"
	}
	return "[" + ReasonThrottled + "] too many tokens octogate has not seen before " + who + " in a short time: octogate did not ask GitHub about this one; retry in " +
		max(time.Second, e.RetryAfter.Round(time.Second)).String()
}

// Is reports that a throttled review is ErrUnavailable.
func (e *ThrottledError) Is(target error) bool { return target == ErrUnavailable }

// RetryAfterSeconds is the Retry-After header value (RFC 9110 section 10.2.3): whole seconds,
// at least 1.
func (e *ThrottledError) RetryAfterSeconds() string {
	return strconv.Itoa(max(1, int(math.Ceil(e.RetryAfter.Seconds()))))
}

type clientKey struct{}

// FromClient marks ctx as a review at a public door (the token exchange, the proxy) for the
// client at addr: a new token is then looked up within the client's rate and the public doors'
// rate, and never takes a lookup slot /authenticate keeps. An IPv6 address counts by its /64,
// the least a host is given. A zero addr counts as one client of its own.
func FromClient(ctx context.Context, addr netip.Addr) context.Context {
	addr = addr.Unmap()
	p := netip.PrefixFrom(addr, addr.BitLen())
	if addr.Is6() {
		p, _ = addr.Prefix(64)
	}
	return context.WithValue(ctx, clientKey{}, p)
}

// clientFrom is the client of a public door's review, false at /authenticate.
func clientFrom(ctx context.Context) (netip.Prefix, bool) {
	p, ok := ctx.Value(clientKey{}).(netip.Prefix)
	return p, ok
}

// newTokenLimits bound the new-token lookups by door and client.
type newTokenLimits struct {
	authenticate *rate.Limiter // /authenticate in all
	public       *rate.Limiter // the public doors in all
	clientRate   rate.Limit
	mu           sync.Mutex // makes the LRU's get-or-add one step
	clients      *lru.Cache[netip.Prefix, *rate.Limiter]
}

func newNewTokenLimits(cfg Config) (*newTokenLimits, error) {
	all, err := rateOrDefault("NewTokenRate", cfg.NewTokenRate, DefaultNewTokenRate)
	if err != nil {
		return nil, err
	}
	client, err := rateOrDefault("ClientNewTokenRate", cfg.ClientNewTokenRate, DefaultClientNewTokenRate)
	if err != nil {
		return nil, err
	}
	clients, err := lru.New[netip.Prefix, *rate.Limiter](maxClients)
	if err != nil {
		return nil, err
	}
	return &newTokenLimits{
		authenticate: rate.NewLimiter(rate.Limit(all), burst(all)),
		public:       rate.NewLimiter(rate.Limit(all), burst(all)),
		clientRate:   rate.Limit(client),
		clients:      clients,
	}, nil
}

func rateOrDefault(name string, v, def float64) (float64, error) {
	switch {
	case v == 0:
		return def, nil
	case v > 0 && !math.IsInf(v, 1):
		return v, nil
	}
	return 0, fmt.Errorf("tokenreview: %s %v: want a positive number of lookups per second", name, v)
}

// allow takes one new-token lookup from the limits of ctx's door (and client), or answers
// *ThrottledError.
func (l *newTokenLimits) allow(ctx context.Context, now time.Time) error {
	p, public := clientFrom(ctx)
	if !public {
		return take(l.authenticate, now, false)
	}
	l.mu.Lock()
	cl, ok := l.clients.Get(p)
	if !ok {
		cl = rate.NewLimiter(l.clientRate, burst(float64(l.clientRate)))
		l.clients.Add(p, cl)
	}
	l.mu.Unlock()
	if err := take(cl, now, true); err != nil {
		return err
	}
	return take(l.public, now, false)
}

// take is nil with a token of lim taken at now, else how long until one is there.
func take(lim *rate.Limiter, now time.Time, client bool) error {
	if lim.AllowN(now, 1) {
		return nil
	}
	r := lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return &ThrottledError{RetryAfter: wait, Client: client}
}
