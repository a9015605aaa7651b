//go:build oidcsign

package main

// The tests that need oidctest's Sign (tokens for the negative cases):
// built with -tags oidcsign until internal/oidctest has it.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/oidctest"
)

// TestOIDCRefusedTokens: an expired token, one for another audience, one
// signed by a key the provider never published, alg none, HS256 with the
// provider's public key as the secret, a token of another issuer and
// garbage are each refused with 401 invalid_token (only the code: the
// reason is in the log, the token is not), and each is a failed attempt;
// requests without any credential are not, however many come.
func TestOIDCRefusedTokens(t *testing.T) {
	t.Parallel()
	w := startOIDCWorld(t, defaultProviderOptions(), oidcAccess)
	good := w.userToken(t, "alice")
	if code, ch, _ := w.mcpStatus(t, good); code != 200 {
		t.Fatalf("a good token: %d %q", code, ch)
	}
	now := time.Now()
	claims := func(mod map[string]any) map[string]any {
		c := map[string]any{
			"iss": w.p.Issuer(), "sub": "alice", "aud": w.resource, "email": "alice@acme.example",
			"groups": []string{"acme-devs"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}
		for k, v := range mod {
			c[k] = v
		}
		return c
	}
	// Signed by the provider's own current key: valid but for the claim
	// each changes.
	if code, ch, _ := w.mcpStatus(t, w.keep(w.p.Sign(t, claims(nil), oidctest.KeyCurrent))); code != 200 {
		t.Fatalf("a token Sign made valid: %d %q", code, ch)
	}
	// No credential, many times over: never a failed attempt.
	for range 30 {
		if code, _, _ := w.mcpStatus(t, ""); code != http.StatusUnauthorized {
			t.Fatalf("no credential: %d, want 401 every time", code)
		}
	}
	refused := []struct{ name, token string }{
		{"expired beyond the skew", w.p.Sign(t, claims(map[string]any{"iat": now.Add(-2 * time.Hour).Unix(), "exp": now.Add(-2 * time.Minute).Unix()}), oidctest.KeyCurrent)},
		{"not valid yet beyond the skew", w.p.Sign(t, claims(map[string]any{"nbf": now.Add(5 * time.Minute).Unix()}), oidctest.KeyCurrent)},
		{"another audience (a real token)", w.p.ClientCredentials(t, robotClient, robotSecret, "https://other.example/mcp")},
		{"another issuer", w.p.Sign(t, claims(map[string]any{"iss": "https://other-idp.example"}), oidctest.KeyCurrent)},
		{"a key the provider never published", w.p.Sign(t, claims(nil), oidctest.KeyForeign)},
		{"alg none", w.p.Sign(t, claims(nil), oidctest.KeyNone)},
		{"HS256 keyed with the public key", w.p.Sign(t, claims(nil), oidctest.KeyHS256)},
		{"garbage", "not.a.token"},
	}
	for _, r := range refused {
		code, ch, body := w.mcpStatus(t, w.keep(r.token))
		if code != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token"`) || !strings.Contains(ch, "resource_metadata=") {
			t.Errorf("%s: %d %q", r.name, code, ch)
		}
		if strings.TrimSpace(body) != "invalid_token" {
			t.Errorf("%s: the body says more than the code: %q", r.name, body)
		}
	}
	if !strings.Contains(w.log.String(), "credential refused") {
		t.Errorf("the log does not say why tokens were refused")
	}
	// Eight failed attempts so far, and the burst is ten: the next wrong
	// ones exhaust it, and then even the good token waits.
	limited := false
	for range 5 {
		if code, _, _ := w.mcpStatus(t, "not.a.token"); code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("wrong tokens were not rate-limited")
	}
	if code, _, _ := w.mcpStatus(t, good); code != http.StatusTooManyRequests {
		t.Errorf("the good token after the budget is spent: %d, want 429", code)
	}
}

// TestOIDCProviderDown: with the provider down, a token signed by a key
// the daemon has cached validates (even one it never saw before) until its
// exp, an expired one does not, and a token whose key the daemon does not
// know cannot be decided: 503, not a failed attempt. The provider back up,
// new sign-ins work.
func TestOIDCProviderDown(t *testing.T) {
	t.Parallel()
	o := defaultProviderOptions()
	w := startOIDCWorld(t, o, oidcAccess)
	seen := w.userToken(t, "alice")
	unseen := w.userToken(t, "eve")
	expired := w.keep(w.p.Sign(t, map[string]any{
		"iss": w.p.Issuer(), "sub": "alice", "aud": w.resource, "groups": []string{"acme-devs"},
		"iat": time.Now().Add(-time.Hour).Unix(), "exp": time.Now().Add(-2 * time.Minute).Unix(),
	}, oidctest.KeyCurrent))
	foreign := w.keep(w.p.Sign(t, map[string]any{
		"iss": w.p.Issuer(), "sub": "alice", "aud": w.resource, "groups": []string{"acme-devs"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}, oidctest.KeyForeign))
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", seen), "before the outage", "2025-11-25", []string{"acme"})

	w.p.Stop(t)
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", seen), "during the outage, a token seen before", "2025-11-25", []string{"acme"})
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", unseen), "during the outage, a token first seen now", "2025-11-25", []string{"platform"})
	if code, ch, _ := w.mcpStatus(t, expired); code != http.StatusUnauthorized || !strings.Contains(ch, "invalid_token") {
		t.Errorf("during the outage, an expired token: %d %q", code, ch)
	}
	for range 15 { // more than the failed-attempt burst: none of them counts
		if code, _, _ := w.mcpStatus(t, foreign); code != http.StatusServiceUnavailable {
			t.Fatalf("during the outage, a token of an unknown key: %d, want 503", code)
		}
	}
	if code, ch, _ := w.mcpStatus(t, ""); code != http.StatusUnauthorized || !strings.Contains(ch, "resource_metadata=") {
		t.Errorf("during the outage, no credential: %d %q", code, ch)
	}

	w.p.Restart(t)
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", w.userToken(t, "bob")), "after the outage, a new sign-in", "2025-11-25", []string{"acme", "platform"})
}

// TestOIDCDaemonStartsWhileProviderDown: a daemon started while the
// provider is unreachable serves (the probes, the challenge), answers 503
// to a token it cannot check yet (not a failed attempt), and accepts it
// once the provider is back (discovery is retried in the background).
func TestOIDCDaemonStartsWhileProviderDown(t *testing.T) {
	t.Parallel()
	p := oidctest.Start(t, defaultProviderOptions())
	p.Stop(t)
	w := startOIDCDaemon(t, p, p.Issuer(), oidcAccess)
	signed := w.keep(p.Sign(t, map[string]any{
		"iss": p.Issuer(), "sub": "alice", "aud": w.resource, "groups": []string{"acme-devs"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}, oidctest.KeyCurrent))
	if code, ch, _ := w.mcpStatus(t, ""); code != http.StatusUnauthorized || !strings.Contains(ch, "resource_metadata=") {
		t.Errorf("provider down, no credential: %d %q", code, ch)
	}
	for range 15 { // more than the failed-attempt burst: none of them counts
		if code, _, _ := w.mcpStatus(t, signed); code != http.StatusServiceUnavailable {
			t.Fatalf("provider down since the start, a token: %d, want 503", code)
		}
	}
	p.Restart(t)
	waitUntil(t, func() bool {
		code, _, _ := w.mcpStatus(t, signed)
		return code == 200
	})
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", signed), "once the provider is back", "2025-11-25", []string{"acme"})
}

