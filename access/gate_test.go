package access

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/oidc"
)

// tokenTable is the test TokenVerifier: a token is valid when the table
// has it, refused (oidc.ErrInvalidToken) when not; "down" answers
// oidc.ErrUnavailable, as a verifier does with the provider unreachable.
type tokenTable struct {
	claims map[string]oidc.Claims
	calls  atomic.Int64
}

func (v *tokenTable) VerifyAccessToken(_ context.Context, raw string) (oidc.Claims, error) {
	v.calls.Add(1)
	if raw == "down" {
		return oidc.Claims{}, fmt.Errorf("discovery: %w", oidc.ErrUnavailable)
	}
	c, ok := v.claims[raw]
	if !ok {
		return oidc.Claims{}, fmt.Errorf("signature: %w", oidc.ErrInvalidToken)
	}
	return c, nil
}

func testClients(t *testing.T) (*Clients, string) {
	t.Helper()
	tok, hash, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHash(hash)
	return New([]Client{{Name: "ci", Hash: h, Sources: []string{"ops"}}}), tok
}

func sources(f catalog.Filter) string {
	if f.Only == nil {
		return "*"
	}
	var out []string
	for s, ok := range f.Only {
		if ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestGateAuthenticate(t *testing.T) {
	clients, clientTok := testClients(t)
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	v := &tokenTable{claims: map[string]oidc.Claims{
		"alice":   {Subject: "u1", Email: "alice@example.com", EmailVerified: true, Groups: []string{"platform"}, Scopes: []string{"skills:read"}, Expiry: exp},
		"bob":     {Subject: "u2", Groups: []string{"sales"}, Scopes: []string{"skills:read", "openid"}, Expiry: exp},
		"noscope": {Subject: "u3", Groups: []string{"platform"}, Expiry: exp},
		"nobody":  {Subject: "u4", Scopes: []string{"skills:read"}, Expiry: exp},
	}}
	rules := Rules{
		{Groups: []string{"platform"}, Sources: []string{"acme", "platform"}},
		{Subjects: []string{"u2"}, Sources: []string{"sales"}},
	}
	oidcGate := NewGate(GateOptions{Clients: clients, Rules: rules, Verifier: v, Scopes: []string{"skills:read"}})
	clientGate := NewGate(GateOptions{Clients: clients})
	for _, tc := range []struct {
		name    string
		g       *Gate
		token   string
		kind    Kind
		who     string
		sees    string
		wantErr error
	}{
		{"open, no token", NewGate(GateOptions{}), "", KindNone, "", "*", nil},
		{"open, any token", nil, "whatever", KindNone, "", "*", nil},
		{"clients, no token", clientGate, "", KindNone, "", "", ErrNoCredential},
		{"clients, client token", clientGate, clientTok, KindClient, "ci", "ops", nil},
		{"clients, wrong token", clientGate, clientTok + "x", KindNone, "", "", ErrInvalidCredential},
		{"clients, a provider token", clientGate, "alice", KindNone, "", "", ErrInvalidCredential},
		{"oidc, client token first", oidcGate, clientTok, KindClient, "ci", "ops", nil},
		{"oidc, group rule", oidcGate, "alice", KindOIDC, "alice@example.com", "acme,platform", nil},
		{"oidc, subject rule, name without email", oidcGate, "bob", KindOIDC, "u2", "sales", nil},
		{"oidc, no rule: nothing", oidcGate, "nobody", KindOIDC, "u4", "", nil},
		{"oidc, refused token", oidcGate, "forged", KindNone, "", "", ErrInvalidCredential},
		{"oidc, a revoked client token", oidcGate, clientTok + "x", KindNone, "", "", ErrInvalidCredential},
		{"oidc, provider down", oidcGate, "down", KindNone, "", "", oidc.ErrUnavailable},
		{"oidc, missing scope", oidcGate, "noscope", KindOIDC, "u3", "acme,platform", ErrInsufficientScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.g.Authenticate(context.Background(), tc.token)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, oidc.ErrUnavailable) && errors.Is(err, ErrInvalidCredential) {
				t.Fatal("an unavailable provider must not look like a wrong token")
			}
			if id.Kind != tc.kind || id.Name != tc.who {
				t.Fatalf("identity %v %q, want %v %q", id.Kind, id.Name, tc.kind, tc.who)
			}
			if (err == nil || errors.Is(err, ErrInsufficientScope)) && sources(id.Filter) != tc.sees {
				t.Fatalf("sees %q, want %q", sources(id.Filter), tc.sees)
			}
			if err != nil && strings.Contains(err.Error(), tc.token) && tc.token != "" {
				t.Fatalf("the error %q holds the token", err)
			}
		})
	}
	// A client token, right or wrong, never goes to the provider.
	before := v.calls.Load()
	oidcGate.Authenticate(context.Background(), clientTok+"y")
	oidcGate.Authenticate(context.Background(), clientTok)
	if v.calls.Load() != before {
		t.Fatal("a client token was sent to the provider's verifier")
	}
	if oidcGate.Required() != true || clientGate.OIDC() || !oidcGate.OIDC() || NewGate(GateOptions{}).Required() {
		t.Fatal("Required/OIDC")
	}
	if !NewGate(GateOptions{Verifier: v}).Required() {
		t.Fatal("OIDC alone must require a credential")
	}
}

func TestRules(t *testing.T) {
	rules := Rules{
		{Groups: []string{"eng"}, Sources: []string{"a"}},
		{Emails: []string{"@Example.com"}, Sources: []string{"b"}},
		{Emails: []string{"carol@other.org"}, Sources: []string{"c"}},
		{Subjects: []string{"root"}, Sources: []string{"*"}},
	}
	for _, tc := range []struct {
		claims oidc.Claims
		sees   string
	}{
		{oidc.Claims{Groups: []string{"eng"}}, "a"},
		{oidc.Claims{Groups: []string{"eng", "x"}, Email: "dave@EXAMPLE.com", EmailVerified: true}, "a,b"},
		{oidc.Claims{Email: "dave@example.com"}, ""}, // unverified: anyone could claim it
		{oidc.Claims{Email: "dave@sub.example.com", EmailVerified: true}, ""},
		{oidc.Claims{Email: "mallory@example.com.evil", EmailVerified: true}, ""},
		{oidc.Claims{Email: "Carol@other.org", EmailVerified: true}, "c"},
		{oidc.Claims{Email: "x-carol@other.org", EmailVerified: true}, ""},
		{oidc.Claims{Subject: "root", Groups: []string{"eng"}}, "*"},
		{oidc.Claims{Subject: "ROOT"}, ""},
		{oidc.Claims{Groups: []string{"Eng"}}, ""},
		{oidc.Claims{}, ""},
	} {
		if got := sources(rules.Filter(tc.claims)); got != tc.sees {
			t.Errorf("%+v sees %q, want %q", tc.claims, got, tc.sees)
		}
	}
	// No rule at all: nothing (not everything).
	if f := Rules(nil).Filter(oidc.Claims{Subject: "x"}); f.Only == nil || f.Allows("a") {
		t.Fatal("no rules must show nothing")
	}
}

func TestIdentityKey(t *testing.T) {
	g := NewGate(GateOptions{})
	a := g.FromClaims(oidc.Claims{Subject: "s", Groups: []string{"b", "a", "a"}})
	b := g.FromClaims(oidc.Claims{Subject: "s", Groups: []string{"a", "b"}})
	if a.Key() != b.Key() || !slices.Equal(a.Groups, []string{"a", "b"}) {
		t.Fatalf("same identity, keys %q %q", a.Key(), b.Key())
	}
	distinct := []Identity{
		{Kind: KindOIDC, Subject: "s", Groups: []string{"a", "b"}},
		{Kind: KindOIDC, Subject: "s", Groups: []string{"a"}},
		{Kind: KindOIDC, Subject: "s", Groups: []string{"a|b"}},
		{Kind: KindOIDC, Subject: "s|1:a"},
		{Kind: KindOIDC, Subject: "s", Email: "e@x"},
		{Kind: KindClient, Subject: "s", Groups: []string{"a", "b"}},
		{Kind: KindOIDC, Subject: "t", Groups: []string{"a", "b"}},
		{},
	}
	seen := map[string]int{}
	for i, id := range distinct {
		if j, dup := seen[id.Key()]; dup {
			t.Errorf("identities %d and %d share the key %q", j, i, id.Key())
		}
		seen[id.Key()] = i
	}
}

// TestGateCache: a surface that asks twice for one request (the /mcp
// middleware, then the MCP caller) verifies the token once; the cached
// identity ends with the token's expiry, and a new gate (a reload)
// starts empty.
func TestGateCache(t *testing.T) {
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	v := &tokenTable{claims: map[string]oidc.Claims{
		"t": {Subject: "u", Groups: []string{"g"}, Expiry: now.Add(10 * time.Second)},
	}}
	newGate := func() *Gate {
		return NewGate(GateOptions{Verifier: v, Rules: Rules{{Groups: []string{"g"}, Sources: []string{"a"}}}, Now: func() time.Time { return now }})
	}
	g := newGate()
	for range 3 {
		if id, err := g.Authenticate(context.Background(), "t"); err != nil || id.Subject != "u" {
			t.Fatal(id, err)
		}
	}
	if n := v.calls.Load(); n != 1 {
		t.Fatalf("verified %d times, want 1", n)
	}
	if _, err := g.Authenticate(context.Background(), "forged"); err == nil {
		t.Fatal("forged accepted")
	}
	g.Authenticate(context.Background(), "forged")
	if n := v.calls.Load(); n != 3 {
		t.Fatalf("a refused token must not be cached: %d calls, want 3", n)
	}
	now = now.Add(10 * time.Second) // the token's exp
	g.Authenticate(context.Background(), "t")
	if n := v.calls.Load(); n != 4 {
		t.Fatalf("an expired cache entry was used: %d calls, want 4", n)
	}
	newGate().Authenticate(context.Background(), "t")
	if n := v.calls.Load(); n != 5 {
		t.Fatalf("a new gate reused the old one's cache: %d calls", n)
	}
	// Bounded.
	for i := range cacheSize + 10 {
		g.store([32]byte{byte(i), byte(i >> 8)}, Identity{}, now)
	}
	if len(g.cache) > cacheSize {
		t.Fatalf("cache holds %d, bound %d", len(g.cache), cacheSize)
	}
}

// TestCheckCounts: no credential is never a failed attempt, a wrong token
// always is; an unavailable provider and a missing scope are not.
func TestCheckCounts(t *testing.T) {
	clients, tok := testClients(t)
	v := &tokenTable{claims: map[string]oidc.Claims{"noscope": {Subject: "u"}}}
	var failures atomic.Int64
	g := NewGate(GateOptions{Clients: clients, Verifier: v, Scopes: []string{"s"}, Limiter: NewLimiter(time.Minute, 3), OnFailure: func() { failures.Add(1) }})
	ctx := context.Background()
	for range 50 {
		if _, err := g.Check(ctx, "office", ""); !errors.Is(err, ErrNoCredential) {
			t.Fatal(err)
		}
		if _, err := g.Check(ctx, "office", "down"); !errors.Is(err, oidc.ErrUnavailable) {
			t.Fatal(err)
		}
		if _, err := g.Check(ctx, "office", "noscope"); !errors.Is(err, ErrInsufficientScope) {
			t.Fatal(err)
		}
	}
	if _, err := g.Check(ctx, "office", tok); err != nil || failures.Load() != 0 {
		t.Fatalf("after no credential, an outage and missing scopes: %v, %d failures", err, failures.Load())
	}
	for range 3 {
		if _, err := g.Check(ctx, "office", "wrong"); !errors.Is(err, ErrInvalidCredential) {
			t.Fatal(err)
		}
	}
	if _, err := g.Check(ctx, "office", tok); !errors.Is(err, ErrTooManyAttempts) || failures.Load() != 3 {
		t.Fatalf("after the burst: %v, %d failures", err, failures.Load())
	}
	if _, err := g.Check(ctx, "office", ""); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("no credential over the budget: %v (discovery must still get its challenge)", err)
	}
	if _, err := g.Check(ctx, "elsewhere", tok); err != nil {
		t.Fatalf("another address: %v", err)
	}
}

func TestMiddlewareChallenges(t *testing.T) {
	clients, tok := testClients(t)
	v := &tokenTable{claims: map[string]oidc.Claims{
		"good":    {Subject: "u", Groups: []string{"g"}, Scopes: []string{"skills:read"}},
		"noscope": {Subject: "u"},
	}}
	const prm = "https://skills.example.com/.well-known/oauth-protected-resource"
	oidcGate := NewGate(GateOptions{Clients: clients, Verifier: v, Scopes: []string{"skills:read"}, Rules: Rules{{Groups: []string{"g"}, Sources: []string{"a"}}},
		ResourceMetadataURL: prm, Limiter: NewLimiter(time.Minute, 100)})
	staticGate := NewGate(GateOptions{Clients: clients, Limiter: NewLimiter(time.Minute, 100)})
	current := oidcGate
	var seen Identity
	h := Middleware(func() *Gate { return current }, func(r *http.Request) string { return "1.2.3.4" })(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = IdentityFrom(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	do := func(auth string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/mcp", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		g         *Gate
		auth      string
		code      int
		challenge string
		body      string
	}{
		{oidcGate, "", 401, `Bearer resource_metadata="` + prm + `", scope="skills:read"`, "a bearer token is required"},
		{oidcGate, "Basic dTpw", 401, `Bearer resource_metadata="` + prm + `", scope="skills:read"`, "a bearer token is required"},
		{oidcGate, "Bearer forged", 401, `Bearer resource_metadata="` + prm + `", scope="skills:read", error="invalid_token"`, "invalid_token"},
		{oidcGate, "Bearer noscope", 403, `Bearer resource_metadata="` + prm + `", scope="skills:read", error="insufficient_scope"`, "insufficient_scope"},
		{oidcGate, "Bearer down", 503, "", "temporarily unavailable"},
		{oidcGate, "Bearer good", 204, "", ""},
		{oidcGate, "Bearer " + tok, 204, "", ""},
		{staticGate, "", 401, `Bearer realm="skillreg"`, "a bearer token is required"},
		{staticGate, "Bearer good", 401, `Bearer realm="skillreg", error="invalid_token"`, "invalid_token"},
		{staticGate, "Bearer " + tok, 204, "", ""},
		{nil, "", 204, "", ""},
	} {
		current = tc.g
		r := do(tc.auth)
		if r.Code != tc.code || r.Header().Get("WWW-Authenticate") != tc.challenge || strings.TrimSpace(r.Body.String()) != tc.body {
			t.Errorf("%q: %d %q %q, want %d %q %q", tc.auth, r.Code, r.Header().Get("WWW-Authenticate"), r.Body.String(), tc.code, tc.challenge, tc.body)
		}
		if tc.code == 503 && r.Header().Get("Retry-After") == "" {
			t.Errorf("%q: 503 without Retry-After", tc.auth)
		}
	}
	current = oidcGate
	do("Bearer good")
	if seen.Kind != KindOIDC || seen.Subject != "u" || !seen.Filter.Allows("a") || seen.Filter.Allows("b") {
		t.Fatalf("identity in the context: %+v", seen)
	}
}

func TestResourceMetadata(t *testing.T) {
	g := NewGate(GateOptions{
		Verifier: &tokenTable{}, Scopes: []string{"skills:read"},
		Resource: "https://skills.example.com/mcp", AuthorizationServers: []string{"https://idp.example.com/realms/org"},
		ResourceMetadataURL: "https://skills.example.com" + ResourceMetadataPath,
	})
	current := g
	h := ResourceMetadataHandler(func() *Gate { return current })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", ResourceMetadataPathMCP, nil))
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s %v", rec.Code, rec.Body, err)
	}
	want := map[string]any{
		"resource":                 "https://skills.example.com/mcp",
		"authorization_servers":    []any{"https://idp.example.com/realms/org"},
		"scopes_supported":         []any{"skills:read"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "skillreg",
	}
	if fmt.Sprint(doc) != fmt.Sprint(want) {
		t.Fatalf("document %v, want %v", doc, want)
	}
	if !slices.Equal(slices.Sorted(maps.Keys(doc)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("keys %v", slices.Sorted(maps.Keys(doc)))
	}
	// Without OIDC there is no document.
	current = NewGate(GateOptions{})
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", ResourceMetadataPath, nil))
	if rec.Code != 404 {
		t.Fatalf("without oidc: %d", rec.Code)
	}
}

// hangUp is a TokenVerifier that refuses every token as the caller hangs
// up: the request's context ends while the provider's answer (an
// introspection saying "inactive", say) is being decided.
type hangUp struct{ cancel context.CancelFunc }

func (h hangUp) VerifyAccessToken(context.Context, string) (oidc.Claims, error) {
	h.cancel()
	return oidc.Claims{}, fmt.Errorf("inactive at introspection: %w", oidc.ErrInvalidToken)
}

// A refusal the verifier decided is a failed attempt even when the caller
// has gone by then: otherwise a guesser who hangs up as soon as its guess
// is sent would never be counted.
func TestCheckCountsRefusalWhenCallerHangsUp(t *testing.T) {
	var failures atomic.Int64
	lim := NewLimiter(time.Minute, 3)
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		g := NewGate(GateOptions{Verifier: hangUp{cancel}, Limiter: lim, OnFailure: func() { failures.Add(1) }})
		if _, err := g.Check(ctx, "guesser", fmt.Sprintf("guess-%d", i)); !errors.Is(err, ErrInvalidCredential) {
			t.Errorf("guess %d: %v, want ErrInvalidCredential", i, err)
		}
	}
	if failures.Load() != 3 || lim.Allow("guesser") {
		t.Fatalf("%d failures counted of 3 refused guesses; address still allowed: %v", failures.Load(), lim.Allow("guesser"))
	}
}

// The key names everything the view depends on: an email matches an
// email rule only when verified, so two identities alike but for that
// see different sources, and must not share a key.
func TestIdentityKeyEmailVerified(t *testing.T) {
	g := NewGate(GateOptions{Rules: Rules{{Emails: []string{"@example.com"}, Sources: []string{"secret"}}}})
	verified := g.FromClaims(oidc.Claims{Subject: "s", Email: "a@example.com", EmailVerified: true})
	unverified := g.FromClaims(oidc.Claims{Subject: "s", Email: "a@example.com"})
	if sources(verified.Filter) == sources(unverified.Filter) {
		t.Fatalf("the rule does not tell them apart: %q", sources(verified.Filter))
	}
	if verified.Key() == unverified.Key() {
		t.Fatalf("identities seeing %q and %q share the key %q", sources(verified.Filter), sources(unverified.Filter), verified.Key())
	}
}

// Undecided credentials are no failed attempts, so the log line they make
// is what bounds them: one per ten seconds, with the count of the others.
func TestUndecidedLoggedSometimes(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_800_000_000, 0)
	g := NewGate(GateOptions{
		Verifier: &tokenTable{},
		Limiter:  NewLimiter(time.Minute, 5),
		Logger:   slog.New(slog.NewJSONHandler(&buf, nil)),
		Now:      func() time.Time { return now },
	})
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	for range 100 {
		if _, err := g.Check(context.Background(), "192.0.2.1", "down"); !errors.Is(err, oidc.ErrUnavailable) {
			t.Fatalf("down: %v", err)
		}
	}
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], `"not_logged_since":0`) {
		t.Fatalf("100 undecided within 10 s logged %d lines: %q", len(l), l)
	}
	now = now.Add(undecidedLogEvery)
	if _, err := g.Check(context.Background(), "192.0.2.1", "down"); !errors.Is(err, oidc.ErrUnavailable) {
		t.Fatalf("down: %v", err)
	}
	if l := lines(); len(l) != 2 || !strings.Contains(l[1], `"not_logged_since":99`) {
		t.Fatalf("after 10 s: %q", l)
	}
}
