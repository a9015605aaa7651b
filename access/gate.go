package access

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/oidc"
)

// Kind says how a caller proved who it is.
type Kind uint8

// The kinds of Identity.
const (
	// KindNone: no credential was needed (access control is off) or none
	// came.
	KindNone Kind = iota
	// KindClient: a static token of the configured clients.
	KindClient
	// KindOIDC: an access token of the organisation's OpenID Connect
	// provider.
	KindOIDC
)

// String names the kind for logs and keys.
func (k Kind) String() string {
	switch k {
	case KindClient:
		return "client"
	case KindOIDC:
		return "oidc"
	}
	return "none"
}

// Identity is who sent a request and what it may see.
type Identity struct {
	Kind Kind
	// Name is for logs: the client's name, or the OIDC email (the subject
	// when the token has no email).
	Name string
	// Subject and Email are the token's "sub" and "email" (for a client,
	// Subject is its name).
	Subject, Email string
	// EmailVerified is the token's "email_verified": email rules match
	// only a verified email.
	EmailVerified bool
	// Groups and Scopes are the token's groups (GroupsClaim) and scopes,
	// sorted.
	Groups, Scopes []string
	// Filter is what the identity may see: the union of its rules (a
	// client's sources). Public sources are added by the surfaces.
	Filter catalog.Filter
	// Expiry is when the token stops being valid (zero for a client).
	Expiry time.Time
}

// Key is a stable cache key of what decides the identity's view: its kind,
// subject, email (and whether it is verified) and sorted groups. Never the
// token.
func (id Identity) Key() string {
	var b strings.Builder
	b.WriteString(id.Kind.String())
	if id.EmailVerified {
		b.WriteString("+v")
	}
	for _, s := range append([]string{id.Subject, id.Email}, id.Groups...) {
		// Length-prefixed, so that no choice of names makes two
		// identities' keys collide.
		fmt.Fprintf(&b, "|%d:%s", len(s), s)
	}
	return b.String()
}

// Errors of Authenticate and Check. A surface maps them once (HTTPStatus);
// oidc.ErrUnavailable is passed through (503: no decision could be made).
var (
	// ErrNoCredential: access control is on and the request carries no
	// token. Not a failed attempt: OAuth discovery starts this way.
	ErrNoCredential = errors.New("no credential")
	// ErrInvalidCredential: the token is neither a client's nor a valid
	// token of the provider. A failed attempt.
	ErrInvalidCredential = errors.New("invalid credential")
	// ErrInsufficientScope: a valid provider token without every scope
	// oidc.scopes requires.
	ErrInsufficientScope = errors.New("insufficient scope")
	// ErrTooManyAttempts: the address has failed too often; Check did not
	// look at the token.
	ErrTooManyAttempts = errors.New("too many failed authentication attempts")
)

// TokenVerifier validates the provider's access tokens (*oidc.Verifier is
// one). Its errors wrap oidc.ErrInvalidToken or oidc.ErrUnavailable.
type TokenVerifier interface {
	VerifyAccessToken(ctx context.Context, raw string) (oidc.Claims, error)
}

// GateOptions configure a Gate. The zero value is a Gate that lets
// everyone see everything.
type GateOptions struct {
	// Clients are the static tokens.
	Clients *Clients
	// Rules map provider identities to sources.
	Rules Rules
	// Verifier validates provider tokens; nil without OIDC.
	Verifier TokenVerifier
	// Scopes must all be in a provider token (oidc.scopes).
	Scopes []string
	// Resource is the protected resource's URL (public_url + "/mcp"),
	// AuthorizationServers the provider's issuer, and
	// ResourceMetadataURL where the RFC 9728 document is
	// (public_url + "/.well-known/oauth-protected-resource"): the 401
	// challenge and the metadata document name them. Used with Verifier.
	Resource             string
	AuthorizationServers []string
	ResourceMetadataURL  string
	// Limiter counts failed attempts per address for Check (nil: none);
	// OnFailure is told of each (a metric).
	Limiter   *Limiter
	OnFailure func()
	// Logger says why a credential was refused (never the token). Nil:
	// discard.
	Logger *slog.Logger
	// Now is the clock of the identity cache; nil: time.Now.
	Now func() time.Time
	// Members returns the sources a group of discovered sources holds
	// now (nil for a name that is no group): a client or rule naming the
	// group's template sees each of them. Asked at every request, so a
	// repository discovered since is seen at once. Nil: no groups.
	Members func(group string) []string
}

// Gate decides who a request's credential belongs to, for every surface:
// static client tokens first (their hashes compared in constant time),
// then the provider's access tokens. A configuration reload builds a new
// Gate; the surfaces read the current one at every request.
type Gate struct {
	o   GateOptions
	log *slog.Logger

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached // verified provider tokens, by hash
	// Undecided credentials (the provider unreachable, an unknown key id
	// just after a refresh) are no failed attempts, so nothing else bounds
	// how often a caller can make the gate log one: it logs one per
	// undecidedLogEvery and counts the others.
	lastUndecided time.Time
	unlogged      int
}

// undecidedLogEvery is how often "cannot check a credential" is logged at
// most.
const undecidedLogEvery = 10 * time.Second

type cached struct {
	id    Identity
	until time.Time
}

// Bounds of the verified-token cache: a surface asks more than once per
// request (the /mcp middleware, then the MCP caller), and a client sends
// the same token for its whole session.
const (
	cacheTTL  = 30 * time.Second
	cacheSize = 4096
)

// NewGate returns the gate of o.
func NewGate(o GateOptions) *Gate {
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o.Scopes = slices.Clone(o.Scopes)
	return &Gate{o: o, log: log, cache: map[[sha256.Size]byte]cached{}}
}

// Required reports whether callers must present a credential: clients or
// OIDC are configured. A nil Gate requires nothing.
func (g *Gate) Required() bool {
	return g != nil && (g.o.Clients.Required() || g.o.Verifier != nil)
}

// OIDC reports whether provider tokens are accepted.
func (g *Gate) OIDC() bool { return g != nil && g.o.Verifier != nil }

// Scopes are the scopes a provider token must carry.
func (g *Gate) Scopes() []string {
	if g == nil {
		return nil
	}
	return slices.Clone(g.o.Scopes)
}

// Authenticate returns the identity of token. With access control off it
// is KindNone seeing everything, whatever the token. Errors:
// ErrNoCredential, ErrInvalidCredential, ErrInsufficientScope (with the
// identity), or the verifier's oidc.ErrUnavailable (and ctx's error).
// Authenticate counts nothing: Check does.
func (g *Gate) Authenticate(ctx context.Context, token string) (Identity, error) {
	id, err := g.authenticate(ctx, token)
	id.Filter = g.expand(id.Filter)
	return id, err
}

// expand adds to a filter the current members of each group it names.
func (g *Gate) expand(f catalog.Filter) catalog.Filter {
	if g == nil || g.o.Members == nil || f.Only == nil {
		return f
	}
	var out map[string]bool
	for name := range f.Only {
		for _, m := range g.o.Members(name) {
			if out == nil {
				out = maps.Clone(f.Only)
			}
			out[m] = true
		}
	}
	if out == nil {
		return f
	}
	return catalog.Filter{Only: out}
}

func (g *Gate) authenticate(ctx context.Context, token string) (Identity, error) {
	if !g.Required() {
		return Identity{}, nil
	}
	if token == "" {
		return Identity{}, ErrNoCredential
	}
	if c, ok := g.o.Clients.Check(token); ok {
		return Identity{Kind: KindClient, Name: c.Name, Subject: c.Name, Filter: c.Filter()}, nil
	}
	if g.o.Verifier == nil {
		return Identity{}, fmt.Errorf("%w: not a client's token", ErrInvalidCredential)
	}
	if strings.HasPrefix(token, TokenPrefix) {
		// A client token no client has (mistyped, or revoked): never sent
		// on to the provider's introspection endpoint.
		return Identity{}, fmt.Errorf("%w: a client token of no configured client", ErrInvalidCredential)
	}
	sum := sha256.Sum256([]byte(token))
	now := g.o.Now()
	if id, ok := g.lookup(sum, now); ok {
		return id, g.checkScopes(id)
	}
	claims, err := g.o.Verifier.VerifyAccessToken(ctx, token)
	switch {
	case err == nil:
	case errors.Is(err, oidc.ErrInvalidToken):
		// Decided: a failed attempt, even if the caller has hung up since.
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	case errors.Is(err, oidc.ErrUnavailable), ctx.Err() != nil:
		return Identity{}, err
	default:
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	id := g.fromClaims(claims) // cached as the rules say, expanded at each request
	g.store(sum, id, now)
	return id, g.checkScopes(id)
}

// Check is Authenticate for a request from addr, spending the address's
// failed-attempt budget: no credential is not a failed attempt, a wrong
// one is; an address over its budget gets ErrTooManyAttempts without its
// token being looked at. Every refusal is logged, without the token.
func (g *Gate) Check(ctx context.Context, addr, token string) (Identity, error) {
	if !g.Required() || token == "" {
		return g.Authenticate(ctx, token)
	}
	if g.o.Limiter != nil && !g.o.Limiter.Allow(addr) {
		return Identity{}, ErrTooManyAttempts
	}
	id, err := g.Authenticate(ctx, token)
	switch {
	case err == nil:
	case errors.Is(err, ErrInvalidCredential):
		if g.o.Limiter != nil {
			g.o.Limiter.Failed(addr)
		}
		if g.o.OnFailure != nil {
			g.o.OnFailure()
		}
		g.log.Info("credential refused", "remote", addr, "err", err)
	case errors.Is(err, ErrInsufficientScope):
		g.log.Info("credential refused", "remote", addr, "identity", id.Name, "err", err)
	default:
		if unlogged, ok := g.logUndecided(); ok {
			g.log.Warn("cannot check a credential", "remote", addr, "err", err, "not_logged_since", unlogged)
		}
	}
	return id, err
}

// logUndecided reports whether an undecided credential is to be logged
// now, and how many were not logged since the last one that was.
func (g *Gate) logUndecided() (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.o.Now()
	if !g.lastUndecided.IsZero() && now.Sub(g.lastUndecided) < undecidedLogEvery {
		g.unlogged++
		return 0, false
	}
	n := g.unlogged
	g.lastUndecided, g.unlogged = now, 0
	return n, true
}

// FromClaims is the identity of a provider token's (or the web sign-in's
// ID token's) claims: what its rules let it see.
func (g *Gate) FromClaims(c oidc.Claims) Identity {
	id := g.fromClaims(c)
	id.Filter = g.expand(id.Filter)
	return id
}

func (g *Gate) fromClaims(c oidc.Claims) Identity {
	id := Identity{
		Kind:          KindOIDC,
		Name:          c.Subject,
		Subject:       c.Subject,
		Email:         c.Email,
		EmailVerified: c.EmailVerified,
		Groups:        sortedSet(c.Groups),
		Scopes:        sortedSet(c.Scopes),
		Expiry:        c.Expiry,
	}
	if c.Email != "" {
		id.Name = c.Email
	}
	var rules Rules
	if g != nil {
		rules = g.o.Rules
	}
	id.Filter = rules.Filter(c)
	return id
}

// checkScopes says which required scope a provider identity lacks.
func (g *Gate) checkScopes(id Identity) error {
	if id.Kind != KindOIDC {
		return nil
	}
	for _, s := range g.o.Scopes {
		if _, found := slices.BinarySearch(id.Scopes, s); !found {
			return fmt.Errorf("%w: the token lacks scope %q", ErrInsufficientScope, s)
		}
	}
	return nil
}

func (g *Gate) lookup(sum [sha256.Size]byte, now time.Time) (Identity, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.cache[sum]
	if !ok || !now.Before(c.until) {
		return Identity{}, false
	}
	return c.id, true
}

// store keeps a verified identity until its token expires, cacheTTL at
// most (an introspected token may be revoked), in a bounded map.
func (g *Gate) store(sum [sha256.Size]byte, id Identity, now time.Time) {
	until := now.Add(cacheTTL)
	if !id.Expiry.IsZero() && id.Expiry.Before(until) {
		until = id.Expiry
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cache) >= cacheSize {
		for k, c := range g.cache {
			if !now.Before(c.until) {
				delete(g.cache, k)
			}
		}
		if len(g.cache) >= cacheSize {
			clear(g.cache)
		}
	}
	g.cache[sum] = cached{id: id, until: until}
}

func sortedSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// Rule maps provider identities to sources: an identity matches when any
// of its groups, its subject or its email is listed.
type Rule struct {
	Groups   []string
	Subjects []string
	// Emails are exact addresses or "@domain" (every address of the
	// domain), compared case-insensitively, and only with a verified
	// email (email_verified: true).
	Emails []string
	// Sources the identity may see; "*" means all.
	Sources []string
}

// Matches reports whether the claims' identity is one the rule names.
func (r Rule) Matches(c oidc.Claims) bool {
	for _, g := range r.Groups {
		if slices.Contains(c.Groups, g) {
			return true
		}
	}
	if c.Subject != "" && slices.Contains(r.Subjects, c.Subject) {
		return true
	}
	if c.Email == "" || !c.EmailVerified {
		return false
	}
	email := strings.ToLower(c.Email)
	at := strings.LastIndexByte(email, '@')
	for _, e := range r.Emails {
		e = strings.ToLower(e)
		if e == email || strings.HasPrefix(e, "@") && at > 0 && email[at:] == e {
			return true
		}
	}
	return false
}

// Rules are the access rules; an identity sees the union of the rules it
// matches (none: nothing but the public sources).
type Rules []Rule

// Filter is what the claims' identity may see.
func (rs Rules) Filter(c oidc.Claims) catalog.Filter {
	only := map[string]bool{}
	for _, r := range rs {
		if !r.Matches(c) {
			continue
		}
		for _, s := range r.Sources {
			if s == "*" {
				return catalog.Filter{}
			}
			only[s] = true
		}
	}
	return catalog.Filter{Only: only}
}
