package peers

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Path is where a peer receives relays: its GitHub webhook endpoint.
const Path = "/webhooks/github"

// Defaults of Options.
const (
	// DefaultTimeout bounds one relay to one peer.
	DefaultTimeout = 2 * time.Second
	// ResolveEvery is how long a dns: peer's addresses are used before
	// they are looked up again (at the next delivery or Refresh).
	ResolveEvery = 30 * time.Second
	// DefaultBudget bounds the body bytes held by relays in flight: two
	// of GitHub's largest (25 MiB) payloads, or thousands of pushes.
	DefaultBudget int64 = 50 << 20
	// MaxInFlight bounds the deliveries being relayed at once, whatever
	// their size.
	MaxInFlight = 64
)

// maxAnswerBytes is how much of a peer's answer is read (and dropped) so
// that its connection can be reused.
const maxAnswerBytes = 4 << 10

// The results of one relay to one peer, as Stats.LastResult and passed to
// Options.Metrics; ResultDropped is a delivery relayed to no one.
const (
	ResultOK      = "ok"      // the peer answered 2xx
	ResultSelf    = "self"    // the address is this replica's own: skipped from now on (until re-resolved)
	ResultRefused = "refused" // the peer answered, but not 2xx (a wrong secret: 401)
	ResultFailed  = "failed"  // no answer: down, unreachable, or not within the timeout
	ResultDropped = "dropped" // over the byte budget or MaxInFlight: the peers converge by polling
)

// Peer is one configured entry: a static base URL, or a DNS name and port
// whose every address is a peer.
type Peer struct {
	URL     string // scheme://host:port, no trailing slash; "" for a DNS peer
	DNSName string
	Port    int
}

func (p Peer) String() string {
	if p.URL != "" {
		return p.URL
	}
	return "dns:" + p.DNSName + ":" + strconv.Itoa(p.Port)
}

// Resolver looks a DNS peer's name up; *net.Resolver is one.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Options configures a Relay. Self and Secret are required.
type Options struct {
	// Self is this replica's instance id, sent as HeaderFrom.
	Self string
	// Secret signs the relays (the first of the peer secrets).
	Secret []byte
	// Peers are the configured entries; this replica may be among them.
	Peers []Peer
	// DNSScheme is the scheme of DNS peers' addresses: "http" (default)
	// or "https", verified against RootCAs with the DNS name as the TLS
	// server name.
	DNSScheme string
	// RootCAs verify https peers; nil means the system roots.
	RootCAs *x509.CertPool
	// Resolver looks DNS peers up; nil means net.DefaultResolver.
	Resolver Resolver
	// Now is the clock DNS peers' re-resolution reads; nil means time.Now.
	Now func() time.Time
	// Timeout bounds one relay to one peer (default DefaultTimeout).
	Timeout time.Duration
	// Budget bounds the body bytes of the relays in flight (default
	// DefaultBudget); a delivery that does not fit is dropped.
	Budget int64
	// Logger receives the relay's logs; nil discards them.
	Logger *slog.Logger
	// Metrics, when set, is called once per relay to a peer with its
	// result, and once with ResultDropped per delivery dropped.
	Metrics func(result string)
}

// Stats is one peer address's relay record, for the sources page.
type Stats struct {
	Peer       string    // the configured entry it comes from
	URL        string    // the base URL relays are sent to
	Self       bool      // it is this replica's own address: skipped
	Sent       uint64    // relays answered 2xx
	Failed     uint64    // relays refused or unanswered
	LastResult string    // one of the Result constants; "" before the first
	LastAt     time.Time // when the last relay to it ended
	LastError  string    // the last failure, for the operator
}

// target is one address relays are sent to.
type target struct {
	peer   string // Peer.String()
	url    string
	client *http.Client
	stats  Stats
}

// Relay sends the deliveries this replica accepts to its peers. Create it
// with New; Send never blocks; Close waits for the relays in flight.
type Relay struct {
	self     string
	secret   []byte
	peers    []Peer
	resolver Resolver
	now      func() time.Time
	timeout  time.Duration
	budget   int64
	logger   *slog.Logger
	metrics  func(string)
	static   *http.Client            // for static peers
	byName   map[string]*http.Client // for each DNS peer: server name NAME
	dnsSch   string

	ctx    context.Context // ends at Close, after the relays in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup

	resolveMu sync.Mutex // one resolution at a time

	mu       sync.Mutex
	closed   bool
	queued   int64 // body bytes held by relays in flight
	inFlight int   // deliveries being relayed
	dropped  uint64
	targets  []*target            // in configured order, then address order
	byKey    map[string]*target   // the same, by peer entry and url
	resolved map[string]time.Time // DNS name: when its addresses were looked up
}

// New returns a Relay for opts. It starts nothing: DNS peers are looked
// up at the first Send or Refresh.
func New(opts Options) (*Relay, error) {
	if opts.Self == "" {
		return nil, errors.New("peers: no instance id")
	}
	if len(opts.Secret) == 0 {
		return nil, errors.New("peers: no peer secret")
	}
	r := &Relay{
		self:     opts.Self,
		secret:   slices.Clone(opts.Secret),
		peers:    slices.Clone(opts.Peers),
		resolver: opts.Resolver,
		now:      opts.Now,
		timeout:  opts.Timeout,
		budget:   opts.Budget,
		logger:   opts.Logger,
		metrics:  opts.Metrics,
		dnsSch:   opts.DNSScheme,
		byName:   map[string]*http.Client{},
		byKey:    map[string]*target{},
		resolved: map[string]time.Time{},
	}
	if r.resolver == nil {
		r.resolver = net.DefaultResolver
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if r.budget <= 0 {
		r.budget = DefaultBudget
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	switch r.dnsSch {
	case "":
		r.dnsSch = "http"
	case "http", "https":
	default:
		return nil, fmt.Errorf("peers: DNS scheme %q is not http or https", r.dnsSch)
	}
	r.static = newClient(opts.RootCAs, "")
	for _, p := range r.peers {
		switch {
		case p.URL != "":
			r.addTarget(p.String(), p.URL, r.static)
		case p.DNSName != "" && p.Port > 0:
			if r.byName[p.DNSName] == nil {
				r.byName[p.DNSName] = newClient(opts.RootCAs, p.DNSName)
			}
		default:
			return nil, fmt.Errorf("peers: %+v is neither a URL nor a DNS name and port", p)
		}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// newClient is an HTTP client for peers: no proxy from the environment
// (peers are replicas on the same network), no redirects followed, TLS
// verified against roots with serverName when set.
func newClient(roots *x509.CertPool, serverName string) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: DefaultTimeout}).DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// addTarget adds an address of a peer entry (once); r.mu held or not
// yet shared. Two entries naming one address (a URL and a DNS name, say)
// are two targets: each is verified as its entry says, and the receiver
// applies the delivery once.
func (r *Relay) addTarget(peer, url string, client *http.Client) {
	key := peer + " " + url
	if _, ok := r.byKey[key]; ok {
		return
	}
	t := &target{peer: peer, url: url, client: client, stats: Stats{Peer: peer, URL: url}}
	r.targets = append(r.targets, t)
	r.byKey[key] = t
}

// Send relays one delivery to every peer but this replica, in the
// background and in parallel; it returns at once. body is copied. A
// delivery over the byte budget (or beyond MaxInFlight) is dropped and
// counted, as is every delivery after Close.
func (r *Relay) Send(event, delivery, contentType string, body []byte) {
	n := int64(len(body))
	r.mu.Lock()
	if r.closed || r.queued+n > r.budget || r.inFlight >= MaxInFlight {
		r.dropped++
		r.mu.Unlock()
		r.count(ResultDropped)
		r.logger.Warn("relay to peers dropped: over the relay budget; the peers converge by polling", "event", event, "delivery", delivery, "bytes", n)
		return
	}
	r.queued += n
	r.inFlight++
	r.wg.Add(1)
	r.mu.Unlock()
	b := bytes.Clone(body) // held until every peer is done
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			r.queued -= n
			r.inFlight--
			r.mu.Unlock()
		}()
		r.Refresh(r.ctx)
		sig := Sign(r.secret, r.self, event, delivery, b)
		var wg sync.WaitGroup
		for _, t := range r.sendTargets() {
			wg.Go(func() { r.sendOne(t, event, delivery, contentType, sig, b) })
		}
		wg.Wait()
	}()
}

// sendTargets are the addresses to send to now: all but this replica's.
func (r *Relay) sendTargets() []*target {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*target
	for _, t := range r.targets {
		if !t.stats.Self {
			out = append(out, t)
		}
	}
	return out
}

func (r *Relay) sendOne(t *target, event, delivery, contentType, sig string, body []byte) {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	result, err := r.post(ctx, t, event, delivery, contentType, sig, body)
	r.mu.Lock()
	st := &t.stats
	st.LastResult, st.LastAt, st.LastError = result, r.now(), ""
	switch result {
	case ResultOK:
		st.Sent++
	case ResultSelf:
		st.Self = true
	default:
		st.Failed++
		if err != nil {
			st.LastError = err.Error()
		}
	}
	r.mu.Unlock()
	r.count(result)
	switch result {
	case ResultOK:
		r.logger.Debug("relayed to peer", "peer", t.url, "event", event, "delivery", delivery)
	case ResultSelf:
		r.logger.Info("peer address is this replica: skipped until it is resolved again", "peer", t.url)
	default:
		r.logger.Warn("relay to peer failed; it converges by polling", "peer", t.url, "event", event, "delivery", delivery, "result", result, "err", err)
	}
}

// post sends one relay and says how it went.
func (r *Relay) post(ctx context.Context, t *target, event, delivery, contentType, sig string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+Path, bytes.NewReader(body))
	if err != nil {
		return ResultFailed, fmt.Errorf("relay request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set(HeaderFrom, r.self)
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set("User-Agent", "skillreg-relay")
	resp, err := t.client.Do(req)
	if err != nil {
		return ResultFailed, fmt.Errorf("relay to %s: %w", t.url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	resp.Body.Close()
	switch {
	case resp.Header.Get(HeaderOutcome) == OutcomeSelf:
		return ResultSelf, nil
	case resp.StatusCode/100 == 2:
		return ResultOK, nil
	default:
		return ResultRefused, fmt.Errorf("relay to %s: answered %s", t.url, resp.Status)
	}
}

// Refresh looks up the DNS peers whose addresses are older than
// ResolveEvery (or were never looked up). An address no longer listed is
// dropped, with its stats; one still listed keeps them, and loses its
// mark as this replica's own, so it is tried again. A failed lookup
// keeps the addresses it had.
func (r *Relay) Refresh(ctx context.Context) {
	r.resolveMu.Lock()
	defer r.resolveMu.Unlock()
	for name, client := range r.byName {
		r.mu.Lock()
		at, ok := r.resolved[name]
		r.mu.Unlock()
		now := r.now()
		if ok && now.Sub(at) < ResolveEvery {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, r.timeout)
		addrs, err := r.resolver.LookupHost(lctx, name)
		cancel()
		if err != nil {
			r.logger.Warn("peers: DNS lookup failed; keeping the addresses known", "peer", name, "err", err)
			r.mu.Lock()
			r.resolved[name] = now // try again in ResolveEvery, not at every delivery
			r.mu.Unlock()
			continue
		}
		r.setAddrs(name, client, addrs, now)
	}
}

// setAddrs replaces the addresses of the DNS peers of name.
func (r *Relay) setAddrs(name string, client *http.Client, addrs []string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolved[name] = now
	type addr struct{ peer, url string }
	want := map[string]addr{} // by target key
	for _, p := range r.peers {
		if p.DNSName != name {
			continue
		}
		for _, a := range addrs {
			u := r.dnsSch + "://" + net.JoinHostPort(a, strconv.Itoa(p.Port))
			want[p.String()+" "+u] = addr{p.String(), u}
		}
	}
	kept := r.targets[:0]
	for _, t := range r.targets {
		key := t.peer + " " + t.url
		if t.client != client {
			kept = append(kept, t)
			continue
		}
		if _, ok := want[key]; ok {
			t.stats.Self = false
			kept = append(kept, t)
			delete(want, key)
			continue
		}
		delete(r.byKey, key)
	}
	r.targets = kept
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.addTarget(want[k].peer, want[k].url, client)
	}
}

// Stats returns every known peer address's record, this replica's own
// (marked Self) included.
func (r *Relay) Stats() []Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Stats, len(r.targets))
	for i, t := range r.targets {
		out[i] = t.stats
	}
	return out
}

// Known is how many peer addresses are known, not counting this
// replica's own once a relay found it.
func (r *Relay) Known() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.targets {
		if !t.stats.Self {
			n++
		}
	}
	return n
}

// Dropped is how many deliveries were relayed to no one (over the budget,
// or after Close).
func (r *Relay) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Close stops taking deliveries and waits for the relays in flight (each
// bounded by the timeout). Safe to call more than once.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	r.cancel()
	r.static.CloseIdleConnections()
	for _, c := range r.byName {
		c.CloseIdleConnections()
	}
}

func (r *Relay) count(result string) {
	if r.metrics != nil {
		r.metrics(result)
	}
}
