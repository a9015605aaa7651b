package oidc

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sync/singleflight"
)

// Bounds and defaults of verification.
const (
	// Skew is the clock skew allowed on "exp" and "nbf".
	Skew = 60 * time.Second
	// MaxTokenBytes bounds a token: anything longer is refused unread.
	MaxTokenBytes = 16 << 10

	defaultFetchTimeout    = 10 * time.Second
	defaultRefreshInterval = time.Minute
	defaultKeysMaxAge      = time.Hour
	defaultGroupsClaim     = "groups"
	// maxGroups bounds the groups (and the scopes) one token may carry.
	maxGroups = 1000
)

// allowedAlgorithms are the signature algorithms a token may use: the
// asymmetric ones of RFC 7518 and RFC 8037. "none" and the HMAC family are
// never accepted, so a public key can never be used as an HMAC secret.
var allowedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Verifier validates the provider's tokens. It is safe for concurrent use.
type Verifier struct {
	issuer       string
	discoveryURL string
	audience     string
	groupsClaim  string
	algs         []string
	intro        *IntrospectionConfig
	client       *http.Client
	log          *slog.Logger
	now          func() time.Time
	fetchTimeout time.Duration
	interval     time.Duration
	maxAge       time.Duration
	// backoffMin and backoffMax pace Start's retries.
	backoffMin, backoffMax time.Duration

	flight    singleflight.Group
	startOnce sync.Once
	ready     chan struct{}
	readyOnce sync.Once
	introC    introCache

	mu sync.Mutex
	// meta is the discovery document, kept once fetched.
	meta                *ProviderMetadata
	metaTried           time.Time
	metaErr             error
	keys                []key // nil until the first successful JWKS fetch
	keysTried, kidTried time.Time
	keysErr, kidErr     error
}

// New checks cfg and returns a Verifier. It does no network I/O: discovery
// and the JWKS are fetched by Start, or on first use.
func New(cfg Config) (*Verifier, error) {
	if err := checkURL("issuer", cfg.Issuer); err != nil {
		return nil, err
	}
	if cfg.Audience == "" {
		return nil, errors.New("oidc: an audience is required")
	}
	v := &Verifier{
		issuer:       cfg.Issuer,
		discoveryURL: strings.TrimSuffix(cfg.Issuer, "/") + "/.well-known/openid-configuration",
		audience:     cfg.Audience,
		groupsClaim:  cfg.GroupsClaim,
		client:       cfg.HTTPClient,
		log:          cfg.Logger,
		now:          cfg.Now,
		fetchTimeout: cfg.FetchTimeout,
		interval:     cfg.RefreshInterval,
		maxAge:       cfg.KeysMaxAge,
		backoffMin:   time.Second,
		backoffMax:   time.Minute,
		ready:        make(chan struct{}),
	}
	if v.groupsClaim == "" {
		v.groupsClaim = defaultGroupsClaim
	}
	if v.fetchTimeout <= 0 {
		v.fetchTimeout = defaultFetchTimeout
	}
	if v.interval <= 0 {
		v.interval = defaultRefreshInterval
	}
	if v.maxAge <= 0 {
		v.maxAge = defaultKeysMaxAge
	}
	if v.client == nil {
		v.client = &http.Client{Timeout: v.fetchTimeout}
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.algs = allowedAlgorithms
	if len(cfg.Algorithms) > 0 {
		for _, a := range cfg.Algorithms {
			if !slices.Contains(allowedAlgorithms, a) {
				return nil, fmt.Errorf("oidc: algorithm %q is not allowed (allowed: %s)", a, strings.Join(allowedAlgorithms, ", "))
			}
		}
		v.algs = slices.Clone(cfg.Algorithms)
	}
	if in := cfg.Introspection; in != nil {
		if in.URL != "" {
			if err := checkURL("introspection url", in.URL); err != nil {
				return nil, err
			}
		}
		if in.ClientID == "" {
			return nil, errors.New("oidc: introspection needs a client id")
		}
		c := *in
		if c.CacheTTL == 0 {
			c.CacheTTL = defaultIntrospectionTTL
		}
		v.intro = &c
	}
	return v, nil
}

// checkURL accepts an absolute https URL, or http on a loopback host (a
// provider on the same machine, as in tests): tokens and keys must not
// travel in the clear.
func checkURL(what, raw string) error {
	if raw == "" {
		return fmt.Errorf("oidc: %s is required", what)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("oidc: %s: %w", what, err)
	}
	switch {
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("oidc: %s %q must be an absolute URL without user, query or fragment", what, raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("oidc: %s %q must use https (http only on a loopback address)", what, raw)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start fetches discovery and the JWKS in the background, retrying with
// backoff until both are cached, then refetches the JWKS every
// Config.KeysMaxAge (keeping the cached keys when that fails); ctx ends it.
// Calling it again does nothing. Without Start the first verification
// fetches them, and only unknown key ids refresh them.
func (v *Verifier) Start(ctx context.Context) {
	v.startOnce.Do(func() { go v.run(ctx) })
}

func (v *Verifier) run(ctx context.Context) {
	delay := v.backoffMin
	for {
		wait := v.maxAge
		if err := v.fetchKeys(ctx, true); err != nil {
			v.log.Warn("oidc provider unreachable; retrying", "issuer", v.issuer, "retry", delay.String(), "err", err)
			wait, delay = delay, min(2*delay, v.backoffMax)
		} else {
			delay = v.backoffMin
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Ready is closed once discovery and the JWKS have been fetched.
func (v *Verifier) Ready() <-chan struct{} { return v.ready }

// Metadata returns the provider's discovery document, fetching it if it is
// not cached yet (ErrUnavailable when that fails).
func (v *Verifier) Metadata(ctx context.Context) (ProviderMetadata, error) {
	m, err := v.metadata(ctx, false)
	if err != nil {
		return ProviderMetadata{}, err
	}
	out := *m
	out.ScopesSupported = slices.Clone(m.ScopesSupported)
	out.CodeChallengeMethodsSupported = slices.Clone(m.CodeChallengeMethodsSupported)
	out.IDTokenSigningAlgValuesSupported = slices.Clone(m.IDTokenSigningAlgValuesSupported)
	return out, nil
}

// VerifyAccessToken validates an access token presented to skillreg: a JWT
// signed by the provider for Config.Audience, or, with Config.Introspection,
// an opaque token the provider says is active for it.
func (v *Verifier) VerifyAccessToken(ctx context.Context, raw string) (Claims, error) {
	if err := checkRaw(raw); err != nil {
		return Claims{}, err
	}
	if !looksJWT(raw) {
		if v.intro == nil {
			return Claims{}, refuse("not a JWT, and no introspection is configured")
		}
		return v.introspect(ctx, raw)
	}
	mc, err := v.parse(ctx, raw, v.audience)
	if err != nil {
		return Claims{}, err
	}
	return v.claimsOf(mc)
}

// VerifyIDToken validates an ID token returned to the web sign-in: signed
// by the provider for clientID ("aud", and "azp" when present), and, when
// nonce is not empty, carrying that nonce.
func (v *Verifier) VerifyIDToken(ctx context.Context, raw, clientID, nonce string) (Claims, error) {
	if clientID == "" {
		return Claims{}, refuse("no client id to check the ID token's audience against")
	}
	if err := checkRaw(raw); err != nil {
		return Claims{}, err
	}
	if !looksJWT(raw) {
		return Claims{}, refuse("malformed: an ID token is a JWT")
	}
	mc, err := v.parse(ctx, raw, clientID)
	if err != nil {
		return Claims{}, err
	}
	if azp, ok := mc["azp"]; ok && azp != clientID {
		return Claims{}, refuse("azp names another client")
	}
	if nonce != "" {
		got, _ := mc["nonce"].(string)
		if subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
			return Claims{}, refuse("nonce does not match")
		}
	}
	return v.claimsOf(mc)
}

func checkRaw(raw string) error {
	switch {
	case raw == "":
		return refuse("empty")
	case len(raw) > MaxTokenBytes:
		return refuse(fmt.Sprintf("longer than %d bytes", MaxTokenBytes))
	}
	return nil
}

// looksJWT tells a compact JWS (three dot-separated parts) from an opaque
// token.
func looksJWT(raw string) bool { return strings.Count(raw, ".") == 2 }

// parse checks a JWT's signature, algorithm, iss, aud, exp and nbf.
func (v *Verifier) parse(ctx context.Context, raw, audience string) (jwt.MapClaims, error) {
	p := jwt.NewParser(
		jwt.WithValidMethods(v.algs),
		jwt.WithIssuer(v.issuer),
		jwt.WithAudience(audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(Skew),
		jwt.WithTimeFunc(v.now),
	)
	mc := jwt.MapClaims{}
	_, err := p.ParseWithClaims(raw, mc, func(t *jwt.Token) (any, error) { return v.keyFor(ctx, t) })
	if err != nil {
		return nil, jwtError(err)
	}
	return mc, nil
}

// refusal is an ErrInvalidToken with the check that refused the token. Its
// text never holds the token, nor any claim's value.
type refusal struct{ reason string }

func refuse(reason string) error { return &refusal{reason: reason} }

func (r *refusal) Error() string        { return ErrInvalidToken.Error() + ": " + r.reason }
func (r *refusal) Is(target error) bool { return target == ErrInvalidToken }

// jwtError maps the JWT library's error to ours, naming the check.
func jwtError(err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	if errors.Is(err, ErrUnavailable) {
		// Unwrap the library's wording, keep ours (and its cause).
		var u *unavailable
		if errors.As(err, &u) {
			return u
		}
		return err
	}
	checks := []struct {
		err    error
		reason string
	}{
		{jwt.ErrTokenMalformed, "malformed"},
		{jwt.ErrTokenUnverifiable, "unverifiable (unknown algorithm)"},
		{jwt.ErrTokenSignatureInvalid, "bad signature or algorithm not allowed"},
		{jwt.ErrTokenExpired, "expired"},
		{jwt.ErrTokenNotValidYet, "not valid yet (nbf)"},
		{jwt.ErrTokenInvalidIssuer, "wrong issuer"},
		{jwt.ErrTokenInvalidAudience, "wrong audience"},
		{jwt.ErrTokenRequiredClaimMissing, "a required claim (exp, iss or aud) is missing"},
		{jwt.ErrInvalidType, "a claim has the wrong type"},
	}
	for _, c := range checks {
		if errors.Is(err, c.err) {
			return refuse(c.reason)
		}
	}
	return refuse("invalid")
}

// unavailable is an ErrUnavailable with its cause.
type unavailable struct {
	what string
	err  error
}

// errRefreshedRecently is why an unknown key id waits for the next refresh.
var errRefreshedRecently = errors.New("the key set was refreshed less than a minute ago; try again then")

func unavailableErr(what string, err error) error { return &unavailable{what: what, err: err} }

func (u *unavailable) Error() string {
	return ErrUnavailable.Error() + ": " + u.what + ": " + u.err.Error()
}
func (u *unavailable) Is(target error) bool { return target == ErrUnavailable }
func (u *unavailable) Unwrap() error        { return u.err }

// keyFor finds the cached key the token names and fits its algorithm,
// refreshing the JWKS once when the key id is unknown.
func (v *Verifier) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	alg, _ := t.Header["alg"].(string)
	if !slices.Contains(v.algs, alg) {
		return nil, refuse("algorithm not allowed")
	}
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515 section 4.1.11: extensions the verifier does not
		// understand must be refused, and it understands none.
		return nil, refuse("critical header extensions are not supported")
	}
	kid, ok := t.Header["kid"].(string)
	if _, present := t.Header["kid"]; present && !ok {
		return nil, refuse("malformed: kid is not a string")
	}
	keys, err := v.currentKeys(ctx)
	if err != nil {
		return nil, err
	}
	found, fit := match(keys, kid, alg)
	if len(fit) > 0 {
		return jwt.VerificationKeySet{Keys: fit}, nil
	}
	if found || kid == "" {
		return nil, refuse("no key of the provider fits the token's algorithm")
	}
	refreshed, err := v.refreshForKID(ctx)
	// Match again whatever the refresh said: a fetch that finished between
	// the first look and the refresh may have brought the key.
	keys, kerr := v.currentKeys(ctx)
	if kerr != nil {
		return nil, kerr
	}
	if _, fit = match(keys, kid, alg); len(fit) > 0 {
		return jwt.VerificationKeySet{Keys: fit}, nil
	}
	switch {
	case err != nil:
		return nil, err
	case !refreshed:
		// The key set was refreshed less than a minute ago, so the key may
		// be one the provider has just rotated in: this cannot be decided
		// yet. Refusing it as invalid would turn a forged kid sent just
		// before a real rotation into a minute of 401s (and failed
		// attempts) for every genuine token signed by the new key.
		return nil, unavailableErr("unknown key id", errRefreshedRecently)
	}
	return nil, refuse("unknown key id")
}

// currentKeys returns the cached keys, fetching them if none are cached.
func (v *Verifier) currentKeys(ctx context.Context) ([]key, error) {
	v.mu.Lock()
	keys := v.keys
	v.mu.Unlock()
	if keys != nil {
		return keys, nil
	}
	if err := v.fetchKeys(ctx, false); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys, nil
}

// refreshForKID refetches the JWKS for a key id the cache does not know, at
// most once per interval: concurrent callers share the one fetch, later
// ones within the interval get refreshed == false (or the error of that
// fetch, when the provider could not be reached: they cannot tell a new key
// from a forged id then).
func (v *Verifier) refreshForKID(ctx context.Context) (refreshed bool, err error) {
	res, err := v.shared(ctx, "kid", func(fctx context.Context) (any, error) {
		v.mu.Lock()
		if !v.kidTried.IsZero() && v.now().Sub(v.kidTried) < v.interval {
			err := v.kidErr
			v.mu.Unlock()
			return false, err
		}
		v.kidTried = v.now()
		v.mu.Unlock()
		err := v.fetchKeys(fctx, true)
		v.mu.Lock()
		v.kidErr = err
		v.mu.Unlock()
		return err == nil, err
	})
	if err != nil {
		return false, err
	}
	return res.(bool), nil
}

// shared runs fn once for all concurrent callers with the same name, on a
// context detached from any one caller's (so one caller giving up does not
// fail the others) and bounded by the fetch timeout.
func (v *Verifier) shared(ctx context.Context, name string, fn func(context.Context) (any, error)) (any, error) {
	ch := v.flight.DoChan(name, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*v.fetchTimeout)
		defer cancel()
		return fn(fctx)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, unavailableErr("waiting for the provider", ctx.Err())
	}
}

// fetchKeys fetches the JWKS (and discovery first, if not cached). Without
// force, a failure less than an interval ago is returned again instead of
// asking the provider: a provider that is down is not asked once per
// request.
func (v *Verifier) fetchKeys(ctx context.Context, force bool) error {
	if !force {
		v.mu.Lock()
		if v.keys == nil && v.keysErr != nil && v.now().Sub(v.keysTried) < v.interval {
			err := v.keysErr
			v.mu.Unlock()
			return err
		}
		v.mu.Unlock()
	}
	_, err := v.shared(ctx, "jwks", func(fctx context.Context) (any, error) {
		meta, err := v.metadata(fctx, force)
		if err != nil {
			v.noteKeys(nil, err)
			return nil, err
		}
		keys, err := v.loadJWKS(fctx, meta.JWKSURI)
		v.noteKeys(keys, err)
		return nil, err
	})
	return err
}

func (v *Verifier) noteKeys(keys []key, err error) {
	v.mu.Lock()
	v.keysTried, v.keysErr = v.now(), err
	changed := false
	if err == nil {
		changed = !slices.EqualFunc(v.keys, keys, func(a, b key) bool { return a.id == b.id && a.alg == b.alg })
		v.keys = keys
	}
	v.mu.Unlock()
	if err != nil {
		return
	}
	if changed {
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.id
		}
		v.log.Info("oidc signing keys", "issuer", v.issuer, "kids", ids)
	} else {
		v.log.Debug("oidc signing keys unchanged", "issuer", v.issuer, "keys", len(keys))
	}
	v.readyOnce.Do(func() { close(v.ready) })
}

// metadata returns the cached discovery document or fetches it (see
// fetchKeys for force).
func (v *Verifier) metadata(ctx context.Context, force bool) (*ProviderMetadata, error) {
	v.mu.Lock()
	if m := v.meta; m != nil {
		v.mu.Unlock()
		return m, nil
	}
	if !force && v.metaErr != nil && v.now().Sub(v.metaTried) < v.interval {
		err := v.metaErr
		v.mu.Unlock()
		return nil, err
	}
	v.mu.Unlock()
	res, err := v.shared(ctx, "discovery", func(fctx context.Context) (any, error) {
		m, err := v.discover(fctx)
		v.mu.Lock()
		v.metaTried, v.metaErr = v.now(), err
		if err == nil {
			v.meta = m
		}
		v.mu.Unlock()
		if err == nil {
			v.log.Info("oidc provider discovered", "issuer", v.issuer)
		}
		return m, err
	})
	if err != nil {
		return nil, err
	}
	return res.(*ProviderMetadata), nil
}

func (v *Verifier) discover(ctx context.Context) (*ProviderMetadata, error) {
	body, err := v.get(ctx, v.discoveryURL, maxDiscoveryBytes)
	if err != nil {
		return nil, unavailableErr("discovery", err)
	}
	m, err := decodeMetadata(body, v.issuer)
	if err != nil {
		return nil, unavailableErr("discovery", err)
	}
	return &m, nil
}

func (v *Verifier) loadJWKS(ctx context.Context, jwksURL string) ([]key, error) {
	body, err := v.get(ctx, jwksURL, maxJWKSBytes)
	if err != nil {
		return nil, unavailableErr("jwks", err)
	}
	keys, skipped, err := decodeJWKS(body)
	if err != nil {
		return nil, unavailableErr("jwks", err)
	}
	if skipped > 0 {
		v.log.Debug("oidc jwks: keys skipped (unsupported type, private, or not for signatures)", "issuer", v.issuer, "skipped", skipped)
	}
	return keys, nil
}
