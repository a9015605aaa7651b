// Package ghapp authenticates as a GitHub App: it signs the App's JWT
// (RS256, with the injected clock), finds the App's installation for an
// account (GET /orgs/{owner}/installation, then /users/{owner}/installation,
// cached), mints installation access tokens (POST
// /app/installations/{id}/access_tokens), keeps each until five minutes
// before its expires_at, and gives a REST client per account that presents
// the installation's token and, when GitHub answers 401 to a token it
// believed valid, mints once more and retries an idempotent request once.
//
// It is written by hand on net/http, not on ghinstallation: that library
// reads time.Now itself (its JWT and its refresh margin of one minute), so
// neither the margin this package promises nor a test that moves a clock
// could be had through it, and it decodes GitHub's answers without a bound.
//
// The private key, the JWTs and the tokens never appear in an error or a
// log line; Config.OnToken hands each minted token to the caller's
// scrubber.
package ghapp

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// RefreshBefore is how long before its expires_at a token is replaced:
	// a git fetch or an API call that starts with a token always finishes
	// before GitHub stops accepting it (a sync is bounded by a minute by
	// default).
	RefreshBefore = 5 * time.Minute
	// DefaultTimeout bounds each request the App makes for itself
	// (installation lookups, token mints).
	DefaultTimeout = 10 * time.Second
	// notInstalledFor is how long an answer "not installed" for an owner is
	// believed before GitHub is asked again (Forget asks at once): an
	// organisation that installs the App later is found within this long
	// without a webhook, and an owner without the App costs at most two
	// requests per period, however many of its repositories sync.
	notInstalledFor = 10 * time.Minute
	// jwtBackdate and jwtLifetime place the JWT's iat and exp as GitHub
	// advises: iat a minute in the past for clock drift, exp at most ten
	// minutes after now (nine here, so a clock a little ahead of GitHub's
	// still passes).
	jwtBackdate = time.Minute
	jwtLifetime = 9 * time.Minute
	// maxRateWait caps how long a rate-limit answer silences the App's own
	// requests (GitHub's window is an hour).
	maxRateWait = time.Hour + time.Minute
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrNotInstalled means the App is not installed for that owner (or the
	// installation was deleted or suspended): there is no installation
	// token to present.
	ErrNotInstalled = errors.New("GitHub App not installed")
	// ErrRefused means GitHub refused the App's own credentials (HTTP 401
	// to its JWT): the app_id does not match the private key, the key was
	// revoked, or this machine's clock is far from GitHub's.
	ErrRefused = errors.New("GitHub refused the App's credentials")
	// ErrRateLimited means GitHub asked the App to wait.
	ErrRateLimited = errors.New("GitHub API rate limit")
	// ErrUnavailable means GitHub could not be asked or did not answer
	// usefully (network error, timeout, 5xx, a malformed answer).
	ErrUnavailable = errors.New("GitHub API unavailable")
)

// Config configures an App.
type Config struct {
	// APIURL is the REST API base URL (github.api_url): empty means
	// https://api.github.com/; GitHub Enterprise Server is
	// https://HOST/api/v3/.
	APIURL string
	// AppID is the App's numeric id (the JWT's iss).
	AppID int64
	// PrivateKey is the App's private key, PEM (PKCS#1 as GitHub hands it
	// out, or PKCS#8).
	PrivateKey []byte
	// InstallationID, when not zero, is the one installation used for
	// every owner; zero finds the installation per owner.
	InstallationID int64
	// HTTPClient sends the requests; nil means a plain http.Client.
	HTTPClient *http.Client
	// Logger receives debug and warning lines; nil discards them.
	Logger *slog.Logger
	// Now is the clock for the JWT and the tokens' expiry; nil means
	// time.Now.
	Now func() time.Time
	// OnToken receives each minted installation token before anything can
	// present it, for the log scrubber. Nil means nobody is told.
	OnToken func(token string)
	// Timeout bounds each request the App makes for itself; zero means
	// DefaultTimeout.
	Timeout time.Duration
}

// App mints and caches installation tokens. Create it with New; it is safe
// for concurrent use.
type App struct {
	id        int64
	key       *rsa.PrivateKey
	base      *url.URL
	fixed     int64
	http      *http.Client
	log       *slog.Logger
	now       func() time.Time
	onToken   func(string)
	timeout   time.Duration
	userAgent string

	mu     sync.Mutex
	owners map[string]*ownerState // by lower-case login
	insts  map[int64]*installState
	gate   time.Time // no request to GitHub before (a rate limit)
}

// ownerState is what is known of one owner's installation; guarded by
// App.mu.
type ownerState struct {
	id      int64     // 0: not known
	missing time.Time // when GitHub last said "not installed"
	lookup  *flight
}

// installState is one installation's token; guarded by App.mu.
type installState struct {
	token   string
	expires time.Time
	mint    *flight
}

// flight is one request in progress that every caller who needs its
// result waits for: one lookup per owner, one mint per installation.
type flight struct {
	done  chan struct{}
	token string // a mint's token
	err   error
}

// New checks cfg and parses the key. It makes no request.
func New(cfg Config) (*App, error) {
	if cfg.AppID <= 0 {
		return nil, errors.New("GitHub App: app id must be a positive number")
	}
	if cfg.InstallationID < 0 {
		return nil, errors.New("GitHub App: installation id must not be negative")
	}
	key, err := parseKey(cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("GitHub App %d: %w", cfg.AppID, err)
	}
	raw := cfg.APIURL
	if raw == "" {
		raw = "https://api.github.com/"
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.User != nil {
		return nil, fmt.Errorf("GitHub App %d: API URL must be an http(s) URL without credentials", cfg.AppID)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	a := &App{
		id: cfg.AppID, key: key, base: base, fixed: cfg.InstallationID,
		http: cfg.HTTPClient, log: cfg.Logger, now: cfg.Now, onToken: cfg.OnToken, timeout: cfg.Timeout,
		userAgent: "skillreg-ghapp",
		owners:    map[string]*ownerState{},
		insts:     map[int64]*installState{},
	}
	if a.http == nil {
		a.http = &http.Client{}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.onToken == nil {
		a.onToken = func(string) {}
	}
	if a.timeout <= 0 {
		a.timeout = DefaultTimeout
	}
	return a, nil
}

// parseKey reads an RSA private key from PEM. Its errors never quote the
// bytes.
func parseKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("private key: not PEM")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("private key: not a valid PKCS#1 RSA key")
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("private key: not a valid PKCS#8 key")
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("private key: GitHub Apps sign with RSA; this is another kind of key")
		}
		return rk, nil
	}
	return nil, fmt.Errorf("private key: PEM block %q, want \"RSA PRIVATE KEY\"", block.Type)
}

// ID is the App's id.
func (a *App) ID() int64 { return a.id }

// Token returns an installation token for owner's installation, minted if
// none is held or the one held expires within RefreshBefore. Concurrent
// callers share one lookup per owner and one mint per installation. The
// error is ErrNotInstalled when the App has no installation for owner.
func (a *App) Token(ctx context.Context, owner string) (string, error) {
	id, err := a.installation(ctx, owner)
	if err != nil {
		return "", err
	}
	return a.token(ctx, owner, id, "")
}

// Client returns a REST client that authenticates as owner's installation.
// Its requests carry "Authorization: Bearer <token>"; when GitHub answers
// 401 to an idempotent request (GET, HEAD, OPTIONS, PUT, DELETE), the token
// is dropped, one new token is minted and the request is sent once more.
// A request for an owner without an installation fails with
// ErrNotInstalled (the transport's error, nothing sent).
func (a *App) Client(owner string) *http.Client {
	base := a.http.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: &transport{app: a, owner: owner, base: base}, CheckRedirect: a.http.CheckRedirect}
}

// Forget drops what is cached for owner: its installation id and the
// installation's token (the installation was deleted or suspended, or the
// App was installed anew). The next Token asks GitHub again.
func (a *App) Forget(owner string) {
	key := strings.ToLower(owner)
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.fixed
	if o, ok := a.owners[key]; ok {
		if o.id != 0 {
			id = o.id
		}
		delete(a.owners, key)
	}
	if id != 0 {
		delete(a.insts, id)
	}
}

// Invalidate drops owner's installation token if it is still tok (GitHub
// refused it to git: revoked, or this machine's clock behind GitHub's), so
// the next Token mints a new one. A token already replaced is left alone:
// syncs refused with the same token at once mint one new token between
// them, not one each. The installation id is kept.
func (a *App) Invalidate(owner, tok string) {
	if tok == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.fixed
	if o, ok := a.owners[strings.ToLower(owner)]; ok && o.id != 0 {
		id = o.id
	}
	if in := a.insts[id]; in != nil && in.token == tok {
		in.token, in.expires = "", time.Time{}
	}
}

// installation finds owner's installation id: the configured one, the
// cached one, or GitHub's answer.
func (a *App) installation(ctx context.Context, owner string) (int64, error) {
	if a.fixed != 0 {
		return a.fixed, nil
	}
	if !validLogin(owner) {
		return 0, fmt.Errorf("GitHub App %d: %q is not a GitHub account name: %w", a.id, owner, ErrNotInstalled)
	}
	key := strings.ToLower(owner)
	for {
		a.mu.Lock()
		o := a.owners[key]
		if o == nil {
			o = &ownerState{}
			a.owners[key] = o
		}
		switch {
		case o.id != 0:
			a.mu.Unlock()
			return o.id, nil
		case !o.missing.IsZero() && a.now().Before(o.missing.Add(notInstalledFor)):
			a.mu.Unlock()
			return 0, fmt.Errorf("GitHub App %d has no installation for %s: %w", a.id, owner, ErrNotInstalled)
		}
		f := o.lookup
		if f == nil {
			f = &flight{done: make(chan struct{})}
			o.lookup = f
			go a.lookup(context.WithoutCancel(ctx), o, owner, f)
		}
		a.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if f.err != nil {
			return 0, f.err
		}
		// Found: read it from the owner's state (unless Forget dropped it
		// meanwhile, which asks again).
	}
}

// lookup asks GitHub for owner's installation, as an organisation then as
// a user, and records the answer in o.
func (a *App) lookup(ctx context.Context, o *ownerState, owner string, f *flight) {
	id, err := a.findInstallation(ctx, owner)
	a.mu.Lock()
	switch {
	case err == nil:
		o.id = id
	case errors.Is(err, ErrNotInstalled):
		o.missing = a.now()
	}
	o.lookup = nil
	f.err = err
	a.mu.Unlock()
	close(f.done)
}

func (a *App) findInstallation(ctx context.Context, owner string) (int64, error) {
	for _, kind := range []string{"orgs", "users"} {
		var inst installationJSON
		status, err := a.appRequest(ctx, http.MethodGet, a.base.JoinPath(kind, owner, "installation"), &inst)
		if status == http.StatusNotFound {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("GitHub App %d: find the installation for %s: %w", a.id, owner, err)
		}
		if inst.ID <= 0 {
			return 0, fmt.Errorf("GitHub App %d: find the installation for %s: answer without an id: %w", a.id, owner, ErrUnavailable)
		}
		if inst.SuspendedAt != nil {
			return 0, fmt.Errorf("GitHub App %d: the installation for %s is suspended: %w", a.id, owner, ErrNotInstalled)
		}
		a.log.Debug("found the GitHub App's installation", "owner", owner, "installation", inst.ID)
		return inst.ID, nil
	}
	return 0, fmt.Errorf("GitHub App %d has no installation for %s: %w", a.id, owner, ErrNotInstalled)
}

// token returns installation id's token, minting one if none is held, the
// one held is within RefreshBefore of its expiry, or it is stale (GitHub
// refused it: the token the caller presented).
func (a *App) token(ctx context.Context, owner string, id int64, stale string) (string, error) {
	a.mu.Lock()
	in := a.insts[id]
	if in == nil {
		in = &installState{}
		a.insts[id] = in
	}
	if stale != "" && in.token == stale {
		in.token, in.expires = "", time.Time{}
	}
	if in.token != "" && a.now().Before(in.expires.Add(-RefreshBefore)) {
		tok := in.token
		a.mu.Unlock()
		return tok, nil
	}
	f := in.mint
	if f == nil {
		f = &flight{done: make(chan struct{})}
		in.mint = f
		go a.mint(context.WithoutCancel(ctx), in, owner, id, f)
	}
	a.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if f.err == nil {
		// The token just minted, however short its life: minting again
		// would not give a longer one.
		return f.token, nil
	}
	// A failed refresh of a token that is still accepted keeps it: a blip
	// at GitHub must not fail a sync while the token works.
	a.mu.Lock()
	tok, live := in.token, in.token != "" && a.now().Before(in.expires)
	a.mu.Unlock()
	if live && tok != stale {
		a.log.Warn("could not refresh the GitHub App's installation token; using the current one until it expires",
			"owner", owner, "installation", id, "err", f.err)
		return tok, nil
	}
	if errors.Is(f.err, ErrNotInstalled) {
		a.Forget(owner)
	}
	return "", f.err
}

// mint asks GitHub for a new token of installation id and records it in in.
func (a *App) mint(ctx context.Context, in *installState, owner string, id int64, f *flight) {
	tok, expires, err := a.createToken(ctx, id)
	if err == nil {
		a.onToken(tok) // before anyone can present it
	}
	a.mu.Lock()
	if err == nil {
		in.token, in.expires = tok, expires
	}
	in.mint = nil
	f.token, f.err = tok, err
	a.mu.Unlock()
	if err == nil {
		a.log.Debug("minted a GitHub App installation token", "owner", owner, "installation", id, "expires", expires)
	}
	close(f.done)
}

func (a *App) createToken(ctx context.Context, id int64) (string, time.Time, error) {
	var tok tokenJSON
	status, err := a.appRequest(ctx, http.MethodPost, a.base.JoinPath("app", "installations", strconv.FormatInt(id, 10), "access_tokens"), &tok)
	switch {
	case status == http.StatusNotFound:
		return "", time.Time{}, fmt.Errorf("GitHub App %d: installation %d not found: %w", a.id, id, ErrNotInstalled)
	case status == http.StatusForbidden && err != nil && !errors.Is(err, ErrRateLimited):
		// GitHub's answer for a suspended installation.
		return "", time.Time{}, fmt.Errorf("GitHub App %d: installation %d refused (suspended?): %w: %w", a.id, id, ErrNotInstalled, err)
	case err != nil:
		return "", time.Time{}, fmt.Errorf("GitHub App %d: mint a token for installation %d: %w", a.id, id, err)
	}
	expires, perr := time.Parse(time.RFC3339, tok.ExpiresAt)
	if tok.Token == "" || perr != nil {
		return "", time.Time{}, fmt.Errorf("GitHub App %d: mint a token for installation %d: answer without a token or expires_at: %w", a.id, id, ErrUnavailable)
	}
	return tok.Token, expires, nil
}

// validLogin reports whether s can be a GitHub login (letters, digits,
// hyphens; Enterprise also allows underscores), so it is safe in a path.
func validLogin(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return s != "." && s != ".."
}

// transport is Client's RoundTripper.
type transport struct {
	app   *App
	owner string
	base  http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.app.Token(req.Context(), t.owner)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(withToken(req, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !replayable(req) {
		return resp, err
	}
	// GitHub refused a token we held for valid: revoked, or our clock is
	// behind GitHub's. Mint once (unless someone already did) and retry.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	id, err := t.app.installation(req.Context(), t.owner)
	if err != nil {
		return nil, err
	}
	t.app.log.Info("GitHub refused the installation token before its expiry; minting a new one", "owner", t.owner, "installation", id)
	if tok, err = t.app.token(req.Context(), t.owner, id, tok); err != nil {
		return nil, err
	}
	retry := withToken(req, tok)
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		if retry.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return t.base.RoundTrip(retry)
}

// replayable reports whether a request may be sent twice: an idempotent
// method whose body (if any) can be had again.
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	}
	return false
}

func withToken(req *http.Request, tok string) *http.Request {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	if r.Header.Get("Accept") == "" {
		r.Header.Set("Accept", "application/vnd.github+json")
	}
	return r
}
