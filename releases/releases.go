// Package releases looks up the latest GitHub release of a repository and
// builds the AgentKey skill-meta answer from it.
//
// A Client keeps one cache entry per repository, in memory and through a
// Store, and refreshes it after a TTL with a conditional GET (If-None-Match
// with the stored ETag, so an unchanged answer costs no rate limit). At most
// one request per repository is in flight however many callers ask; every
// request is bounded by a short timeout; rate limits (Retry-After,
// X-RateLimit-Reset) are honoured before GitHub is asked again; GitHub
// errors keep the cached value. Get never waits on the network once a
// repository has been looked up: it answers from the cache and refreshes in
// the background. Release webhooks update the cache through Put (never
// backwards) and Refresh; the Client's Put and Refresh are the methods of
// the webhook package's Releases interface.
package releases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/redact"
)

const (
	// DefaultTTL is how long a looked-up release is served without asking
	// GitHub again (the protocol's recommendation).
	DefaultTTL = 24 * time.Hour
	// DefaultTimeout bounds each request to GitHub.
	DefaultTimeout = 3 * time.Second
)

const (
	// maxRetryWait caps how long a rate-limit answer can silence us: GitHub's
	// primary window is an hour, and a hostile or broken header must not
	// stop lookups for days.
	maxRetryWait = time.Hour + time.Minute
	// defaultRateLimitWait is GitHub's advice when a rate-limit answer has
	// neither Retry-After nor X-RateLimit-Reset: wait at least a minute.
	defaultRateLimitWait = time.Minute
	// errorBackoffBase and errorBackoffMax bound retries after 5xx answers,
	// timeouts and network errors: 30 s doubling up to 15 min.
	errorBackoffBase = 30 * time.Second
	errorBackoffMax  = 15 * time.Minute
	// maxClockSkew is how far in the future a cached fetch time may lie
	// before the entry counts as corrupt.
	maxClockSkew = time.Hour
	// maxBodyBytes bounds what we read from the API (a release with many
	// assets is large; GitHub caps release bodies at 125,000 characters).
	maxBodyBytes = 8 << 20
	// maxBodyDepth and maxBodyValues bound the JSON of an API answer,
	// checked as it is read, before go-github's decoder walks it: a release
	// nests four levels and holds at most a thousand assets of some fifty
	// values each, while go-github's decoder allocates a struct per asset
	// (an answer of empty assets, small in bytes, costs many times its size
	// in memory).
	maxBodyDepth  = 64
	maxBodyValues = 1 << 18
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrNoRelease means the repository has no published, non-prerelease
	// release (GitHub answers 404, which it also does for a repository that
	// does not exist or that the token cannot see).
	ErrNoRelease = errors.New("no published release")
	// ErrRateLimited means GitHub asked us to wait and nothing is cached.
	ErrRateLimited = errors.New("GitHub API rate limit")
	// ErrUnavailable means GitHub could not be asked or did not answer
	// usefully (network error, timeout, 5xx, bad answer) and nothing is
	// cached.
	ErrUnavailable = errors.New("GitHub API unavailable")
	// ErrInvalidRepo means a repository name is not "owner/name".
	ErrInvalidRepo = errors.New("invalid repository name")
	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("releases client closed")
)

// Lookup results reported to Metrics.CacheLookup.
const (
	// LookupFresh counts answers from a cache entry within its TTL.
	LookupFresh = "fresh"
	// LookupStale counts lookups that found an entry past its TTL (then
	// refreshed, or served while GitHub cannot be asked).
	LookupStale = "stale"
	// LookupMiss counts lookups that found nothing cached.
	LookupMiss = "miss"
)

// Upstream results reported to Metrics.UpstreamRequest, one per request
// sent to GitHub.
const (
	// ResultOK is a 200 with a release.
	ResultOK = "ok"
	// ResultNotModified is a 304 to a conditional request.
	ResultNotModified = "not_modified"
	// ResultNotFound is a 404: no release.
	ResultNotFound = "not_found"
	// ResultRateLimited is a 403 or 429 rate-limit answer.
	ResultRateLimited = "rate_limited"
	// ResultServerError is a 5xx answer.
	ResultServerError = "server_error"
	// ResultError is a network error, a timeout, any other status or an
	// answer that does not make sense.
	ResultError = "error"
)

// Metrics receives counters; wire it to Prometheus or anything else.
// Implementations must be safe for concurrent use and must not block.
type Metrics interface {
	// CacheLookup counts a Latest or Get by what the cache held
	// (LookupFresh, LookupStale, LookupMiss).
	CacheLookup(result string)
	// UpstreamRequest counts a request sent to GitHub by its result
	// (ResultOK, ResultNotModified, ...).
	UpstreamRequest(result string)
}

// Options configures a Client. The zero value works: public GitHub, no
// token, an in-memory cache.
type Options struct {
	// APIURL is the REST API base URL, used as is: empty means public
	// GitHub; for GitHub Enterprise Server give "https://HOST/api/v3/".
	// It must not contain credentials.
	APIURL string
	// Token authenticates requests (higher rate limit, private
	// repositories). Optional; it never appears in errors or logs.
	Token string
	// Store persists cache entries; nil means a new MemoryStore.
	Store Store
	// TTL is how long a looked-up release is served without asking GitHub
	// again; zero means DefaultTTL.
	TTL time.Duration
	// Timeout bounds each request to GitHub; zero means DefaultTimeout.
	Timeout time.Duration
	// Logger receives warnings and debug lines; nil discards them.
	Logger *slog.Logger
	// Now is the clock for TTLs and rate-limit windows; nil means time.Now.
	Now func() time.Time
	// HTTPClient sends the requests; nil means a plain http.Client. It is
	// copied, not modified.
	HTTPClient *http.Client
	// Metrics receives counters; nil means none.
	Metrics Metrics
}

// Release is what the Client knows of a repository's latest release. The
// zero value (Tag "") means no release is known: none was published, or
// GitHub could not be asked yet.
type Release struct {
	Tag         string    // tag_name, as on GitHub
	Version     string    // Tag without a leading "v" when that is a semantic version, else ""
	URL         string    // html_url, the release page
	PublishedAt time.Time // published_at, zero when unknown
	FetchedAt   time.Time // when GitHub or a webhook last confirmed it; zero when never
}

// Client looks up latest releases with a cache. Create it with New; it is
// safe for concurrent use. Close stops background refreshes.
type Client struct {
	base    *url.URL // nil: go-github's default
	token   string
	store   Store
	ttl     time.Duration
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
	http    *http.Client
	metrics Metrics

	ctx    context.Context // lifetime of requests; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	entries map[string]*entry
	gate    time.Time // the token's rate limit: no request to GitHub before
	closed  bool
	busy    int        // running fetch loops
	idle    *sync.Cond // signalled when busy drops to zero or a caller joins a follow-up
}

// entry is the in-memory state of one repository; fields other than loadMu
// and saveMu are guarded by Client.mu.
type entry struct {
	loadMu sync.Mutex
	loaded bool
	c      Cached

	attempted    bool      // a lookup finished (either way) in this process
	stale        bool      // Refresh asked; serve c but do not call it fresh
	failures     int       // consecutive failed lookups
	backoffUntil time.Time // after failures; a forced refresh ignores it
	puts         uint64    // Puts applied, to spot ones that land during a request
	inflight     *call
	followUp     *call // a forced refresh waiting for inflight to end
	joins        int   // callers that joined followUp (observed by tests)

	ver      uint64 // bumped on every change of c
	saveMu   sync.Mutex
	savedVer uint64
}

// call is one fetch that callers can wait for.
type call struct {
	forced bool
	done   chan struct{}
	err    error
}

// New returns a Client.
func New(opts Options) (*Client, error) {
	c := &Client{
		token:   opts.Token,
		store:   opts.Store,
		ttl:     opts.TTL,
		timeout: opts.Timeout,
		log:     opts.Logger,
		now:     opts.Now,
		metrics: opts.Metrics,
		entries: make(map[string]*entry),
	}
	if opts.APIURL != "" {
		u, err := url.Parse(opts.APIURL)
		if err != nil {
			return nil, errors.New("releases: api_url is not a URL")
		}
		if u.User != nil {
			return nil, errors.New("releases: api_url must not contain credentials")
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("releases: api_url %q must be an absolute http(s) URL", u.Redacted())
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		c.base = u
	}
	if c.store == nil {
		c.store = NewMemoryStore()
	}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.metrics == nil {
		c.metrics = noMetrics{}
	}
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		copied := *opts.HTTPClient
		hc = &copied
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = limitedTransport{base: base, limit: maxBodyBytes, limits: jsonbound.Limits{MaxDepth: maxBodyDepth, MaxTokens: maxBodyValues}}
	c.http = hc
	c.idle = sync.NewCond(&c.mu)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops background refreshes, cancels requests in flight and waits
// for them to end. Later lookups answer from the cache only.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.Wait()
	return nil
}

// Wait blocks until no lookup is in flight, background refreshes included.
// Tests use it to observe a refresh that Get started.
func (c *Client) Wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.busy > 0 {
		c.idle.Wait()
	}
}

// Latest returns the latest published, non-prerelease release of repo
// ("owner/name"), from the cache while it is fresh, otherwise from GitHub
// (waiting for the one request in flight, at most the timeout). When GitHub
// cannot be asked or fails, a cached release is returned, however old, with
// a nil error. Errors: ErrNoRelease (the repository has none),
// ErrRateLimited or ErrUnavailable (nothing cached and GitHub cannot tell),
// ErrInvalidRepo, or the context's error.
func (c *Client) Latest(ctx context.Context, repo string) (Release, error) {
	key, err := repoKey(repo)
	if err != nil {
		return Release{}, err
	}
	e := c.entryFor(key)
	now := c.now()

	c.mu.Lock()
	snap := e.c
	if c.freshLocked(e, now, c.ttl) {
		c.mu.Unlock()
		c.metrics.CacheLookup(LookupFresh)
		return answer(key, snap, nil)
	}
	c.countLookup(snap)
	if until, why := c.blockedLocked(e, now, false); why != notBlocked {
		c.mu.Unlock()
		return answer(key, snap, blockedErr(key, until, why))
	}
	cl := c.startLocked(key, e, false)
	c.mu.Unlock()

	select {
	case <-cl.done:
	case <-ctx.Done():
		return Release{}, fmt.Errorf("latest release of %s: %w", key, ctx.Err())
	}
	c.mu.Lock()
	snap = e.c
	c.mu.Unlock()
	return answer(key, snap, cl.err)
}

// Get is the non-blocking lookup for answers that must be quick, such as
// the skill-meta tool: it returns the cached release at once and, when the
// entry is older than maxAge (zero or negative means the Client's TTL),
// starts a background refresh. Only the first lookup of a repository in this
// process waits (for the one request in flight, at most the timeout, or
// until ctx ends). It never fails: every problem gives the zero Release
// (or the cached one), and is logged where it happened.
func (c *Client) Get(ctx context.Context, repo string, maxAge time.Duration) Release {
	key, err := repoKey(repo)
	if err != nil {
		c.log.Warn("release lookup refused", "repo", repo, "err", err)
		return Release{}
	}
	if maxAge <= 0 {
		maxAge = c.ttl
	}
	e := c.entryFor(key)
	now := c.now()

	c.mu.Lock()
	snap := e.c
	if c.freshLocked(e, now, maxAge) {
		c.mu.Unlock()
		c.metrics.CacheLookup(LookupFresh)
		return toRelease(snap)
	}
	c.countLookup(snap)
	_, why := c.blockedLocked(e, now, false)
	blocked := why != notBlocked
	if e.attempted || !snap.FetchedAt.IsZero() {
		if !blocked {
			c.startLocked(key, e, false)
		}
		c.mu.Unlock()
		return toRelease(snap)
	}
	if blocked {
		c.mu.Unlock()
		return Release{}
	}
	cl := c.startLocked(key, e, false)
	c.mu.Unlock()

	select {
	case <-cl.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	snap = e.c
	c.mu.Unlock()
	return toRelease(snap)
}

// Refresh asks GitHub now, whatever the TTL, about a repository this
// Client follows (one it has looked up or has a cache entry for; others
// are ignored, since their first lookup asks GitHub anyway). Release
// webhooks call it when a release was deleted, unpublished or edited into
// a prerelease: the new latest is not in the payload. Until it completes,
// the entry no longer counts as fresh, so a concurrent Latest waits for it.
// A request already in flight is not trusted (it may predate the change):
// Refresh waits for it and then sends its own, shared with the Refresh
// calls that arrive meanwhile. The result may be older than the cached
// tag; that is the point. It honours rate limits (ErrRateLimited without
// asking). It returns nil when GitHub answered, "no release" included, and
// otherwise the error that kept GitHub from answering; read the result
// with Latest or Get.
func (c *Client) Refresh(ctx context.Context, repo string) error {
	key, err := repoKey(repo)
	if err != nil {
		return err
	}
	e := c.entryFor(key)
	now := c.now()

	c.mu.Lock()
	if !followedLocked(e) {
		c.mu.Unlock()
		return nil
	}
	if until, why := c.blockedLocked(e, now, true); why != notBlocked {
		c.mu.Unlock()
		return blockedErr(key, until, why)
	}
	e.stale = true
	cl := c.startLocked(key, e, true)
	c.mu.Unlock()

	select {
	case <-cl.done:
		return cl.err
	case <-ctx.Done():
		return fmt.Errorf("refresh latest release of %s: %w", key, ctx.Err())
	}
}

// Put records a published release that a webhook announced (published,
// released or edited; the caller leaves out drafts and prereleases) for a
// repository this Client follows, without asking GitHub. publishedAt is
// the payload's published_at, zero when absent.
//
// It never goes backwards, so a redelivered or reordered old payload cannot
// replace a newer tag. The rule, in order:
//  1. Nothing cached, or the same tag as cached: applied.
//  2. Both published_at known and different: the later one wins (this is
//     GitHub's own default for which release is latest).
//  3. Otherwise both tags semantic versions: the higher one wins.
//  4. Otherwise undecidable: not applied, and a background refresh asks
//     GitHub, which has the last word.
//
// A request in flight that started before an applied Put cannot undo it
// with an older answer. Put never waits on the network.
func (c *Client) Put(repo, tag, htmlURL string, publishedAt time.Time) {
	c.put(repo, tag, htmlURL, publishedAt)
}

// put is Put, reporting whether the release was applied.
func (c *Client) put(repo, tag, htmlURL string, publishedAt time.Time) bool {
	key, err := repoKey(repo)
	if err != nil {
		c.log.Warn("release webhook ignored", "repo", repo, "err", err)
		return false
	}
	e := c.entryFor(key)
	now := c.now()

	c.mu.Lock()
	if !followedLocked(e) {
		c.mu.Unlock()
		c.log.Debug("release webhook for a repository not followed, ignored", "repo", key)
		return false
	}
	if !validTag(tag) || !validPageURL(htmlURL) {
		c.mu.Unlock()
		c.log.Warn("release webhook ignored: invalid tag or html_url", "repo", key)
		return false
	}
	switch order(e.c, tag, publishedAt) {
	case keep:
		c.mu.Unlock()
		c.log.Debug("release webhook older than cached release, ignored", "repo", key, "ref", tag)
		return false
	case unsure:
		if _, why := c.blockedLocked(e, now, true); why == notBlocked {
			c.startLocked(key, e, true)
		}
		c.mu.Unlock()
		c.log.Debug("release webhook not comparable with cached release, asking GitHub", "repo", key, "ref", tag)
		return false
	}
	if e.c.Tag == tag && publishedAt.IsZero() {
		publishedAt = e.c.PublishedAt
	}
	e.c = Cached{
		Tag:            tag,
		HTMLURL:        htmlURL,
		PublishedAt:    publishedAt.UTC(),
		FetchedAt:      now,
		RetryNotBefore: e.c.RetryNotBefore,
	}
	e.puts++
	e.attempted = true
	e.stale = false
	e.ver++
	snap, ver := e.c, e.ver
	c.mu.Unlock()

	c.log.Info("latest release updated from webhook", "repo", key, "ref", tag)
	c.save(key, e, snap, ver)
	return true
}

// followedLocked reports whether the Client has looked e up or holds
// anything about it.
func followedLocked(e *entry) bool {
	return e.attempted || e.inflight != nil || !e.c.FetchedAt.IsZero() || !e.c.RetryNotBefore.IsZero()
}

type verdict int

const (
	replace verdict = iota
	keep
	unsure
)

// order decides whether a release (tag, published) should replace the
// cached one; see Put for the rule.
func order(cur Cached, tag string, published time.Time) verdict {
	switch {
	case cur.Tag == "" || cur.Tag == tag:
		return replace
	case !published.IsZero() && !cur.PublishedAt.IsZero() && !published.Equal(cur.PublishedAt):
		if published.After(cur.PublishedAt) {
			return replace
		}
		return keep
	}
	if cmp, ok := compareVersions(VersionFromTag(tag), VersionFromTag(cur.Tag)); ok {
		if cmp > 0 {
			return replace
		}
		return keep
	}
	return unsure
}

func (c *Client) countLookup(snap Cached) {
	if snap.FetchedAt.IsZero() {
		c.metrics.CacheLookup(LookupMiss)
	} else {
		c.metrics.CacheLookup(LookupStale)
	}
}

func (c *Client) freshLocked(e *entry, now time.Time, ttl time.Duration) bool {
	return !e.stale && !e.c.FetchedAt.IsZero() && now.Sub(e.c.FetchedAt) < ttl
}

// block says why GitHub must not be asked now.
type block int

const (
	notBlocked   block = iota
	blockRate          // a rate limit (the token's, or this repository's)
	blockBackoff       // backing off after failures
	blockClosed        // the Client is closed
)

// blockedLocked reports whether GitHub must not be asked about e now, why,
// and until when: rate limits always count, error backoff unless forced.
func (c *Client) blockedLocked(e *entry, now time.Time, forced bool) (time.Time, block) {
	if c.closed {
		return now, blockClosed
	}
	until := c.gate
	if e.c.RetryNotBefore.After(until) {
		until = e.c.RetryNotBefore
	}
	if now.Before(until) {
		return until, blockRate
	}
	if !forced && now.Before(e.backoffUntil) {
		return e.backoffUntil, blockBackoff
	}
	return time.Time{}, notBlocked
}

func blockedErr(key string, until time.Time, why block) error {
	switch why {
	case blockClosed:
		return fmt.Errorf("latest release of %s: %w", key, ErrClosed)
	case blockRate:
		return fmt.Errorf("latest release of %s: not asking GitHub before %s: %w", key, until.UTC().Format(time.RFC3339), ErrRateLimited)
	}
	return fmt.Errorf("latest release of %s: retrying after failures at %s: %w", key, until.UTC().Format(time.RFC3339), ErrUnavailable)
}

// answer turns an entry into Latest's result.
func answer(key string, snap Cached, fetchErr error) (Release, error) {
	switch {
	case snap.Tag != "":
		return toRelease(snap), nil
	case !snap.FetchedAt.IsZero():
		// GitHub said "no release" (perhaps before, and cannot be asked now).
		return toRelease(snap), fmt.Errorf("latest release of %s: %w", key, ErrNoRelease)
	case fetchErr != nil:
		return Release{}, fetchErr
	}
	return Release{}, fmt.Errorf("latest release of %s: %w", key, ErrUnavailable)
}

func toRelease(c Cached) Release {
	if c.Tag == "" {
		return Release{FetchedAt: c.FetchedAt}
	}
	return Release{
		Tag:         c.Tag,
		Version:     VersionFromTag(c.Tag),
		URL:         c.HTMLURL,
		PublishedAt: c.PublishedAt,
		FetchedAt:   c.FetchedAt,
	}
}

// entryFor returns the entry of key, loading it from the store the first
// time. A corrupt stored entry is deleted and the repository starts empty.
func (c *Client) entryFor(key string) *entry {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &entry{}
		c.entries[key] = e
	}
	loaded := e.loaded
	c.mu.Unlock()
	if loaded {
		return e
	}

	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	c.mu.Lock()
	loaded = e.loaded
	c.mu.Unlock()
	if loaded {
		return e
	}
	cached, ok, err := c.store.LoadRelease(key)
	now := c.now()
	if err == nil && ok {
		err = checkTimes(&cached, now)
	}
	if err != nil {
		c.log.Warn("dropping corrupt release cache entry", "repo", key, "err", err)
		if derr := c.store.DeleteRelease(key); derr != nil {
			c.log.Warn("deleting corrupt release cache entry failed", "repo", key, "err", derr)
		}
		ok = false
	}
	c.mu.Lock()
	if ok {
		e.c = cached
	}
	e.loaded = true
	c.mu.Unlock()
	return e
}

// checkTimes rejects entries whose fetch time lies in the future and caps a
// retry time that lies too far ahead.
func checkTimes(c *Cached, now time.Time) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.FetchedAt.After(now.Add(maxClockSkew)) {
		return fmt.Errorf("%w: fetched in the future", ErrCorruptCache)
	}
	if limit := now.Add(maxRetryWait); c.RetryNotBefore.After(limit) {
		c.RetryNotBefore = limit
	}
	return nil
}

// startLocked returns the call a caller should wait for, starting a fetch
// loop when none runs. A forced call never joins a request already sent.
func (c *Client) startLocked(key string, e *entry, forced bool) *call {
	if c.closed {
		cl := &call{done: make(chan struct{}), err: fmt.Errorf("latest release of %s: %w", key, ErrClosed)}
		close(cl.done)
		return cl
	}
	if e.inflight != nil {
		if e.followUp == nil && !forced {
			return e.inflight
		}
		if e.followUp == nil {
			e.followUp = &call{forced: true, done: make(chan struct{})}
			e.joins = 0
		}
		e.joins++
		c.idle.Broadcast()
		return e.followUp
	}
	cl := &call{forced: forced, done: make(chan struct{})}
	e.inflight = cl
	c.busy++
	go c.run(key, e, cl)
	return cl
}

// run performs cl and then any follow-up queued meanwhile, one at a time.
func (c *Client) run(key string, e *entry, cl *call) {
	for {
		err := c.fetch(key, e, cl.forced)
		c.mu.Lock()
		cl.err = err
		close(cl.done)
		next := e.followUp
		e.followUp, e.inflight = nil, next
		if next == nil {
			c.busy--
			if c.busy == 0 {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		cl = next
	}
}

// outcome is what one request to GitHub told us.
type outcome struct {
	result  string // one of the Result constants
	rel     Cached // for ResultOK
	etag    string
	retryAt time.Time // for ResultRateLimited
	gate    time.Time // the token's limit is spent until then (from any answer)
	err     error
}

// fetch asks GitHub once (if allowed) and applies the answer to e.
func (c *Client) fetch(key string, e *entry, forced bool) error {
	now := c.now()
	c.mu.Lock()
	if until, why := c.blockedLocked(e, now, forced); why != notBlocked {
		c.mu.Unlock()
		return blockedErr(key, until, why)
	}
	etag, puts := e.c.ETag, e.puts
	c.mu.Unlock()

	start := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	o := c.request(ctx, key, etag, now)
	cancel()
	c.metrics.UpstreamRequest(o.result)
	dur := time.Since(start)

	now = c.now()
	c.mu.Lock()
	if o.gate.After(c.gate) {
		c.gate = o.gate
	}
	e.attempted = true
	putLanded := e.puts != puts
	changed := true
	var err error
	switch o.result {
	case ResultOK:
		o.rel.FetchedAt = now
		o.rel.ETag = o.etag
		if !putLanded || order(e.c, o.rel.Tag, o.rel.PublishedAt) == replace {
			o.rel.RetryNotBefore = time.Time{}
			e.c = o.rel
		} else {
			changed = false
		}
		e.stale, e.failures, e.backoffUntil = false, 0, time.Time{}
	case ResultNotModified:
		if !putLanded {
			e.c.FetchedAt = now
			e.c.RetryNotBefore = time.Time{}
		} else {
			changed = false
		}
		e.stale, e.failures, e.backoffUntil = false, 0, time.Time{}
	case ResultNotFound:
		if !putLanded {
			e.c = Cached{FetchedAt: now}
		} else {
			changed = false
		}
		e.stale, e.failures, e.backoffUntil = false, 0, time.Time{}
	case ResultRateLimited:
		if o.retryAt.After(e.c.RetryNotBefore) {
			e.c.RetryNotBefore = o.retryAt
		}
		if o.retryAt.After(c.gate) {
			c.gate = o.retryAt
		}
		err = fmt.Errorf("latest release of %s: not asking GitHub before %s: %w", key, o.retryAt.UTC().Format(time.RFC3339), ErrRateLimited)
	default:
		changed = false
		e.failures++
		backoff := errorBackoffMax
		if e.failures <= 5 {
			backoff = min(errorBackoffBase<<(e.failures-1), errorBackoffMax)
		}
		e.backoffUntil = now.Add(backoff)
		err = fmt.Errorf("latest release of %s: %w: %w", key, ErrUnavailable, o.err)
	}
	tag := e.c.Tag
	var snap Cached
	var ver uint64
	if changed {
		e.ver++
		snap, ver = e.c, e.ver
	}
	c.mu.Unlock()

	switch o.result {
	case ResultOK, ResultNotModified, ResultNotFound:
		c.log.Debug("looked up latest release", "repo", key, "ref", tag, "result", o.result, "dur", dur)
	case ResultRateLimited:
		c.log.Warn("GitHub rate limit, serving cached release", "repo", key, "until", o.retryAt.UTC(), "dur", dur)
	default:
		c.log.Warn("latest release lookup failed, serving cached release", "repo", key, "result", o.result, "dur", dur, "err", o.err)
	}
	if changed {
		c.save(key, e, snap, ver)
	}
	return err
}

// save persists snap unless a later version was saved already, so saves
// racing each other cannot leave an older state on disk.
func (c *Client) save(key string, e *entry, snap Cached, ver uint64) {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	if ver <= e.savedVer {
		return
	}
	if err := c.store.SaveRelease(key, snap); err != nil {
		c.log.Warn("saving release cache entry failed", "repo", key, "err", err)
		return
	}
	e.savedVer = ver
}

// request sends one GET /repos/{key}/releases/latest and classifies the
// answer. A new go-github client per request keeps go-github's own memory
// of rate limits (kept with the wall clock) out of the way: this Client
// keeps that memory itself, with its own clock, and persists it.
func (c *Client) request(ctx context.Context, key, etag string, now time.Time) outcome {
	api := github.NewClient(c.http)
	if c.base != nil {
		api.BaseURL = c.base
	}
	api.UserAgent = "skillreg"
	req, err := api.NewRequest(http.MethodGet, "repos/"+key+"/releases/latest", nil)
	if err != nil {
		return outcome{result: ResultError, err: fmt.Errorf("build request: %w", err)}
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	var rel github.RepositoryRelease
	resp, err := api.Do(ctx, req, &rel)
	if resp == nil || resp.Response == nil {
		if err == nil {
			err = errors.New("no response")
		}
		// net/http quotes a malformed answer in its error: remote text.
		return outcome{result: ResultError, err: c.clean(err)}
	}
	h := resp.Header
	o := outcome{}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, ok := unixHeader(h.Get("X-RateLimit-Reset")); ok && reset.After(now) {
			o.gate = minTime(reset, now.Add(maxRetryWait))
		}
	}
	status := resp.StatusCode
	switch {
	case status == http.StatusOK && err == nil:
		tag, page := rel.GetTagName(), rel.GetHTMLURL()
		if !validTag(tag) || !validPageURL(page) || rel.GetDraft() || rel.GetPrerelease() {
			o.result, o.err = ResultError, errors.New("GitHub answered with an invalid release")
			return o
		}
		o.result = ResultOK
		o.etag = h.Get("ETag")
		if len(o.etag) > 256 || strings.ContainsFunc(o.etag, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			o.etag = ""
		}
		o.rel = Cached{Tag: tag, HTMLURL: page, PublishedAt: rel.GetPublishedAt().Time.UTC()}
	case status == http.StatusNotModified:
		o.result = ResultNotModified
	case status == http.StatusNotFound:
		o.result = ResultNotFound
	case status == http.StatusTooManyRequests || (status == http.StatusForbidden && isRateLimit(err, h)):
		o.result = ResultRateLimited
		o.retryAt = retryAt(h, now)
	case status >= 500:
		o.result, o.err = ResultServerError, fmt.Errorf("GitHub answered %d", status)
	case status == http.StatusOK && isBound(err):
		// Our own bound on the answer's size or shape, broken while
		// go-github read it: say which (the text is ours, not the remote's).
		o.result, o.err = ResultError, fmt.Errorf("GitHub answered %s: %w", redact.Status(resp.Response), boundOf(err))
	default:
		// Never go-github's error here: its ErrorResponse carries the
		// body's message (and errors), which a hostile or misconfigured
		// API endpoint can fill with the Authorization header it got.
		o.result, o.err = ResultError, c.clean(fmt.Errorf("GitHub answered %s", redact.Status(resp.Response)))
	}
	return o
}

// isBound reports whether err is limitedTransport's refusal of an answer.
func isBound(err error) bool { return boundOf(err) != nil }

// boundOf is the bound an answer broke, or nil.
func boundOf(err error) error {
	for _, b := range []error{errBodyTooLarge, jsonbound.ErrTooDeep, jsonbound.ErrTooManyTokens} {
		if errors.Is(err, b) {
			return b
		}
	}
	return nil
}

// maxErrorText bounds remote text in an error.
const maxErrorText = 300

// clean makes an error that may quote the remote safe to show: printable,
// bounded, without the token in any spelling.
func (c *Client) clean(err error) error {
	s := redact.New()
	if c.token != "" {
		s.Add(c.token)
	}
	return s.Clean(err, maxErrorText)
}

// isRateLimit tells a 403 rate-limit answer from a 403 permission answer.
func isRateLimit(err error, h http.Header) bool {
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	return errors.As(err, &rl) || errors.As(err, &abuse) ||
		h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0"
}

// retryAt applies GitHub's advice for rate-limit answers: Retry-After if
// present, else X-RateLimit-Reset when the limit is spent, else a minute.
func retryAt(h http.Header, now time.Time) time.Time {
	t := now.Add(defaultRateLimitWait)
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
			t = now.Add(time.Duration(min(secs, int64(maxRetryWait/time.Second))) * time.Second)
		} else if d, err := http.ParseTime(v); err == nil {
			t = d
		}
	} else if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, ok := unixHeader(h.Get("X-RateLimit-Reset")); ok {
			t = reset
		}
	}
	if t.Before(now.Add(time.Second)) {
		t = now.Add(time.Second)
	}
	return minTime(t, now.Add(maxRetryWait))
}

func unixHeader(v string) (time.Time, bool) {
	secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || secs <= 0 {
		return time.Time{}, false
	}
	return time.Unix(secs, 0), true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

var (
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// repoKey validates "owner/name" and returns it in lower case (GitHub
// names are case-insensitive).
func repoKey(repo string) (string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !ownerRE.MatchString(owner) || !nameRE.MatchString(name) || name == "." || name == ".." {
		return "", fmt.Errorf("%w: %q (want owner/name)", ErrInvalidRepo, repo)
	}
	return strings.ToLower(repo), nil
}

// RepoKey returns the cache key of repo ("owner/name" in lower case), or
// ErrInvalidRepo. Stores and webhooks use it to name the same entry.
func RepoKey(repo string) (string, error) { return repoKey(repo) }

type noMetrics struct{}

func (noMetrics) CacheLookup(string)     {}
func (noMetrics) UpstreamRequest(string) {}

// limitedTransport bounds every response body read through it: its size,
// and the depth and number of values of its JSON.
type limitedTransport struct {
	base   http.RoundTripper
	limit  int64
	limits jsonbound.Limits
}

var errBodyTooLarge = errors.New("GitHub API answer too large")

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit, limit: t.limit, shape: jsonbound.Scanner{Limits: t.limits}}
	return resp, nil
}

type limitedBody struct {
	rc          io.ReadCloser
	left, limit int64
	shape       jsonbound.Scanner
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes", errBodyTooLarge, b.limit)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if n > 0 {
		if k, serr := b.shape.Write(p[:n]); serr != nil {
			return k, fmt.Errorf("GitHub API answer: %w", serr)
		}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
