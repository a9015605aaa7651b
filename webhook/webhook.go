// Package webhook is skillreg's GitHub webhook intake: it bounds the body,
// checks the signature before anything else, parses the event, deduplicates
// by delivery id, and then only asks for work: syncs of the git sources the
// event moves, updates of the releases cache, and, for a GitHub App's
// organisation events (repository, installation,
// installation_repositories, and a push to a repository no source
// follows), a fresh look by discovery. It never runs git, indexing or a
// GitHub API call itself: the registry's queue and discovery's background
// work take its requests, so it answers at once whatever they are doing.
//
// The package declares the small interfaces it needs (Sources, Syncer,
// Releases, Discovery, DeliveryLog) with plain types; cmd plugs in the
// registry, the releases cache, discovery and the store.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/netlimit"
	"github.com/skillreg/skillreg/peers"
)

// Path is where Register mounts the endpoint.
const Path = "/webhooks/github"

// MaxBodyBytes is the largest body accepted: GitHub caps payloads at 25 MiB.
const MaxBodyBytes int64 = 25 << 20

// Bounds on the shape of a signed payload, checked before any decoder sees
// it: GitHub's payloads nest a dozen levels at most and hold far fewer
// values than their 25 MiB allow, while a decoder that recurses per level or
// allocates per value would let one body take the stack or the heap. A form
// body holds one field (payload) when GitHub sends it.
const (
	MaxPayloadDepth  = 64
	MaxPayloadTokens = jsonbound.DefaultMaxTokens
	MaxFormFields    = 64
)

// DefaultRefreshTimeout bounds one background Releases.Refresh when
// Options.RefreshTimeout is zero.
const DefaultRefreshTimeout = 30 * time.Second

// The outcomes of a delivery, as recorded in Delivery.Outcome and passed to
// Options.Metrics.
const (
	OutcomePing         = "ping"         // 200 with the hook id
	OutcomeAccepted     = "accepted"     // 202: syncs or a release-cache update were asked for, or an installation event that Discovery does not take was passed to Options.Installations
	OutcomeDiscovery    = "discovery"    // 202: passed on to Discovery (a repository or installation change, or a push to a repository no source follows)
	OutcomeUntracked    = "untracked"    // 204: no source tracks what the event moved
	OutcomeIgnored      = "ignored"      // 204: an event or action skillreg does not act on, or a draft release
	OutcomeMalformed    = "malformed"    // 400: signed, but not a payload of its event
	OutcomeTooComplex   = "too_complex"  // 400: signed, but over MaxPayloadDepth, MaxPayloadTokens or MaxFormFields
	OutcomeUnsupported  = "unsupported"  // 415: signed, but neither JSON nor a form
	OutcomeUnauthorized = "unauthorized" // 401: missing or wrong signature (metrics only, never recorded)
	OutcomeTooLarge     = "too_large"    // 413: body over MaxBodyBytes (metrics only, never recorded)
	OutcomeBadRequest   = "bad_request"  // 400: the body could not be read (metrics only, never recorded)
	OutcomeBusy         = "busy"         // 503: no body budget left in time (metrics only, never recorded)
	OutcomeTooSlow      = "too_slow"     // 408: the body arrived too slowly (metrics only, never recorded)
)

const (
	otherEvent        = "other" // metric label for event names GitHub does not define
	defaultGitHubHost = "github.com"
	contentTypeJSON   = "application/json"
	contentTypeForm   = "application/x-www-form-urlencoded"
	formPayloadField  = "payload"
)

// ErrNoSecret is returned by New when neither a webhook secret nor a peer
// secret is configured: the endpoint must then not be mounted, since
// unsigned deliveries are never accepted.
var ErrNoSecret = errors.New("webhook: no secret configured")

// Errors a delivery can fail with; httpStatus maps them to HTTP.
var (
	errTooLarge     = errors.New("body too large")
	errUnauthorized = errors.New("signature missing or invalid")
	errUnreadable   = errors.New("body unreadable")
	errMalformed    = errors.New("malformed payload")
	errTooComplex   = errors.New("payload over bounds")
	errUnsupported  = errors.New("unsupported content type")
)

// Syncer asks for a sync of one source. The handler calls RequestSync on
// the request path, once per source a delivery moves, so it must only
// queue the request and return (the registry's does): the Syncer's queue is
// where requests for one source coalesce.
type Syncer interface {
	RequestSync(source string, reason string)
}

// Releases is the releases cache. The handler calls it for every release
// event it acts on, whichever repository it names (the skill-meta tool may
// follow repositories that no source tracks); an implementation ignores
// repositories it does not follow. repo is "owner/name" as GitHub spells it.
//
// Put records a published, non-draft, non-prerelease release from the
// payload; it is called synchronously and must not touch the network. An
// edited old release is Put too, so Put keeps the newest by publishedAt
// (publishedAt is zero when the payload has none). Refresh looks the latest
// release up again; it runs in the background, after a release was deleted,
// unpublished, or edited into a prerelease.
type Releases interface {
	Put(repo, tag, htmlURL string, publishedAt time.Time)
	Refresh(ctx context.Context, repo string) error
}

// Options configures a Handler. Secrets or PeerSecrets is required.
type Options struct {
	// Secrets are the webhook secrets; a delivery signed with any of them
	// passes (see ParseSecrets). Empty strings are ignored. Without any,
	// only relays from peers are accepted.
	Secrets []string
	// PeerSecrets are the secrets relays from peers are checked against
	// (relay.go); without any, relays are refused.
	PeerSecrets []string
	// Instance is this replica's instance id: a relay from it is its own,
	// answered peers.OutcomeSelf and not applied.
	Instance string
	// Relay, when set, is handed every delivery from GitHub that asked
	// for work (outcome accepted or discovery), redeliveries too, to send
	// to the peers; never a relayed one. It is called on the request path
	// and must return at once (peers.Relay.Send does).
	Relay Relay
	// RelayMetrics, when set, is called once per relay received with its
	// outcome (the delivery's, or OutcomeSelf, OutcomeDuplicate,
	// OutcomeUnauthorized, ...).
	RelayMetrics func(outcome string)
	// Sources lists the git sources to match; nil means none.
	Sources Sources
	// Syncer receives the sync requests; nil drops them.
	Syncer Syncer
	// Releases is the releases cache; nil skips release-cache updates.
	Releases Releases
	// Discovery receives the repository, installation and
	// installation_repositories events, and pushes to repositories no
	// source follows; nil ignores them (no source is discovered).
	Discovery Discovery
	// Installations, when set, is told of each installation event whose
	// action (created, deleted, suspend, unsuspend,
	// new_permissions_accepted) makes what the GitHub App holds for the
	// account stale, whether or not Discovery is set, and before
	// Discovery is; ev.Repos is empty. It is called on the request path
	// and must return at once. nil tells no one.
	Installations func(ev InstallationEvent)
	// Log records deliveries; nil means a NewMemoryLog(DefaultLogSize).
	Log DeliveryLog
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
	// GitHubHost is the host repository.full_name is read against when
	// matching source URLs (default "github.com"; set it for Enterprise).
	GitHubHost string
	// Now gives the time recorded for a delivery; nil means time.Now.
	Now func() time.Time
	// Metrics, when set, is called once per request with the event name
	// (or "other" for names GitHub does not define) and the outcome. It is
	// called on the request path and must be fast.
	Metrics func(event, outcome string)
	// RefreshTimeout bounds one background Releases.Refresh (default
	// DefaultRefreshTimeout).
	RefreshTimeout time.Duration
	// Budget bounds the body bytes held across all requests (shared with
	// the other endpoints); a delivery that cannot get budget in time is
	// answered 503 with Retry-After. nil reads without a shared bound
	// (each body is still grown only as its bytes arrive).
	Budget *netlimit.Budget
	// Context, once done, stops the handler asking for syncs and cancels
	// its background refreshes, as Close does. A daemon that replaces
	// handlers on reload passes one context to all of them and ends it as
	// it shuts down, before the Syncer stops, so that no handler, current
	// or replaced, hands a request to a stopping Syncer. nil means none.
	Context context.Context
}

// Handler is the webhook endpoint. Create it with New, mount it with
// Register, and Close it after the HTTP server has stopped.
type Handler struct {
	secrets   [][]byte
	peerSecs  [][]byte
	instance  string
	relay     Relay
	relayed   func(outcome string)
	sources   Sources
	releases  Releases
	discovery Discovery
	log       DeliveryLog
	logger    *slog.Logger
	host      string
	now       func() time.Time
	metrics   func(event, outcome string)
	budget    *netlimit.Budget

	// installations is Options.Installations.
	installations func(ev InstallationEvent)

	syncer  Syncer
	refresh *refresher
	stop    context.Context // Options.Context
	cancel  context.CancelFunc
	once    sync.Once
	closed  atomic.Bool // set by Close: no more sync requests

	mu       sync.Mutex
	inFlight map[string]struct{} // delivery ids being handled
}

// New returns a Handler, or ErrNoSecret when opts has no secret. It starts
// no goroutine: release refreshes run in the background only once a
// delivery asks for one, and Close stops them.
func New(opts Options) (*Handler, error) {
	var secrets [][]byte
	for _, s := range opts.Secrets {
		if s != "" {
			secrets = append(secrets, []byte(s))
		}
	}
	var peerSecs [][]byte
	for _, s := range opts.PeerSecrets {
		if s != "" {
			peerSecs = append(peerSecs, []byte(s))
		}
	}
	if len(secrets) == 0 && len(peerSecs) == 0 {
		return nil, ErrNoSecret
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	syncer := opts.Syncer
	if syncer == nil {
		syncer = discardSyncer{}
	}
	log := opts.Log
	if log == nil {
		log = NewMemoryLog(DefaultLogSize)
	}
	host := gitref.HostOf(opts.GitHubHost)
	if host == "" {
		host = defaultGitHubHost
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	timeout := opts.RefreshTimeout
	if timeout <= 0 {
		timeout = DefaultRefreshTimeout
	}
	stop := opts.Context
	if stop == nil {
		stop = context.Background()
	}
	ctx, cancel := context.WithCancel(stop)
	h := &Handler{
		secrets:   secrets,
		peerSecs:  peerSecs,
		instance:  opts.Instance,
		relay:     opts.Relay,
		relayed:   opts.RelayMetrics,
		sources:   opts.Sources,
		releases:  opts.Releases,
		discovery: opts.Discovery,
		log:       log,
		logger:    logger,
		host:      host,
		now:       now,
		metrics:   opts.Metrics,
		budget:    opts.Budget,
		syncer:    syncer,
		stop:      stop,
		cancel:    cancel,
		inFlight:  make(map[string]struct{}),
	}
	h.installations = opts.Installations
	h.refresh = &refresher{
		releases: opts.Releases,
		request:  h.requestSyncs,
		logger:   logger,
		timeout:  timeout,
		ctx:      ctx,
		running:  make(map[string]*refreshJob),
	}
	h.refresh.idle = sync.NewCond(&h.refresh.mu)
	return h, nil
}

// Register mounts the handler at POST Path.
func (h *Handler) Register(e *echo.Echo) {
	e.POST(Path, h.Handle)
}

// Close cancels background release refreshes and waits for them; from then
// on the handler asks the Syncer for nothing, neither for the syncs a
// cancelled refresh was to be followed by nor for deliveries handled
// afterwards. Call it after the HTTP server has shut down and before the
// Syncer stops, so a stopping registry is handed no request that it could
// only start and cancel.
func (h *Handler) Close() {
	h.once.Do(func() {
		h.closed.Store(true)
		h.cancel()
		h.refresh.wait()
	})
}

// Drain waits for the release refreshes running now to finish (each
// bounded by RefreshTimeout) and to ask for the syncs that follow them.
// Call it on a handler that a new one replaced. It cancels nothing: a
// delivery already inside the handler may still reach it after Drain, and
// was (or will be) answered 202 naming its sources, which GitHub will not
// redeliver; so a refresh such a delivery starts still runs to completion
// and asks for its syncs, as it would have before the reload. Only Close
// or the end of Options.Context cancels; the daemon still Closes every
// handler it replaced before its Syncer stops.
func (h *Handler) Drain() {
	h.refresh.wait()
}

// Reply is the JSON body of a 200 or 202 answer.
type Reply struct {
	Delivery   string   `json:"delivery,omitempty"`
	Event      string   `json:"event"`
	Outcome    string   `json:"outcome"`
	Redelivery bool     `json:"redelivery,omitempty"`
	HookID     int64    `json:"hook_id,omitempty"` // ping only
	Sources    []string `json:"sources"`           // the sources asked to sync
}

// Handle is the echo handler for one delivery.
// A request carrying a relay header is a relay from a peer (relay.go):
// checked against the peer secrets, never against the webhook secrets.
func (h *Handler) Handle(c echo.Context) error {
	start := time.Now()
	req := c.Request()
	event := req.Header.Get(github.EventTypeHeader)
	id := req.Header.Get(github.DeliveryIDHeader)
	if isRelay(req) {
		return h.handleRelay(c, start, event, id)
	}

	body, release, err := h.authenticate(c)
	defer release()
	if err != nil {
		return h.refuse(c, event, id, err)
	}

	redelivery := h.begin(id)
	defer h.end(id)
	return h.deliver(c, start, event, id, body, redelivery, "")
}

// refuse answers a delivery that failed before it was authenticated.
func (h *Handler) refuse(c echo.Context, event, id string, err error) error {
	status, outcome := httpStatus(err)
	h.count(event, outcome)
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", h.budget.RetryAfter())
	}
	// The delivery id and event are the caller's claim; log them for
	// the operator, but nothing else about the request.
	h.logger.Warn("webhook refused", "event", event, "delivery", id, "status", status, "err", err)
	return c.NoContent(status)
}

// deliver parses, applies, records and answers an authenticated
// delivery that begin marked. from is the peer's instance id for a relay
// ("" for a delivery from GitHub, which is relayed to the peers when it
// asks for work).
func (h *Handler) deliver(c echo.Context, start time.Time, event, id string, body []byte, redelivery bool, from string) error {
	req := c.Request()

	rec := Delivery{ID: id, Event: event, At: h.now(), Redelivery: redelivery}
	p, err := parse(event, req.Header.Get(echo.HeaderContentType), body)
	if err != nil {
		status, outcome := httpStatus(err)
		rec.Outcome = outcome
		h.record(rec)
		h.count(event, outcome)
		h.logger.Warn("webhook payload refused", "event", event, "delivery", id, "redelivery", redelivery, "status", status, "err", err, "relayed_from", from)
		h.countRelay(from, outcome)
		return c.JSON(status, map[string]string{"error": err.Error()})
	}

	rep := h.apply(p, id, redelivery)
	rec.Action, rec.Repo, rec.Outcome, rec.Sources = p.action, p.repo.fullName, rep.Outcome, rep.Sources
	h.record(rec)
	h.count(event, rep.Outcome)
	h.countRelay(from, rep.Outcome)
	worked := rep.Outcome == OutcomeAccepted || rep.Outcome == OutcomeDiscovery
	if from == "" && worked && h.relay != nil {
		h.relay.Send(event, id, req.Header.Get(echo.HeaderContentType), body)
	}

	attrs := []any{"event", event, "action", p.action, "delivery", id, "repo", p.repo.fullName,
		"outcome", rep.Outcome, "sources", rep.Sources, "dur", time.Since(start)}
	if from != "" {
		attrs = append(attrs, "relayed_from", from)
	}
	switch {
	case redelivery:
		h.logger.Info("webhook redelivery", attrs...)
	case rep.Outcome == OutcomeAccepted || rep.Outcome == OutcomePing || rep.Outcome == OutcomeDiscovery:
		h.logger.Info("webhook delivery", attrs...)
	default:
		h.logger.Debug("webhook delivery", attrs...)
	}

	status := http.StatusNoContent
	switch {
	case redelivery:
		status = http.StatusOK
	case rep.Outcome == OutcomePing:
		status = http.StatusOK
	case rep.Outcome == OutcomeAccepted || rep.Outcome == OutcomeDiscovery:
		status = http.StatusAccepted
	}
	if from != "" {
		c.Response().Header().Set(peers.HeaderOutcome, rep.Outcome)
	}
	if status == http.StatusNoContent {
		return c.NoContent(status)
	}
	rep.Delivery, rep.Event, rep.Redelivery = id, event, redelivery
	return c.JSON(status, rep)
}

// httpStatus is the one place that maps a delivery's failure to an HTTP
// status and an outcome.
func httpStatus(err error) (int, string) {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, OutcomeTooLarge
	case errors.Is(err, netlimit.ErrBusy):
		return http.StatusServiceUnavailable, OutcomeBusy
	case errors.Is(err, netlimit.ErrTooSlow):
		return http.StatusRequestTimeout, OutcomeTooSlow
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, OutcomeUnauthorized
	case errors.Is(err, errUnsupported):
		return http.StatusUnsupportedMediaType, OutcomeUnsupported
	case errors.Is(err, errTooComplex):
		return http.StatusBadRequest, OutcomeTooComplex
	case errors.Is(err, errMalformed):
		return http.StatusBadRequest, OutcomeMalformed
	default:
		return http.StatusBadRequest, OutcomeBadRequest
	}
}

// authenticate bounds and reads the body and checks its signature. A
// Content-Length over the limit is refused before reading anything, and a
// missing or ill-formed signature before reading the body. The buffer
// grows only as bytes arrive (a Content-Length is a claim, not bytes), each
// growth paid from the shared budget; a body is read at most one byte past
// the limit. The caller calls release once done with the body.
func (h *Handler) authenticate(c echo.Context) (body []byte, release func(), err error) {
	release = func() {}
	req := c.Request()
	if req.ContentLength > MaxBodyBytes {
		return nil, release, fmt.Errorf("content length %d: %w", req.ContentLength, errTooLarge)
	}
	sig := req.Header.Get(github.SHA256SignatureHeader)
	if len(h.secrets) == 0 || !wellFormedSignature(sig) {
		return nil, release, errUnauthorized
	}
	body, release, err = h.readBody(c)
	if err != nil {
		return nil, release, err
	}
	if !verify(sig, body, h.secrets) {
		return nil, release, errUnauthorized
	}
	return body, release, nil
}

// readBody reads a signed request's body within MaxBodyBytes, paid from
// the shared budget; the caller calls release once done with it.
func (h *Handler) readBody(c echo.Context) (body []byte, release func(), err error) {
	req := c.Request()
	// The underlying ResponseWriter lets net/http close the connection
	// after a 413 instead of draining the rest of the body.
	limited := http.MaxBytesReader(c.Response().Writer, req.Body, MaxBodyBytes)
	body, release, err = h.budget.ReadAll(req.Context(), limited, MaxBodyBytes)
	switch {
	case errors.Is(err, netlimit.ErrTooLarge):
		return nil, release, errTooLarge
	case errors.Is(err, netlimit.ErrBusy):
		return nil, release, fmt.Errorf("read body: %w", err)
	case err != nil:
		return nil, release, fmt.Errorf("read body: %w: %w", errUnreadable, err)
	}
	return body, release, nil
}

// begin marks a delivery id as being handled and reports whether it is a
// redelivery: recorded before, or being handled right now (so two copies
// racing each other still apply a release change once).
func (h *Handler) begin(id string) bool {
	if id == "" {
		return false
	}
	h.mu.Lock()
	_, busy := h.inFlight[id]
	h.inFlight[id] = struct{}{}
	h.mu.Unlock()
	if busy {
		return true
	}
	seen, err := h.log.Seen(id)
	if err != nil {
		// Handle it as new: at worst a redelivered release is Put again.
		h.logger.Error("delivery log lookup failed", "delivery", id, "err", err)
		return false
	}
	return seen
}

// end forgets an id begin marked; the delivery log remembers it from now on.
// A racing copy may have re-marked it, which is harmless: it was recorded
// before either copy ends.
func (h *Handler) end(id string) {
	if id == "" {
		return
	}
	h.mu.Lock()
	delete(h.inFlight, id)
	h.mu.Unlock()
}

func (h *Handler) record(d Delivery) {
	if err := h.log.Record(d); err != nil {
		h.logger.Error("delivery log write failed", "delivery", d.ID, "event", d.Event, "err", err)
	}
}

func (h *Handler) count(event, outcome string) {
	if h.metrics == nil {
		return
	}
	if github.EventForType(event) == nil {
		event = otherEvent
	}
	h.metrics(event, outcome)
}

func (h *Handler) targets() []Target {
	if h.sources == nil {
		return nil
	}
	return h.sources.Targets()
}

// apply acts on a parsed delivery: it asks for syncs and release-cache
// updates, and says what it did.
func (h *Handler) apply(p *payload, id string, redelivery bool) Reply {
	reason := "webhook " + p.event
	if p.action != "" {
		reason += " " + p.action
	}
	if p.ref != "" {
		reason += " " + p.ref
	}
	if id != "" {
		reason += " (delivery " + id + ")"
	}

	switch p.event {
	case "ping":
		return Reply{Outcome: OutcomePing, HookID: p.hookID, Sources: []string{}}
	case "push", "create", "delete":
		if p.ref == "" {
			return Reply{Outcome: OutcomeIgnored, Sources: []string{}}
		}
		var hit []Target
		for _, t := range sameRepo(h.targets(), p.repo, h.host) {
			if refAffects(t, p.ref, p.repo.defaultBranch) {
				hit = append(hit, t)
			}
		}
		srcs := names(hit)
		if len(srcs) == 0 {
			if ev := h.pushedToUntracked(p); ev != nil {
				h.tellRepository(*ev)
				return Reply{Outcome: OutcomeDiscovery, Sources: srcs}
			}
			return Reply{Outcome: OutcomeUntracked, Sources: srcs}
		}
		h.requestSyncs(srcs, reason)
		return Reply{Outcome: OutcomeAccepted, Sources: srcs}
	case "release":
		return h.applyRelease(p, reason, redelivery)
	case "repository":
		return h.applyRepository(p, reason)
	case "installation", "installation_repositories":
		return h.applyInstallation(p)
	}
	return Reply{Outcome: OutcomeIgnored, Sources: []string{}}
}

// applyRelease handles the release actions skillreg acts on. A release
// change is applied to the cache before the syncs it affects are asked
// for, so a source pinned to release: latest resolves the new release.
func (h *Handler) applyRelease(p *payload, reason string, redelivery bool) Reply {
	rel := p.release
	ignored := Reply{Outcome: OutcomeIgnored, Sources: []string{}}
	switch p.action {
	case "published", "released", "prereleased", "edited", "deleted", "unpublished":
	default:
		return ignored // created (a draft, or followed by published), and future actions
	}
	if rel.draft && p.action != "unpublished" {
		return ignored
	}

	var onRelease, onSemver []Target
	for _, t := range sameRepo(h.targets(), p.repo, h.host) {
		switch t.Pin.Kind {
		case gitref.Release:
			onRelease = append(onRelease, t)
		case gitref.Semver:
			onSemver = append(onSemver, t)
		}
	}
	srcs := names(append(onRelease, onSemver...))

	cacheTouched := false
	refresh := false
	if h.releases != nil && p.repo.fullName != "" {
		switch p.action {
		case "published", "released", "edited":
			if !rel.prerelease && rel.tag != "" {
				if !redelivery {
					h.releases.Put(p.repo.fullName, rel.tag, rel.htmlURL, rel.publishedAt)
				}
				cacheTouched = true
			} else if p.action == "edited" {
				refresh = true // edited into a prerelease: it may have been the latest
			}
		case "deleted", "unpublished":
			refresh = true
		}
	}

	if refresh {
		h.requestSyncs(names(onSemver), reason)
		h.refresh.schedule(p.repo.fullName, names(onRelease), reason)
		cacheTouched = true
	} else {
		h.requestSyncs(srcs, reason)
	}
	if len(srcs) == 0 && !cacheTouched {
		return Reply{Outcome: OutcomeUntracked, Sources: srcs}
	}
	return Reply{Outcome: OutcomeAccepted, Sources: srcs}
}

// payload is a delivery reduced to what the handler acts on.
type payload struct {
	event   string
	action  string
	repo    repository
	ref     string // full ref name for push, create and delete
	hookID  int64  // ping
	release release

	pushed      *RepoEvent // push: the repository, for ActionPushed
	pushDeleted bool       // push: the ref was deleted
	repoEvent   *RepoEvent // repository: an action Discovery acts on
	// repository edited with changes.default_branch
	defaultBranchChanged bool
	installation         *InstallationEvent // installation, installation_repositories: likewise
	appInstallation      *InstallationEvent // installation: an action Options.Installations is told of
}

type release struct {
	tag         string
	htmlURL     string
	publishedAt time.Time
	draft       bool
	prerelease  bool
}

// parse extracts the JSON payload from a signed body of the given content
// type and reads the fields of the events skillreg acts on. Other events
// are only checked to be JSON, and their action and repository read for the
// delivery log. A form with more than MaxFormFields fields, or a payload
// deeper than MaxPayloadDepth or with more than MaxPayloadTokens values, is
// refused (errTooComplex, wrapping the jsonbound error) before it is
// decoded.
func parse(event, contentType string, body []byte) (*payload, error) {
	media, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("content type %q: %w", contentType, errUnsupported)
	}
	raw := body
	switch media {
	case contentTypeJSON:
	case contentTypeForm:
		// url.ParseQuery allocates per field: count them first.
		if n := bytes.Count(body, []byte("&")) + 1; n > MaxFormFields {
			return nil, fmt.Errorf("form body: %w: %d fields, more than %d", errTooComplex, n, MaxFormFields)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("form body: %w", errMalformed)
		}
		if !form.Has(formPayloadField) {
			return nil, fmt.Errorf("form body without %s field: %w", formPayloadField, errMalformed)
		}
		raw = []byte(form.Get(formPayloadField))
	default:
		return nil, fmt.Errorf("content type %q: %w", media, errUnsupported)
	}
	if err := jsonbound.Check(raw, payloadLimits); err != nil {
		return nil, fmt.Errorf("%s payload: %w: %w", event, errTooComplex, err)
	}
	p := &payload{event: event}
	switch event {
	case "installation", "installation_repositories":
		if err := parseInstallation(p, raw); err != nil {
			return nil, fmt.Errorf("%s payload: %w", event, err)
		}
	case "ping", "push", "create", "delete", "release", "repository":
		ev, err := github.ParseWebHook(event, raw)
		if err != nil {
			return nil, fmt.Errorf("%s payload: %w", event, errMalformed)
		}
		if err := readEvent(p, ev); err != nil {
			return nil, fmt.Errorf("%s payload: %w", event, err)
		}
	default:
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s payload is not JSON: %w", event, errMalformed)
		}
		// Raw values, so that an unexpected shape allocates nothing.
		var head struct {
			Action     json.RawMessage `json:"action"`
			Repository struct {
				FullName json.RawMessage `json:"full_name"`
			} `json:"repository"`
		}
		// Best effort, for the log only: an unexpected shape is not an
		// error for an event skillreg ignores.
		_ = json.Unmarshal(raw, &head)
		_ = json.Unmarshal(head.Action, &p.action)
		_ = json.Unmarshal(head.Repository.FullName, &p.repo.fullName)
	}
	return p, nil
}

var payloadLimits = jsonbound.Limits{MaxDepth: MaxPayloadDepth, MaxTokens: MaxPayloadTokens}

// readEvent copies what the handler needs out of a go-github event value;
// an error (wrapping errMalformed) for a repository event that names a
// repository without an id or with a name GitHub cannot have.
func readEvent(p *payload, ev any) error {
	switch e := ev.(type) {
	case *github.PingEvent:
		p.hookID = e.GetHookID()
		if p.hookID == 0 {
			p.hookID = e.GetHook().GetID()
		}
		p.repo = fromRepository(e.GetRepo())
	case *github.PushEvent:
		p.action = e.GetAction()
		p.ref = e.GetRef()
		r := e.GetRepo()
		p.repo = repository{
			fullName:      r.GetFullName(),
			urls:          []string{r.GetCloneURL(), r.GetSSHURL(), r.GetGitURL(), r.GetHTMLURL(), r.GetSVNURL(), r.GetURL()},
			defaultBranch: firstNonEmpty(r.GetDefaultBranch(), r.GetMasterBranch()),
		}
		pushed := fromPushRepo(r)
		p.pushed, p.pushDeleted = &pushed, e.GetDeleted()
	case *github.CreateEvent:
		p.ref = fullRef(e.GetRefType(), e.GetRef())
		p.repo = fromRepository(e.GetRepo())
		if p.repo.defaultBranch == "" {
			p.repo.defaultBranch = e.GetMasterBranch()
		}
	case *github.DeleteEvent:
		p.ref = fullRef(e.GetRefType(), e.GetRef())
		p.repo = fromRepository(e.GetRepo())
	case *github.ReleaseEvent:
		p.action = e.GetAction()
		p.repo = fromRepository(e.GetRepo())
		r := e.GetRelease()
		p.release = release{
			tag:         r.GetTagName(),
			htmlURL:     r.GetHTMLURL(),
			publishedAt: r.GetPublishedAt().Time,
			draft:       r.GetDraft(),
			prerelease:  r.GetPrerelease(),
		}
	case *github.RepositoryEvent:
		return readRepositoryEvent(p, e)
	}
	return nil
}

func fromRepository(r *github.Repository) repository {
	return repository{
		fullName:      r.GetFullName(),
		urls:          []string{r.GetCloneURL(), r.GetSSHURL(), r.GetGitURL(), r.GetHTMLURL(), r.GetSVNURL()},
		defaultBranch: firstNonEmpty(r.GetDefaultBranch(), r.GetMasterBranch()),
	}
}

// fullRef turns a create or delete event's short ref into a full ref name;
// "" for a repository creation or an unknown kind.
func fullRef(refType, ref string) string {
	if ref == "" {
		return ""
	}
	switch refType {
	case "tag":
		return tagsPrefix + ref
	case "branch":
		return headsPrefix + ref
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

type discardSyncer struct{}

func (discardSyncer) RequestSync(string, string) {}

var _ DeliveryLog = (*MemoryLog)(nil)
