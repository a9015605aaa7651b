package oidc

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/skillreg/skillreg/internal/testkit"
)

func TestAccessTokenChecks(t *testing.T) {
	t.Parallel()
	c := newClock()
	rs := rsaSigner(0, "rsa-1", "")          // no "alg" in the JWK: RS* and PS* fit
	rsOnly := rsaSigner(1, "rsa-2", "RS256") // the JWK pins RS256
	es := ecSigner(t, "ec-1", elliptic.P256(), jwt.SigningMethodES256)
	es384 := ecSigner(t, "ec-2", elliptic.P384(), jwt.SigningMethodES384)
	ed := edSigner(t, "ed-1")
	es384Bare := ecSigner(t, "ec-3", elliptic.P384(), jwt.SigningMethodES384)
	es384Bare.alg = "" // no "alg" in the JWK: only the curve ties it to ES384
	p := newIDP(t, rs, rsOnly, es, es384, ed, es384Bare)
	var logs bytes.Buffer
	v := p.verifier(t, c, &logs)
	now := c.Now()
	ps := rs
	ps.method = jwt.SigningMethodPS256
	foreign := rsaSigner(2, "rsa-1", "") // another key under a published kid
	esAsRSA := es
	esAsRSA.kid = "rsa-1"
	psPinned := rsOnly
	psPinned.method = jwt.SigningMethodPS256
	es256OnP384 := es // an ES256 token naming a P-384 key
	es256OnP384.kid = es384Bare.kid
	es256OnPinned := es // an ES256 token naming the P-384 key whose JWK says ES384
	es256OnPinned.kid = es384.kid
	noKID := es
	noKID.kid = ""

	edit := func(f func(jwt.MapClaims)) jwt.MapClaims {
		m := p.claims(now)
		f(m)
		return m
	}
	pubDER, err := x509.MarshalPKIXPublicKey(rs.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	hmacWithPublicKey := func(alg string, secret []byte) string {
		tok := jwt.NewWithClaims(jwt.GetSigningMethod(alg), p.claims(now))
		tok.Header["kid"] = "rsa-1"
		raw, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	none := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, p.claims(now))
		tok.Header["kid"] = "rsa-1"
		raw, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	crit := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, p.claims(now))
		tok.Header["kid"] = "rsa-1"
		tok.Header["crit"] = []string{"exp-ext"}
		tok.Header["exp-ext"] = true
		raw, err := tok.SignedString(rs.priv)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// Tokens whose signature is replaced: an unsigned token with a valid
	// header, and a real token with its signature dropped.
	valid := rs.sign(t, p.claims(now))
	stripped := valid[:strings.LastIndex(valid, ".")+1]

	tests := []struct {
		name   string
		raw    string
		reason string // empty: valid
	}{
		{name: "RS256", raw: rs.sign(t, p.claims(now))},
		{name: "PS256 with an RSA key without alg", raw: ps.sign(t, p.claims(now))},
		{name: "ES256", raw: es.sign(t, p.claims(now))},
		{name: "ES384", raw: es384.sign(t, p.claims(now))},
		{name: "EdDSA", raw: ed.sign(t, p.claims(now))},
		{name: "no kid: every key fitting the algorithm is tried", raw: noKID.sign(t, p.claims(now))},
		{name: "aud list holding ours", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["aud"] = []string{"other", testAudience} }))},
		{name: "expired within the skew", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["exp"] = now.Add(-59 * time.Second).Unix() }))},
		{name: "nbf within the skew", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["nbf"] = now.Add(59 * time.Second).Unix() }))},

		{name: "expired beyond the skew", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["exp"] = now.Add(-61 * time.Second).Unix() })), reason: "expired"},
		{name: "nbf beyond the skew", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["nbf"] = now.Add(61 * time.Second).Unix() })), reason: "not valid yet"},
		{name: "no exp", raw: rs.sign(t, edit(func(m jwt.MapClaims) { delete(m, "exp") })), reason: "missing"},
		{name: "another audience", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["aud"] = "https://other.example.com/mcp" })), reason: "wrong audience"},
		{name: "no audience", raw: rs.sign(t, edit(func(m jwt.MapClaims) { delete(m, "aud") })), reason: "missing"},
		{name: "another issuer", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["iss"] = "https://evil.example.com" })), reason: "wrong issuer"},
		{name: "issuer with a trailing slash", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["iss"] = p.srv.URL + "/" })), reason: "wrong issuer"},
		{name: "no subject", raw: rs.sign(t, edit(func(m jwt.MapClaims) { delete(m, "sub") })), reason: "no subject"},
		{name: "groups of the wrong type", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["groups"] = []any{"a", 7} })), reason: "groups"},
		{name: "exp of the wrong type", raw: rs.sign(t, edit(func(m jwt.MapClaims) { m["exp"] = "tomorrow" })), reason: "wrong type"},
		{name: "signed by a foreign key under a published kid", raw: foreign.sign(t, p.claims(now)), reason: "bad signature"},
		{name: "EC signature under an RSA key's kid", raw: esAsRSA.sign(t, p.claims(now)), reason: "fits"},
		{name: "PS256 under a JWK pinned to RS256", raw: psPinned.sign(t, p.claims(now)), reason: "fits"},
		{name: "ES256 under a P-384 key", raw: es256OnP384.sign(t, p.claims(now)), reason: "fits"},
		{name: "ES256 under a JWK pinned to ES384", raw: es256OnPinned.sign(t, p.claims(now)), reason: "fits"},
		{name: "ES384 under a P-384 key without alg", raw: es384Bare.sign(t, p.claims(now))},
		{name: "alg none", raw: none(), reason: "algorithm not allowed"},
		{name: "a critical header extension", raw: crit(), reason: "critical"},
		{name: "HS256 keyed with the RSA public key (alg confusion)", raw: hmacWithPublicKey("HS256", pubDER), reason: "algorithm not allowed"},
		{name: "HS512 keyed with the RSA public key", raw: hmacWithPublicKey("HS512", pubDER), reason: "algorithm not allowed"},
		{name: "signature stripped", raw: stripped, reason: "bad signature"},
		{name: "malformed", raw: "a.b.c", reason: "malformed"},
		{name: "opaque, no introspection", raw: "opaque-token-value", reason: "not a JWT"},
		{name: "empty", raw: "", reason: "empty"},
		{name: "too long", raw: strings.Repeat("a", MaxTokenBytes+1) + ".b.c", reason: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.VerifyAccessToken(context.Background(), tt.raw)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got.Subject != "user-1" || got.Issuer != p.srv.URL {
					t.Fatalf("claims %+v", got)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want ErrInvalidToken only", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %q, want it to say %q", err, tt.reason)
			}
			noTokenIn(t, err.Error(), tt.raw)
		})
	}
	noTokenIn(t, logs.String(), valid)
	if n := p.jwksHits.Load(); n != 1 {
		t.Errorf("%d JWKS fetches for tokens of known keys, want 1", n)
	}
}

// noTokenIn fails when text holds the token or any of its parts long
// enough to matter.
func noTokenIn(t *testing.T, text, raw string) {
	t.Helper()
	for _, part := range append(strings.Split(raw, "."), raw) {
		if len(part) >= 8 && strings.Contains(text, part) {
			t.Fatalf("the token (or a part of it) is in %q", text)
		}
	}
}

func TestClaims(t *testing.T) {
	t.Parallel()
	c := newClock()
	rs := rsaSigner(0, "rsa-1", "RS256")
	p := newIDP(t, rs)
	now := c.Now()
	tests := []struct {
		name   string
		groups string // Config.GroupsClaim
		edit   func(jwt.MapClaims)
		want   Claims
	}{
		{
			name: "scope string and client_id",
			want: Claims{Email: "ada@example.com", EmailVerified: true, Groups: []string{"platform", "security"}, Scopes: []string{"skills:read", "openid"}, ClientID: "claude-code"},
		},
		{
			name: "scp list and azp",
			edit: func(m jwt.MapClaims) {
				delete(m, "scope")
				delete(m, "client_id")
				m["scp"] = []string{"skills.read"}
				m["azp"] = "cursor"
				m["email_verified"] = "true"
			},
			want: Claims{Email: "ada@example.com", EmailVerified: true, Groups: []string{"platform", "security"}, Scopes: []string{"skills.read"}, ClientID: "cursor"},
		},
		{
			name:   "nested groups claim",
			groups: "realm_access.roles",
			edit: func(m jwt.MapClaims) {
				m["realm_access"] = map[string]any{"roles": []string{"skills-admin"}}
				m["email_verified"] = false
			},
			want: Claims{Email: "ada@example.com", Groups: []string{"skills-admin"}, Scopes: []string{"skills:read", "openid"}, ClientID: "claude-code"},
		},
		{
			name:   "a claim name with dots is looked up whole first",
			groups: "https://example.com/claims.groups",
			edit: func(m jwt.MapClaims) {
				m["https://example.com/claims.groups"] = "one-group"
			},
			want: Claims{Email: "ada@example.com", EmailVerified: true, Groups: []string{"one-group"}, Scopes: []string{"skills:read", "openid"}, ClientID: "claude-code"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := p.verifier(t, c, nil, func(cfg *Config) { cfg.GroupsClaim = tt.groups })
			m := p.claims(now)
			if tt.edit != nil {
				tt.edit(m)
			}
			got, err := v.VerifyAccessToken(context.Background(), rs.sign(t, m))
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Issuer, want.Subject = p.srv.URL, "user-1"
			want.Expiry = now.Add(5 * time.Minute)
			if !got.Expiry.Equal(want.Expiry) {
				t.Fatalf("expiry %v, want %v", got.Expiry, want.Expiry)
			}
			got.Expiry = want.Expiry
			if !equalClaims(got, want) {
				t.Fatalf("claims\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func equalClaims(a, b Claims) bool {
	return a.Issuer == b.Issuer && a.Subject == b.Subject && a.Email == b.Email &&
		a.EmailVerified == b.EmailVerified && slices.Equal(a.Groups, b.Groups) &&
		slices.Equal(a.Scopes, b.Scopes) && a.ClientID == b.ClientID && a.Expiry.Equal(b.Expiry)
}

// A new key published at the provider validates at once: the unknown kid
// refreshes the JWKS, once.
func TestRotation(t *testing.T) {
	t.Parallel()
	c := newClock()
	old, next := rsaSigner(0, "k1", "RS256"), rsaSigner(1, "k2", "RS256")
	p := newIDP(t, old)
	v := p.verifier(t, c, nil)
	ctx := context.Background()
	if _, err := v.VerifyAccessToken(ctx, old.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatal(err)
	}
	p.publish(next, old)
	c.Advance(10 * time.Second) // well within the refresh interval since the first fetch
	if _, err := v.VerifyAccessToken(ctx, next.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if _, err := v.VerifyAccessToken(ctx, old.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatalf("token of the old key, still published: %v", err)
	}
	if n := p.jwksHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (first use, new kid)", n)
	}
	// The old key retired: once the set is refetched it is gone.
	p.publish(next)
	third := rsaSigner(2, "k3", "RS256")
	c.Advance(time.Minute)
	if _, err := v.VerifyAccessToken(ctx, third.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token of an unpublished key: %v", err)
	}
	// Within the minute of that refresh the retired key cannot be told
	// from one just rotated in; once the minute has passed it is refused.
	if _, err := v.VerifyAccessToken(ctx, old.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("token of the retired key within the minute of a refresh: %v", err)
	}
	c.Advance(time.Minute)
	if _, err := v.VerifyAccessToken(ctx, old.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token of the retired key after a refresh: %v", err)
	}
}

// Unknown key ids refresh the JWKS at most once a minute, with one fetch in
// flight for all the callers that ask at once.
func TestUnknownKIDRefreshLimit(t *testing.T) {
	t.Parallel()
	c := newClock()
	known := rsaSigner(0, "known", "RS256")
	p := newIDP(t, known)
	v := p.verifier(t, c, nil)
	ctx := context.Background()
	if _, err := v.VerifyAccessToken(ctx, known.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatal(err)
	}
	forged := func(kid string) string {
		s := rsaSigner(1, kid, "RS256")
		return s.sign(t, p.claims(c.Now()))
	}
	if _, err := v.VerifyAccessToken(ctx, forged("x1")); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "unknown key id") {
		t.Fatalf("forged kid: %v", err)
	}
	if n := p.jwksHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2", n)
	}
	for i := range 20 {
		c.Advance(2 * time.Second) // 40 s in all: still within the minute
		// Within the minute an unknown kid cannot be decided: it may be a
		// key the provider has just rotated in.
		if _, err := v.VerifyAccessToken(ctx, forged("y"+string(rune('a'+i)))); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("forged kid within the minute: %v, want ErrUnavailable", err)
		}
	}
	if n := p.jwksHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches after 20 unknown kids within a minute, want still 2", n)
	}
	c.Advance(20 * time.Second)
	if _, err := v.VerifyAccessToken(ctx, forged("z")); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("forged kid: %v", err)
	}
	if n := p.jwksHits.Load(); n != 3 {
		t.Fatalf("%d JWKS fetches a minute later, want 3", n)
	}

	// Many callers with the new key at once while the fetch hangs: one fetch,
	// and every one of them validates.
	c.Advance(time.Minute)
	next := rsaSigner(2, "next", "RS256")
	p.publish(known, next)
	release := make(chan struct{})
	p.mu.Lock()
	p.release = release
	p.mu.Unlock()
	tok := next.sign(t, p.claims(c.Now()))
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = v.VerifyAccessToken(ctx, tok) })
	}
	testkit.WaitUntil(t, "the first caller's fetch reaching the provider", func() bool { return p.jwksHits.Load() == 4 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if n := p.jwksHits.Load(); n != 4 {
		t.Fatalf("%d JWKS fetches for 16 concurrent callers, want one more (4)", n)
	}
}

// Cached keys outlive the provider: tokens they signed validate until
// their exp (plus the skew) while it is down; what needs the provider is
// ErrUnavailable, and a provider that is down is not asked once per
// request.
func TestOutage(t *testing.T) {
	t.Parallel()
	c := newClock()
	k := ecSigner(t, "k1", elliptic.P256(), jwt.SigningMethodES256)
	p := newIDP(t, k)
	v := p.verifier(t, c, nil)
	ctx := context.Background()
	tok := k.sign(t, p.claims(c.Now())) // exp in 5 minutes
	if _, err := v.VerifyAccessToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	p.setDown(true)
	c.Advance(5 * time.Minute)
	if _, err := v.VerifyAccessToken(ctx, tok); err != nil {
		t.Fatalf("cached key, provider down: %v", err)
	}
	if _, err := v.Metadata(ctx); err != nil {
		t.Fatalf("cached metadata, provider down: %v", err)
	}
	other := ecSigner(t, "k2", elliptic.P256(), jwt.SigningMethodES256)
	_, err := v.VerifyAccessToken(ctx, other.sign(t, p.claims(c.Now())))
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("unknown kid, provider down: %v, want ErrUnavailable", err)
	}
	hits := p.jwksHits.Load()
	c.Advance(30 * time.Second)
	if _, err := v.VerifyAccessToken(ctx, other.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unknown kid again, provider down: %v", err)
	}
	if n := p.jwksHits.Load(); n != hits {
		t.Fatalf("the provider was asked again within the minute (%d fetches, want %d)", n, hits)
	}
	if _, err := v.VerifyAccessToken(ctx, tok); err != nil {
		t.Fatalf("cached key, 5m30s: %v", err)
	}
	c.Advance(31 * time.Second) // past exp + skew
	if _, err := v.VerifyAccessToken(ctx, tok); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("past exp + skew: %v", err)
	}
	// Back up: the unknown key is asked about again, and is still unknown.
	p.setDown(false)
	if _, err := v.VerifyAccessToken(ctx, other.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("unknown kid, provider back: %v", err)
	}
}

// A provider that is down before anything is cached: ErrUnavailable, asked
// at most once a minute, then fine once it answers.
func TestColdOutage(t *testing.T) {
	t.Parallel()
	c := newClock()
	k := edSigner(t, "k1")
	p := newIDP(t, k)
	p.setDown(true)
	v := p.verifier(t, c, nil)
	ctx := context.Background()
	tok := k.sign(t, p.claims(c.Now()))
	for range 5 {
		if _, err := v.VerifyAccessToken(ctx, tok); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("provider down, nothing cached: %v", err)
		}
		if _, err := v.Metadata(ctx); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("metadata, provider down: %v", err)
		}
	}
	if n := p.discoveryHits.Load(); n != 1 {
		t.Fatalf("%d discovery fetches within a minute, want 1", n)
	}
	p.setDown(false)
	c.Advance(time.Minute)
	if _, err := v.VerifyAccessToken(ctx, tok); err != nil {
		t.Fatalf("provider back: %v", err)
	}
}

// Start fetches in the background and retries until the provider answers.
func TestStartRetries(t *testing.T) {
	t.Parallel()
	c := newClock()
	k := edSigner(t, "k1")
	p := newIDP(t, k)
	p.setDown(true)
	var logs testkit.Buffer
	v := p.verifier(t, c, nil, func(cfg *Config) {
		cfg.Logger = slogTo(&logs)
	})
	v.backoffMin = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v.Start(ctx)
	v.Start(ctx) // a second call does nothing
	testkit.WaitUntil(t, "three discovery attempts", func() bool { return p.discoveryHits.Load() >= 3 })
	p.setDown(false)
	select {
	case <-v.Ready():
	case <-time.After(time.Minute):
		t.Fatal("not ready a minute after the provider came up")
	}
	hits := p.jwksHits.Load()
	if _, err := v.VerifyAccessToken(ctx, k.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatal(err)
	}
	if n := p.jwksHits.Load(); n != hits {
		t.Fatalf("verification fetched the JWKS again after Start had it")
	}
	if !strings.Contains(logs.String(), "oidc provider unreachable; retrying") {
		t.Fatalf("the outage is not logged:\n%s", logs.String())
	}
}

// Start refetches the key set every KeysMaxAge: a key the provider
// withdrew stops validating, and a failed refetch keeps the cache.
func TestStartKeepsKeysFresh(t *testing.T) {
	t.Parallel()
	c := newClock()
	k1, k2 := edSigner(t, "k1"), edSigner(t, "k2")
	p := newIDP(t, k1, k2)
	var logs testkit.Buffer
	v := p.verifier(t, c, nil, func(cfg *Config) {
		cfg.KeysMaxAge = 5 * time.Millisecond
		cfg.Logger = slogTo(&logs)
	})
	v.backoffMin, v.backoffMax = time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v.Start(ctx)
	<-v.Ready()
	if _, err := v.VerifyAccessToken(ctx, k2.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatal(err)
	}
	p.publish(k1)
	hits := p.jwksHits.Load()
	testkit.WaitUntil(t, "two refetches after k2 was withdrawn", func() bool { return p.jwksHits.Load() >= hits+2 })
	if _, err := v.VerifyAccessToken(ctx, k2.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token of a withdrawn key: %v", err)
	}
	p.setDown(true)
	hits = p.jwksHits.Load()
	testkit.WaitUntil(t, "two failed refetches", func() bool { return p.jwksHits.Load() >= hits+2 })
	if _, err := v.VerifyAccessToken(ctx, k1.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatalf("cached key after failed refetches: %v", err)
	}
	cancel()
	out := logs.String()
	if !strings.Contains(out, "oidc signing keys") || !strings.Contains(out, "kids=[k1]") {
		t.Fatalf("the key change is not logged:\n%s", out)
	}
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := newIDP(t, edSigner(t, "k1"))
	v := p.verifier(t, c, nil)
	m, err := v.Metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	iss := p.srv.URL
	if m.Issuer != iss || m.AuthorizationEndpoint != iss+"/authorize" || m.TokenEndpoint != iss+"/token" ||
		m.JWKSURI != iss+"/keys" || m.EndSessionEndpoint != iss+"/logout" || m.IntrospectionEndpoint != iss+"/introspect" ||
		!slices.Equal(m.CodeChallengeMethodsSupported, []string{"S256"}) {
		t.Fatalf("metadata %+v", m)
	}
	m.ScopesSupported[0] = "changed"
	again, _ := v.Metadata(context.Background())
	if again.ScopesSupported[0] != "openid" {
		t.Fatal("Metadata returned the cache's own slice")
	}
	if n := p.discoveryHits.Load(); n != 1 {
		t.Fatalf("%d discovery fetches, want 1", n)
	}
}

// What the provider sends is checked and bounded: a discovery document of
// another issuer or with a plain-http endpoint, a JWKS too large, too deep,
// or without a usable key, a fetch that never answers.
func TestProviderAnswersChecked(t *testing.T) {
	t.Parallel()
	k := rsaSigner(0, "k1", "RS256")
	tests := []struct {
		name   string
		set    func(p *idp)
		cfg    func(*Config)
		reason string
	}{
		{name: "another issuer", set: func(p *idp) {
			p.doc = func(m jsonMap) { m["issuer"] = "https://evil.example.com" }
		}, reason: "not the configured"},
		{name: "no jwks_uri", set: func(p *idp) { p.doc = func(m jsonMap) { delete(m, "jwks_uri") } }, reason: "no jwks_uri"},
		{name: "plain http jwks_uri off loopback", set: func(p *idp) {
			p.doc = func(m jsonMap) { m["jwks_uri"] = "http://keys.example.com/keys" }
		}, reason: "must use https"},
		{name: "JWKS over 1 MiB", set: func(p *idp) {
			p.jwks = []byte(`{"keys":[],"pad":"` + strings.Repeat("x", maxJWKSBytes) + `"}`)
		}, reason: "larger than"},
		{name: "JWKS nested deep", set: func(p *idp) {
			p.jwks = []byte(`{"keys":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`)
		}, reason: "nested too deeply"},
		{name: "JWKS without a usable key", set: func(p *idp) {
			p.jwks = []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQ","kid":"k1"}]}`)
		}, reason: "no usable signing key"},
		{name: "JWKS not JSON", set: func(p *idp) { p.jwks = []byte(`<html>`) }, reason: "decode"},
		{name: "fetch never answers", set: func(p *idp) { p.release = make(chan struct{}) }, cfg: func(c *Config) {
			c.FetchTimeout = 50 * time.Millisecond
		}, reason: "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			p := newIDP(t, k)
			p.mu.Lock()
			tt.set(p)
			release := p.release
			p.mu.Unlock()
			if release != nil {
				t.Cleanup(func() { close(release) })
			}
			edits := []func(*Config){}
			if tt.cfg != nil {
				edits = append(edits, tt.cfg)
			}
			v := p.verifier(t, c, nil, edits...)
			_, err := v.VerifyAccessToken(context.Background(), k.sign(t, p.claims(c.Now())))
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %q, want it to say %q", err, tt.reason)
			}
		})
	}
}

func TestDecodeJWKSSkips(t *testing.T) {
	t.Parallel()
	good := rsaSigner(0, "good", "RS256").jwk()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weak := jose.JSONWebKey{Key: small.Public(), KeyID: "weak", Algorithm: "RS256"}
	private := jose.JSONWebKey{Key: rsaKeys()[1], KeyID: "private", Algorithm: "RS256"}
	enc := rsaSigner(1, "enc", "").jwk()
	enc.Use = "enc"
	hs := rsaSigner(1, "hs", "").jwk()
	hs.Algorithm = "HS256"
	mismatch := rsaSigner(1, "mismatch", "").jwk()
	mismatch.Algorithm = "ES256"
	var raws []json.RawMessage
	for _, k := range []jose.JSONWebKey{good, private, enc, hs, mismatch, weak} {
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	raws = append(raws,
		json.RawMessage(`{"kty":"oct","k":"c2VjcmV0","kid":"sym"}`),
		json.RawMessage(`{"kty":"PQ","kid":"future"}`),
		json.RawMessage(`"not a key"`),
	)
	body, _ := json.Marshal(map[string]any{"keys": raws})
	keys, skipped, err := decodeJWKS(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].id != "good" || skipped != 8 {
		t.Fatalf("kept %d keys (%v), skipped %d; want only good, 8 skipped", len(keys), keys, skipped)
	}
	many := map[string]any{"keys": slices.Repeat([]json.RawMessage{raws[0]}, maxKeys+1)}
	body, _ = json.Marshal(many)
	if _, _, err := decodeJWKS(body); err == nil {
		t.Fatal("a JWKS of more than maxKeys keys was accepted")
	}
}

func TestIDToken(t *testing.T) {
	t.Parallel()
	c := newClock()
	k := rsaSigner(0, "k1", "RS256")
	p := newIDP(t, k)
	v := p.verifier(t, c, nil)
	ctx := context.Background()
	id := func(f func(jwt.MapClaims)) string {
		m := p.claims(c.Now())
		m["aud"] = "skillreg-web"
		m["nonce"] = "n-0123456789"
		delete(m, "scope")
		delete(m, "client_id")
		if f != nil {
			f(m)
		}
		return k.sign(t, m)
	}
	got, err := v.VerifyIDToken(ctx, id(nil), "skillreg-web", "n-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "user-1" || got.Email != "ada@example.com" || !slices.Equal(got.Groups, []string{"platform", "security"}) {
		t.Fatalf("claims %+v", got)
	}
	if _, err := v.VerifyIDToken(ctx, id(func(m jwt.MapClaims) { m["azp"] = "skillreg-web" }), "skillreg-web", ""); err != nil {
		t.Fatalf("matching azp, no nonce asked: %v", err)
	}
	refused := []struct {
		name     string
		raw      string
		clientID string
		nonce    string
		reason   string
	}{
		{name: "another nonce", raw: id(nil), clientID: "skillreg-web", nonce: "n-other", reason: "nonce"},
		{name: "no nonce in the token", raw: id(func(m jwt.MapClaims) { delete(m, "nonce") }), clientID: "skillreg-web", nonce: "n-0123456789", reason: "nonce"},
		{name: "another client", raw: id(nil), clientID: "other-client", nonce: "n-0123456789", reason: "wrong audience"},
		{name: "azp of another client", raw: id(func(m jwt.MapClaims) {
			m["aud"] = []string{"skillreg-web", "other"}
			m["azp"] = "other"
		}), clientID: "skillreg-web", reason: "azp"},
		{name: "an access token for the resource", raw: k.sign(t, p.claims(c.Now())), clientID: "skillreg-web", reason: "wrong audience"},
		{name: "expired", raw: id(func(m jwt.MapClaims) { m["exp"] = c.Now().Add(-2 * time.Minute).Unix() }), clientID: "skillreg-web", reason: "expired"},
		{name: "no client id", raw: id(nil), reason: "no client id"},
		{name: "opaque", raw: "opaque", clientID: "skillreg-web", reason: "malformed"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.VerifyIDToken(ctx, tt.raw, tt.clientID, tt.nonce)
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want ErrInvalidToken saying %q", err, tt.reason)
			}
			noTokenIn(t, err.Error(), tt.raw)
		})
	}
	// An ID token is not an access token: its aud is the client.
	if _, err := v.VerifyAccessToken(ctx, id(nil)); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("ID token as access token: %v", err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cfg    Config
		reason string
	}{
		{name: "no issuer", cfg: Config{Audience: "a"}, reason: "issuer is required"},
		{name: "plain http issuer", cfg: Config{Issuer: "http://idp.example.com", Audience: "a"}, reason: "https"},
		{name: "relative issuer", cfg: Config{Issuer: "/realms/x", Audience: "a"}, reason: "absolute"},
		{name: "issuer with a query", cfg: Config{Issuer: "https://idp.example.com?x=1", Audience: "a"}, reason: "query"},
		{name: "no audience", cfg: Config{Issuer: "https://idp.example.com"}, reason: "audience"},
		{name: "HMAC algorithm", cfg: Config{Issuer: "https://idp.example.com", Audience: "a", Algorithms: []string{"HS256"}}, reason: `"HS256" is not allowed`},
		{name: "none", cfg: Config{Issuer: "https://idp.example.com", Audience: "a", Algorithms: []string{"none"}}, reason: "not allowed"},
		{name: "introspection without client", cfg: Config{Issuer: "https://idp.example.com", Audience: "a", Introspection: &IntrospectionConfig{}}, reason: "client id"},
		{name: "introspection over http", cfg: Config{Issuer: "https://idp.example.com", Audience: "a", Introspection: &IntrospectionConfig{URL: "http://idp.example.com/i", ClientID: "c"}}, reason: "https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want it to say %q", err, tt.reason)
			}
		})
	}
	for _, ok := range []Config{
		{Issuer: "https://idp.example.com/realms/org/", Audience: "a"},
		{Issuer: "http://127.0.0.1:8080", Audience: "a", Algorithms: []string{"ES256"}},
		{Issuer: "http://localhost:8080", Audience: "a", Introspection: &IntrospectionConfig{ClientID: "c"}},
	} {
		if _, err := New(ok); err != nil {
			t.Errorf("New(%+v): %v", ok, err)
		}
	}
}

// Config.Algorithms narrows the allow-list.
func TestAlgorithmsNarrowed(t *testing.T) {
	t.Parallel()
	c := newClock()
	rs := rsaSigner(0, "rsa", "RS256")
	es := ecSigner(t, "ec", elliptic.P256(), jwt.SigningMethodES256)
	p := newIDP(t, rs, es)
	v := p.verifier(t, c, nil, func(cfg *Config) { cfg.Algorithms = []string{"ES256"} })
	if _, err := v.VerifyAccessToken(context.Background(), es.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyAccessToken(context.Background(), rs.sign(t, p.claims(c.Now()))); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("RS256 outside the configured list: %v", err)
	}
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// A forged key id just before a real rotation must not make the new key's
// genuine tokens invalid: within the minute they cannot be decided
// (ErrUnavailable: the caller retries, and no failed attempt is counted),
// and once the minute has passed they validate.
func TestForgedKIDBeforeRotation(t *testing.T) {
	t.Parallel()
	c := newClock()
	known, next := rsaSigner(0, "known", "RS256"), rsaSigner(2, "next", "RS256")
	p := newIDP(t, known)
	v := p.verifier(t, c, nil)
	ctx := context.Background()
	if _, err := v.VerifyAccessToken(ctx, known.sign(t, p.claims(c.Now()))); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Minute)
	if _, err := v.VerifyAccessToken(ctx, rsaSigner(1, "forged", "RS256").sign(t, p.claims(c.Now()))); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("forged kid, refreshed: %v, want ErrInvalidToken", err)
	}
	p.publish(known, next)
	c.Advance(10 * time.Second)
	tok := next.sign(t, p.claims(c.Now()))
	if _, err := v.VerifyAccessToken(ctx, tok); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the new key's token within the minute: %v, want ErrUnavailable only", err)
	}
	c.Advance(time.Minute)
	if _, err := v.VerifyAccessToken(ctx, tok); err != nil {
		t.Fatalf("the new key's token a minute later: %v", err)
	}
}
