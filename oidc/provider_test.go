package oidc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/skillreg/skillreg/internal/oidctest"
)

// These tests run the Verifier against internal/oidctest: a real provider
// (zitadel's OpenID-certified op package) on loopback, issuing tokens
// through its real token endpoint.

const (
	realResource = "https://skills.example.test/mcp"
	realCallback = "http://127.0.0.1:18200/callback" // never listened on: the flow stops at the redirect
)

func realOptions() oidctest.Options {
	return oidctest.Options{
		Users: []oidctest.User{
			{Subject: "u-ada", Email: "ada@example.test", Password: "ada-pw", Groups: []string{"platform", "security"}},
		},
		Clients: []oidctest.Client{
			{ID: "web", Secret: "web-secret", RedirectURIs: []string{realCallback}},
			{ID: "robot", Secret: "robot-secret", Groups: []string{"bots"}},
		},
	}
}

// realClock starts at the real time (the provider's tokens are stamped
// with it) and moves only when told.
func realClock() *clock { return &clock{t: time.Now()} }

func realVerifier(t *testing.T, p *oidctest.Provider, c *clock, edit ...func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{Issuer: p.Issuer(), Audience: realResource, Now: c.Now}
	for _, e := range edit {
		e(&cfg)
	}
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRealProviderTokens(t *testing.T) {
	t.Parallel()
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.EdDSA} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			o := realOptions()
			o.Algorithm = alg
			p := oidctest.Start(t, o)
			v := realVerifier(t, p, realClock())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			v.Start(ctx)
			<-v.Ready()

			// Client credentials: a machine.
			c, err := v.VerifyAccessToken(ctx, p.ClientCredentials(t, "robot", "robot-secret", realResource, "skills:read"))
			if err != nil {
				t.Fatalf("client-credentials token: %v", err)
			}
			if c.Issuer != p.Issuer() || c.Subject != "robot" || c.ClientID != "robot" ||
				!slices.Equal(c.Groups, []string{"bots"}) || !slices.Contains(c.Scopes, "skills:read") ||
				time.Until(c.Expiry) <= 0 {
				t.Fatalf("client-credentials claims %+v", c)
			}

			// Authorization code with PKCE: a person, and the web's ID token.
			tok := p.AuthCodeTokens(t, "web", "web-secret", realCallback, realResource, "ada@example.test", "openid", "email", "skills:read")
			c, err = v.VerifyAccessToken(ctx, tok.AccessToken)
			if err != nil {
				t.Fatalf("authorization-code access token: %v", err)
			}
			if c.Subject != "u-ada" || c.Email != "ada@example.test" || !slices.Equal(c.Groups, []string{"platform", "security"}) {
				t.Fatalf("access token claims %+v", c)
			}
			id, err := v.VerifyIDToken(ctx, tok.IDToken, "web", tok.Nonce)
			if err != nil {
				t.Fatalf("ID token: %v", err)
			}
			if id.Subject != "u-ada" || id.Email != "ada@example.test" || !slices.Equal(id.Groups, []string{"platform", "security"}) {
				t.Fatalf("ID token claims %+v", id)
			}
			if _, err := v.VerifyIDToken(ctx, tok.IDToken, "web", "another-nonce"); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("ID token with another nonce: %v", err)
			}
			if _, err := v.VerifyAccessToken(ctx, tok.IDToken); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("ID token as an access token: %v", err)
			}

			// RFC 8707: a token for another resource is refused.
			other := p.ClientCredentials(t, "robot", "robot-secret", "https://other.example.test/mcp")
			if _, err := v.VerifyAccessToken(ctx, other); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "wrong audience") {
				t.Fatalf("token for another resource: %v", err)
			}

			m, err := v.Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.TokenEndpoint != p.TokenURL() || m.AuthorizationEndpoint != p.AuthURL() ||
				m.IntrospectionEndpoint != p.IntrospectionURL() || m.EndSessionEndpoint == "" {
				t.Fatalf("metadata %+v", m)
			}
		})
	}
}

// The provider rotates its key while the verifier runs, then goes down and
// comes back: tokens of cached keys validate throughout, a key first seen
// while it is down cannot be decided, and is fetched once it is back.
func TestRealProviderRotationAndOutage(t *testing.T) {
	t.Parallel()
	p := oidctest.Start(t, realOptions())
	c := realClock()
	v := realVerifier(t, p, c)
	ctx := context.Background()
	first := p.ClientCredentials(t, "robot", "robot-secret", realResource)
	if _, err := v.VerifyAccessToken(ctx, first); err != nil {
		t.Fatal(err)
	}

	p.Rotate(t)
	second := p.ClientCredentials(t, "robot", "robot-secret", realResource)
	if kidOf(t, second) == kidOf(t, first) {
		t.Fatal("the rotated provider signed with the old key")
	}
	if _, err := v.VerifyAccessToken(ctx, second); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	if _, err := v.VerifyAccessToken(ctx, first); err != nil {
		t.Fatalf("token of the previous key, still published: %v", err)
	}

	p.Rotate(t)
	third := p.ClientCredentials(t, "robot", "robot-secret", realResource)
	p.Stop(t)
	for _, tok := range []string{first, second} {
		if _, err := v.VerifyAccessToken(ctx, tok); err != nil {
			t.Fatalf("cached key, provider down: %v", err)
		}
	}
	c.Advance(time.Minute) // past the refresh interval of the second rotation
	if _, err := v.VerifyAccessToken(ctx, third); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("key first seen while the provider is down: %v, want ErrUnavailable", err)
	}
	p.Restart(t)
	c.Advance(time.Minute)
	if _, err := v.VerifyAccessToken(ctx, third); err != nil {
		t.Fatalf("provider back: %v", err)
	}
	c.Advance(11 * time.Minute) // the provider's tokens live 10 minutes
	if _, err := v.VerifyAccessToken(ctx, first); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("past exp: %v", err)
	}
}

func kidOf(t *testing.T, raw string) string {
	t.Helper()
	sig, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	return sig.Signatures[0].Header.KeyID
}

// Opaque access tokens go to the provider's introspection endpoint, found
// through discovery.
func TestRealProviderIntrospection(t *testing.T) {
	t.Parallel()
	o := realOptions()
	o.Opaque = true
	p := oidctest.Start(t, o)
	id, secret := p.IntrospectionClient()
	c := realClock()
	v := realVerifier(t, p, c, func(cfg *Config) {
		cfg.Introspection = &IntrospectionConfig{ClientID: id, ClientSecret: secret}
	})
	ctx := context.Background()
	raw := p.ClientCredentials(t, "robot", "robot-secret", realResource, "skills:read")
	if looksJWT(raw) {
		t.Fatalf("the opaque provider issued a JWT")
	}
	got, err := v.VerifyAccessToken(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "robot" || !slices.Equal(got.Groups, []string{"bots"}) || !slices.Contains(got.Scopes, "skills:read") {
		t.Fatalf("claims %+v", got)
	}
	user := p.AuthCode(t, "web", "web-secret", realCallback, realResource, "u-ada", "openid", "email")
	if got, err = v.VerifyAccessToken(ctx, user); err != nil || got.Subject != "u-ada" || !slices.Equal(got.Groups, []string{"platform", "security"}) {
		t.Fatalf("user's opaque token: %+v, %v", got, err)
	}
	other := p.ClientCredentials(t, "robot", "robot-secret", "https://other.example.test/mcp")
	if _, err := v.VerifyAccessToken(ctx, other); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "wrong audience") {
		t.Fatalf("opaque token for another resource: %v", err)
	}
	if _, err := v.VerifyAccessToken(ctx, "not-a-token-the-provider-issued"); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "inactive") {
		t.Fatalf("unknown opaque token: %v", err)
	}
	p.Stop(t)
	c.Advance(time.Minute) // past the cached answer
	if _, err := v.VerifyAccessToken(ctx, raw); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("introspection with the provider down: %v", err)
	}
}

// Many callers presenting a freshly rotated key at once share one JWKS
// fetch at the real provider.
func TestRealProviderConcurrentRefresh(t *testing.T) {
	t.Parallel()
	p := oidctest.Start(t, realOptions())
	v := realVerifier(t, p, realClock())
	ctx := context.Background()
	if _, err := v.VerifyAccessToken(ctx, p.ClientCredentials(t, "robot", "robot-secret", realResource)); err != nil {
		t.Fatal(err)
	}
	p.Rotate(t)
	tok := p.ClientCredentials(t, "robot", "robot-secret", realResource)
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() { _, errs[i] = v.VerifyAccessToken(ctx, tok) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
}

// The negative cases, minted by the real provider's keys (and a foreign
// one): each is refused as ErrInvalidToken, naming its check.
func TestRealProviderRefusals(t *testing.T) {
	t.Parallel()
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			o := realOptions()
			o.Algorithm = alg
			p := oidctest.Start(t, o)
			c := realClock()
			v := realVerifier(t, p, c)
			ctx := context.Background()
			claims := func(edit func(map[string]any)) map[string]any {
				m := p.Claims("u-ada", realResource)
				if edit != nil {
					edit(m)
				}
				return m
			}
			now := c.Now()
			tests := []struct {
				name   string
				raw    string
				reason string // empty: valid
			}{
				{name: "current key", raw: p.Sign(t, claims(nil), oidctest.KeyCurrent)},
				{name: "expired within the skew", raw: p.Sign(t, claims(func(m map[string]any) { m["exp"] = now.Add(-50 * time.Second).Unix() }), oidctest.KeyCurrent)},
				{name: "expired", raw: p.Sign(t, claims(func(m map[string]any) { m["exp"] = now.Add(-2 * time.Minute).Unix() }), oidctest.KeyCurrent), reason: "expired"},
				{name: "not yet valid", raw: p.Sign(t, claims(func(m map[string]any) { m["nbf"] = now.Add(2 * time.Minute).Unix() }), oidctest.KeyCurrent), reason: "not valid yet"},
				{name: "another audience", raw: p.Sign(t, claims(func(m map[string]any) { m["aud"] = "https://other.example.test/mcp" }), oidctest.KeyCurrent), reason: "wrong audience"},
				{name: "another issuer", raw: p.Sign(t, claims(func(m map[string]any) { m["iss"] = "https://evil.example.test" }), oidctest.KeyCurrent), reason: "wrong issuer"},
				{name: "foreign key, its own kid", raw: p.Sign(t, claims(nil), oidctest.KeyForeign), reason: "unknown key id"},
				{name: "foreign key under the provider's kid", raw: p.Sign(t, claims(nil), oidctest.KeyForeignSameKID), reason: "bad signature"},
				{name: "alg none", raw: p.Sign(t, claims(nil), oidctest.KeyNone), reason: "algorithm not allowed"},
				{name: "HS256 keyed with the public key", raw: p.Sign(t, claims(nil), oidctest.KeyHS256), reason: "algorithm not allowed"},
			}
			for _, tt := range tests {
				got, err := v.VerifyAccessToken(ctx, tt.raw)
				switch {
				case tt.reason == "" && (err != nil || got.Subject != "u-ada"):
					t.Errorf("%s: %+v, %v", tt.name, got, err)
				case tt.reason != "" && (!errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tt.reason)):
					t.Errorf("%s: err = %v, want ErrInvalidToken saying %q", tt.name, err, tt.reason)
				}
			}
		})
	}
}
