package oidc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestIntrospection(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := newIDP(t, edSigner(t, "k1"))
	now := c.Now()
	iss := p.srv.URL
	p.opaque["active-token-0123"] = jsonMap{
		"active": true, "iss": iss, "sub": "svc-ci", "aud": []string{testAudience},
		"scope": "skills:read", "client_id": "ci", "groups": []string{"ci"},
		"exp": now.Add(10 * time.Minute).Unix(),
	}
	p.opaque["other-aud-token-0123"] = jsonMap{"active": true, "iss": iss, "sub": "svc-ci", "aud": "https://other.example.com/mcp"}
	p.opaque["no-aud-token-0123"] = jsonMap{"active": true, "iss": iss, "sub": "svc-ci"}
	p.opaque["other-iss-token-0123"] = jsonMap{"active": true, "iss": "https://evil.example.com", "sub": "svc-ci", "aud": testAudience}
	p.opaque["expired-token-0123"] = jsonMap{"active": true, "sub": "svc-ci", "aud": testAudience, "exp": now.Add(-2 * time.Minute).Unix()}
	p.opaque["soon-token-0123"] = jsonMap{"active": true, "sub": "svc-ci", "aud": testAudience, "exp": now.Add(5 * time.Second).Unix()}
	var logs bytes.Buffer
	// The endpoint comes from discovery.
	v := p.verifier(t, c, &logs, func(cfg *Config) {
		cfg.Introspection = &IntrospectionConfig{ClientID: introID, ClientSecret: introSecret}
	})
	ctx := context.Background()
	got, err := v.VerifyAccessToken(ctx, "active-token-0123")
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "svc-ci" || got.Issuer != iss || got.ClientID != "ci" || len(got.Groups) != 1 || got.Groups[0] != "ci" ||
		len(got.Scopes) != 1 || !got.Expiry.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("claims %+v", got)
	}
	for _, tt := range []struct{ token, reason string }{
		{"unknown-token-0123", "inactive"},
		{"other-aud-token-0123", "wrong audience"},
		{"no-aud-token-0123", "wrong audience"},
		{"other-iss-token-0123", "wrong issuer"},
		{"expired-token-0123", "expired"},
	} {
		_, err := v.VerifyAccessToken(ctx, tt.token)
		if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: err = %v, want ErrInvalidToken saying %q", tt.token, err, tt.reason)
		}
		if err != nil && strings.Contains(err.Error(), tt.token) {
			t.Errorf("%s: the token is in the error", tt.token)
		}
	}

	// Active answers are reused for CacheTTL (30 s), never past exp.
	hits := p.introHits.Load()
	c.Advance(20 * time.Second)
	if _, err := v.VerifyAccessToken(ctx, "active-token-0123"); err != nil {
		t.Fatal(err)
	}
	if n := p.introHits.Load(); n != hits {
		t.Fatalf("introspected again within the cache TTL")
	}
	c.Advance(11 * time.Second)
	if _, err := v.VerifyAccessToken(ctx, "active-token-0123"); err != nil {
		t.Fatal(err)
	}
	if n := p.introHits.Load(); n != hits+1 {
		t.Fatalf("%d introspections after the TTL, want %d", n, hits+1)
	}
	if _, err := v.VerifyAccessToken(ctx, "soon-token-0123"); err != nil {
		t.Fatal(err)
	}
	c.Advance(6 * time.Second)
	hits = p.introHits.Load()
	if _, err := v.VerifyAccessToken(ctx, "soon-token-0123"); err != nil {
		t.Fatal(err) // within the skew
	}
	if n := p.introHits.Load(); n != hits+1 {
		t.Fatalf("a cached answer was used past the token's exp")
	}

	// The provider down: ErrUnavailable, not a refusal.
	p.setDown(true)
	if _, err := v.VerifyAccessToken(ctx, "fresh-token-0123"); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("introspection endpoint down: %v", err)
	}
	p.setDown(false)

	for _, secret := range []string{introSecret, "active-token-0123", "fresh-token-0123", "other-aud-token-0123"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log holds a token or the client secret:\n%s", logs.String())
		}
	}

	// Wrong client credentials: the provider answers 401, which is the
	// operator's problem, not the caller's: ErrUnavailable.
	bad := p.verifier(t, c, nil, func(cfg *Config) {
		cfg.Introspection = &IntrospectionConfig{URL: iss + "/introspect", ClientID: introID, ClientSecret: "wrong"}
	})
	_, err = bad.VerifyAccessToken(ctx, "active-token-0123")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong introspection secret: %v", err)
	}
	if bad.meta != nil {
		t.Fatal("a configured introspection URL still ran discovery")
	}

	// A JWT-shaped token is verified locally even with introspection on.
	before := p.introHits.Load()
	if _, err := v.VerifyAccessToken(ctx, "a.b.c"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("malformed JWT: %v", err)
	}
	if p.introHits.Load() != before {
		t.Fatal("a JWT was sent to introspection")
	}
}

func TestIntrospectionAnswerBounded(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := newIDP(t, edSigner(t, "k1"))
	p.opaque["big-token-0123"] = jsonMap{"active": true, "sub": "x", "aud": testAudience, "pad": strings.Repeat("x", maxIntrospectionBytes)}
	p.opaque["many-groups-token"] = jsonMap{"active": true, "sub": "x", "aud": testAudience, "groups": make([]string, maxGroups+1)}
	v := p.verifier(t, c, nil, func(cfg *Config) {
		cfg.Introspection = &IntrospectionConfig{ClientID: introID, ClientSecret: introSecret, CacheTTL: -1}
	})
	hasty := p.verifier(t, c, nil, func(cfg *Config) {
		cfg.Introspection = &IntrospectionConfig{URL: p.srv.URL + "/introspect", ClientID: introID, ClientSecret: introSecret}
		cfg.FetchTimeout = 50 * time.Millisecond
	})
	if _, err := hasty.VerifyAccessToken(context.Background(), "hang-token-0123"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("introspection that never answers: %v", err)
	}
	if _, err := v.VerifyAccessToken(context.Background(), "big-token-0123"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized answer: %v", err)
	}
	if _, err := v.VerifyAccessToken(context.Background(), "many-groups-token"); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "groups") {
		t.Fatalf("too many groups: %v", err)
	}
}
