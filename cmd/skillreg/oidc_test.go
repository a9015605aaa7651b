package main

// Issue 20 end to end: the daemon as a resource server of a real OpenID
// Connect provider on loopback (internal/oidctest, built on zitadel's
// OpenID-certified pkg/op), driven by real clients: the official Go SDK's
// MCP client (with a bearer token, and with its own OAuth handler through
// the whole authorization code flow), plain HTTP for the installers'
// endpoints, the real git for the mirror, and the marketplace headersHelper
// script under deploy/.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/oidctest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/internal/tools"
	"github.com/skillreg/skillreg/mcp"
)

// The provider's clients: hosts (Claude Code, Cursor, the SDK) sign people
// in through "hosts"; "robot" is a machine with client credentials, in
// group platform-team.
const (
	hostsClient, hostsSecret = "hosts", "hosts-secret"
	hostsRedirect            = "http://localhost:8976/callback"
	robotClient, robotSecret = "robot", "robot-secret"
	cliClient                = "skillreg-cli"
	userPassword             = "correct horse battery staple"
)

// oidcUsers are the people of the organisation and what access rules of
// oidcAccess give them: a group each (alice, eve), an email domain
// (carol), a subject (bob), nothing (dave).
var oidcUsers = []oidctest.User{
	{Subject: "alice", Email: "alice@acme.example", Password: userPassword, Groups: []string{"acme-devs"}},
	{Subject: "eve", Email: "eve@acme.example", Password: userPassword, Groups: []string{"platform-team", "cafeteria"}},
	{Subject: "carol", Email: "carol@partner.example", Password: userPassword},
	{Subject: "bob", Email: "bob@acme.example", Password: userPassword, Groups: []string{"cafeteria"}},
	{Subject: "dave", Email: "dave@acme.example", Password: userPassword, Groups: []string{"cafeteria"}},
}

const oidcAccess = `access:
  - groups: [acme-devs]
    sources: [acme]
  - groups: [platform-team]
    sources: [platform]
  - emails: ["@partner.example"]
    sources: [platform]
  - subjects: [bob]
    sources: ["*"]
`

// oidcWorld is a provider and a daemon that trusts it.
type oidcWorld struct {
	p        *oidctest.Provider
	d        *testDaemon
	resource string // the MCP URL, the tokens' audience
	log      *testkit.Buffer

	mu     sync.Mutex
	tokens []string // every token the test handled: none may be logged
}

func defaultProviderOptions() oidctest.Options {
	return oidctest.Options{
		Users: oidcUsers,
		Clients: []oidctest.Client{
			{ID: hostsClient, Secret: hostsSecret, RedirectURIs: []string{hostsRedirect}},
			{ID: robotClient, Secret: robotSecret, Groups: []string{"platform-team"}},
			{ID: cliClient, Public: true}, // the headersHelper's device flow
		},
	}
}

// startOIDCWorld starts a provider with o and a daemon serving sources
// acme (skill deploy) and platform (skill lint) with oidc: pointing at it;
// extra is more configuration (access rules, scopes, clients). Access
// control's detail is not given away by the caller's address:
// metrics_networks is empty, so only a credential opens /metrics.
func startOIDCWorld(t *testing.T, o oidctest.Options, extra string) *oidcWorld {
	t.Helper()
	p := oidctest.Start(t, o)
	return startOIDCWorldOn(t, p, extra)
}

// startOIDCWorldOn starts the daemon of startOIDCWorld against provider
// p. Its public_url is its own loopback address, bound before
// the configuration is made and served as it is.
func startOIDCWorldOn(t *testing.T, p *oidctest.Provider, extra string) *oidcWorld {
	t.Helper()
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "acme", "deploy"), "deploy", map[string]string{"ref.md": "acme ref"})
	writeSkill(t, filepath.Join(root, "platform", "lint"), "lint", map[string]string{"ref.md": "platform ref"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	yaml := "listen: " + ln.Addr().String() + "\npublic_url: " + origin + "\n" +
		"http:\n  metrics_networks: []\n" +
		"sources:\n  - name: acme\n    dir: " + root + "/acme\n  - name: platform\n    dir: " + root + "/platform\n" +
		"oidc:\n  issuer: " + p.Issuer() + "\n" + extra
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		ln.Close()
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	cfg.DataDir = t.TempDir()
	w := &oidcWorld{p: p, resource: origin + "/mcp", log: &testkit.Buffer{}}
	log := slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := NewDaemon(cfg, log)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	// The log is read once the daemon has stopped (cleanups run last
	// first), so its shutdown lines are checked too.
	t.Cleanup(func() {
		logged := w.log.String()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, tok := range w.tokens {
			if strings.Contains(logged, tok) {
				t.Errorf("the daemon logged a token")
			}
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logged)
		}
	})
	d.ln = d.limitListener(ln) // what Listen does, on the address the URL names
	d.listener.Store(d.ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	w.d = &testDaemon{d, origin}
	waitUntil(t, func() bool { return d.Registry.Ready() })
	return w
}

// keep records a token the test handles, so that the log can be checked
// for it at the end.
func (w *oidcWorld) keep(tok string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tokens = append(w.tokens, tok)
	return tok
}

// userToken signs user in through the provider's login form (the
// authorization code flow with PKCE) for the daemon's resource, asking for
// openid and scopes.
func (w *oidcWorld) userToken(t *testing.T, user string, scopes ...string) string {
	t.Helper()
	return w.keep(w.p.AuthCode(t, hostsClient, hostsSecret, hostsRedirect, w.resource, user, append([]string{"openid"}, scopes...)...))
}

// robotToken is the machine client's token (client credentials).
func (w *oidcWorld) robotToken(t *testing.T, scopes ...string) string {
	t.Helper()
	return w.keep(w.p.ClientCredentials(t, robotClient, robotSecret, w.resource, scopes...))
}

// mcpStatus sends an MCP initialize with token ("" for none) and returns
// the answer's status, its WWW-Authenticate and its body.
func (w *oidcWorld) mcpStatus(t *testing.T, token string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.d.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// get fetches path with token ("" for none).
func (w *oidcWorld) get(t *testing.T, path, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.d.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b
}

// TestOIDCChallengeAndMetadata: /mcp without a credential answers 401 with
// the RFC 9728 challenge naming the metadata document and the required
// scopes; both metadata URLs serve the resource, the provider, the scopes
// and header-only bearer tokens; the provider's own discovery is what the
// metadata points to.
func TestOIDCChallengeAndMetadata(t *testing.T) {
	t.Parallel()
	w := startOIDCWorld(t, defaultProviderOptions(), "  scopes: [skills.read]\n"+oidcAccess)
	code, challenge, body := w.mcpStatus(t, "")
	wantMeta := `resource_metadata="` + strings.TrimSuffix(w.resource, "/mcp") + `/.well-known/oauth-protected-resource"`
	if code != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, wantMeta) || !strings.Contains(challenge, `scope="skills.read"`) {
		t.Fatalf("no credential: %d %q %q", code, challenge, body)
	}
	if strings.Contains(challenge, "error=") {
		t.Errorf("no credential is not an invalid token: %q", challenge)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		code, b := w.get(t, path, "")
		var md oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal(b, &md); code != 200 || err != nil {
			t.Fatalf("%s: %d %v %s", path, code, err, b)
		}
		if md.Resource != w.resource || !slices.Equal(md.AuthorizationServers, []string{w.p.Issuer()}) ||
			!slices.Equal(md.ScopesSupported, []string{"skills.read"}) || !slices.Equal(md.BearerMethodsSupported, []string{"header"}) {
			t.Errorf("%s: %+v", path, md)
		}
	}
	// What a client does next: the provider's metadata, at the issuer.
	asm, err := auth.GetAuthServerMetadata(context.Background(), w.p.Issuer(), http.DefaultClient)
	if err != nil || asm == nil || asm.Issuer != w.p.Issuer() || asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" {
		t.Fatalf("the provider's metadata: %+v %v", asm, err)
	}

	// A token without the required scope: 403 insufficient_scope, with
	// the scope named so that the host can ask for it.
	code, challenge, _ = w.mcpStatus(t, w.userToken(t, "alice"))
	if code != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope"`) || !strings.Contains(challenge, `scope="skills.read"`) {
		t.Errorf("token without the scope: %d %q", code, challenge)
	}
	if code, challenge, _ := w.mcpStatus(t, w.userToken(t, "alice", "skills.read")); code != 200 {
		t.Errorf("token with the scope: %d %q", code, challenge)
	}
}

// TestOIDCPerGroupCatalogs is the access table of TestPerCallerCatalogs
// with the provider's identities beside a static client: each sees exactly
// its sources on every MCP method and tool (checkSees), on the discovery
// indexes (v0.2, v0.1, per source), the marketplace, the artifacts, the
// git mirror and the operator's endpoints, and a source outside them
// answers exactly like one that does not exist.
func TestOIDCPerGroupCatalogs(t *testing.T) {
	t.Parallel()
	ciTok, ciHash, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	w := startOIDCWorld(t, defaultProviderOptions(), oidcAccess+
		"clients:\n  - name: ci\n    token_sha256: "+ciHash+"\n    sources: [acme]\n")
	w.keep(ciTok)
	callers := []struct {
		name  string
		token string
		sees  []string
	}{
		{"alice (group acme-devs)", w.userToken(t, "alice"), []string{"acme"}},
		{"eve (group platform-team)", w.userToken(t, "eve"), []string{"platform"}},
		{"carol (email domain)", w.userToken(t, "carol"), []string{"platform"}},
		{"bob (subject)", w.userToken(t, "bob"), []string{"acme", "platform"}},
		{"dave (no rule)", w.userToken(t, "dave"), nil},
		{"robot (client credentials, group platform-team)", w.robotToken(t), []string{"platform"}},
		{"ci (static client)", ciTok, []string{"acme"}},
	}
	// Archive URLs as the one who sees everything sees them.
	archives := map[string]string{}
	for _, e := range indexEntries(t, w, "/.well-known/agent-skills/index.json", callers[3].token) {
		archives[e.Name] = e.URL
	}
	if len(archives) != 2 {
		t.Fatalf("bob's index: %v", archives)
	}
	ghostArchive := archives["deploy"][:strings.LastIndex(archives["deploy"], "/")+1] + strings.Repeat("0", 64) + ".zip"

	for _, c := range callers {
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			checkSees(t, connectAs(t, w.d.URL, v, c.token), v+" "+c.name, v, c.sees)
		}
		seesAcme, seesPlatform := slices.Contains(c.sees, "acme"), slices.Contains(c.sees, "platform")
		want := map[string]bool{"deploy": seesAcme, "lint": seesPlatform}

		for _, path := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json"} {
			got := map[string]bool{"deploy": false, "lint": false}
			for _, e := range indexEntries(t, w, path, c.token) {
				got[e.Name] = true
			}
			if !mapsEqualBool(got, want) {
				t.Errorf("%s %s lists %v, want %v", c.name, path, got, want)
			}
		}
		ghostCode, _ := w.get(t, "/sources/ghost/.well-known/agent-skills/index.json", c.token)
		for src, sees := range map[string]bool{"acme": seesAcme, "platform": seesPlatform} {
			code, _ := w.get(t, "/sources/"+src+"/.well-known/agent-skills/index.json", c.token)
			if sees && code != 200 || !sees && code != ghostCode {
				t.Errorf("%s /sources/%s index: %d (a missing source: %d)", c.name, src, code, ghostCode)
			}
		}

		code, b := w.get(t, "/marketplace.json", c.token)
		var market struct{ Plugins []struct{ Name string } }
		if err := json.Unmarshal(b, &market); code != 200 || err != nil {
			t.Fatalf("%s marketplace: %d %v", c.name, code, err)
		}
		got := map[string]bool{"deploy": false, "lint": false}
		for _, pl := range market.Plugins {
			if _, ok := got[pl.Name]; ok {
				got[pl.Name] = true
			}
		}
		if !mapsEqualBool(got, want) {
			t.Errorf("%s marketplace lists %v, want %v", c.name, got, want)
		}

		ghost, _ := w.getURL(t, ghostArchive, c.token)
		for name, sees := range want {
			code, _ := w.getURL(t, archives[name], c.token)
			if sees && code != 200 || !sees && code != ghost {
				t.Errorf("%s archive of %s: %d (a missing one: %d)", c.name, name, code, ghost)
			}
		}

		// The mirror, with the real git and the token as a bearer header.
		for src, sees := range map[string]bool{"acme": seesAcme, "platform": seesPlatform} {
			out, err := gitCLI(t, t.TempDir(), "-c", "http.extraHeader=Authorization: Bearer "+c.token, "ls-remote", w.d.URL+"/git/"+src+".git")
			if sees != (err == nil) {
				t.Errorf("%s git ls-remote %s: %v %s", c.name, src, err, out)
			}
		}

		// Operators' endpoints: any valid credential; none is refused.
		if code, _ := w.get(t, "/metrics", c.token); code != 200 {
			t.Errorf("%s /metrics: %d", c.name, code)
		}
	}
	if code, _ := w.get(t, "/metrics", ""); code != http.StatusForbidden {
		t.Errorf("/metrics without a credential: %d", code)
	}

	// An expired token on every surface besides /mcp: 401, and the caller
	// learns only the standard code.
	expired := w.p.Claims("bob", w.resource)
	expired["exp"] = time.Now().Add(-2 * time.Minute).Unix()
	bad := w.keep(w.p.Sign(t, expired, oidctest.KeyCurrent))
	for _, probe := range []struct {
		path      string
		code      int
		challenge string // in WWW-Authenticate
	}{
		{"/.well-known/agent-skills/index.json", 401, `error="invalid_token"`},
		{"/.well-known/skills/index.json", 401, `error="invalid_token"`},
		{"/marketplace.json", 401, `error="invalid_token"`},
		{strings.TrimPrefix(archives["deploy"], w.d.URL), 401, `error="invalid_token"`},
		{"/git/acme.git/info/refs?service=git-upload-pack", 401, `Basic realm=`}, // so git asks its credential helper
		{"/readyz", 200, ""}, // the readiness bit and counts, no detail
		{"/metrics", 403, ""},
	} {
		req, _ := http.NewRequest("GET", w.d.URL+probe.path, nil)
		req.Header.Set("Authorization", "Bearer "+bad)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		body := string(b)
		if resp.StatusCode != probe.code || !strings.Contains(resp.Header.Get("WWW-Authenticate"), probe.challenge) ||
			strings.Contains(body, "expir") || strings.Contains(body, "generation") || probe.code == 401 && !strings.Contains(body, "invalid_token") {
			t.Errorf("an expired token on %s: %d %q %q", probe.path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
}

func mapsEqualBool(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

type indexEntry struct {
	Name, URL, Digest string
}

// indexEntries reads a discovery index (v0.2 or v0.1) as token sees it.
func indexEntries(t *testing.T, w *oidcWorld, path, token string) []indexEntry {
	t.Helper()
	code, b := w.get(t, path, token)
	var idx struct{ Skills []indexEntry }
	if err := json.Unmarshal(b, &idx); code != 200 || err != nil {
		t.Fatalf("%s: %d %v %s", path, code, err, b)
	}
	return idx.Skills
}

// getURL fetches an absolute URL (or one relative to the daemon) with
// token.
func (w *oidcWorld) getURL(t *testing.T, u, token string) (int, []byte) {
	t.Helper()
	if strings.HasPrefix(u, w.d.URL) {
		u = strings.TrimPrefix(u, w.d.URL)
	} else if pu, err := url.Parse(u); err == nil && pu.IsAbs() {
		u = pu.RequestURI()
	}
	return w.get(t, u, token)
}

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
		c := w.p.Claims("alice", w.resource)
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
		{"a key the provider never published, under its key's id", w.p.Sign(t, claims(nil), oidctest.KeyForeignSameKID)},
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
	// Nine failed attempts so far, and the burst is ten: the next wrong
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

// TestOIDCKeyRotation: the provider rotates its signing key while the
// daemon runs. A token signed by the new key validates at once (its
// unknown key id makes the daemon fetch the keys again), and one signed by
// the old key before the rotation still validates while it is published
// and after.
func TestOIDCKeyRotation(t *testing.T) {
	t.Parallel()
	w := startOIDCWorld(t, defaultProviderOptions(), oidcAccess)
	before := w.userToken(t, "alice")
	beforeUnused := w.userToken(t, "alice")
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", before), "before the rotation", "2025-11-25", []string{"acme"})

	w.p.Rotate(t)
	after := w.userToken(t, "eve")
	if kidOf(t, after) == kidOf(t, before) {
		t.Fatalf("Rotate did not change the signing key (kid %q)", kidOf(t, after))
	}
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", after), "signed by the new key", "2025-11-25", []string{"platform"})
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", beforeUnused), "signed by the old key, first seen after the rotation", "2025-11-25", []string{"acme"})

	w.p.RetireOld(t)
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", w.userToken(t, "bob")), "after the old key is retired", "2025-11-25", []string{"acme", "platform"})
}

// kidOf is the key id in a JWT's header.
func kidOf(t *testing.T, jwt string) string {
	t.Helper()
	head, _, ok := strings.Cut(jwt, ".")
	if !ok {
		t.Fatalf("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	var h struct{ Kid string }
	if err != nil || json.Unmarshal(b, &h) != nil {
		t.Fatalf("a JWT header that does not decode: %v", err)
	}
	return h.Kid
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
	expiredClaims := w.p.Claims("alice", w.resource)
	expiredClaims["iat"], expiredClaims["nbf"], expiredClaims["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-time.Hour).Unix(), time.Now().Add(-2*time.Minute).Unix()
	expired := w.keep(w.p.Sign(t, expiredClaims, oidctest.KeyCurrent))
	foreign := w.keep(w.p.Sign(t, w.p.Claims("alice", w.resource), oidctest.KeyForeign))
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", seen), "before the outage", "2025-11-25", []string{"acme"})

	w.p.Stop(t)
	// First a token whose key the daemon does not know: it tries the
	// provider, fails, and must not drop the keys it has.
	for range 15 { // more than the failed-attempt burst: none of them counts
		if code, _, _ := w.mcpStatus(t, foreign); code != http.StatusServiceUnavailable {
			t.Fatalf("during the outage, a token of an unknown key: %d, want 503", code)
		}
	}
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", seen), "during the outage, a token seen before", "2025-11-25", []string{"acme"})
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", unseen), "during the outage, a token first seen now", "2025-11-25", []string{"platform"})
	if code, ch, _ := w.mcpStatus(t, expired); code != http.StatusUnauthorized || !strings.Contains(ch, "invalid_token") {
		t.Errorf("during the outage, an expired token: %d %q", code, ch)
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
	w := startOIDCWorldOn(t, p, oidcAccess)
	signed := w.keep(p.Sign(t, p.Claims("alice", w.resource), oidctest.KeyCurrent))
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

// TestOIDCOpaqueTokens: a provider that issues opaque access tokens; the
// daemon asks its introspection endpoint, and the identity sees its
// sources; a made-up opaque token is refused.
func TestOIDCOpaqueTokens(t *testing.T) {
	o := defaultProviderOptions()
	o.Opaque = true
	p := oidctest.Start(t, o)
	id, secret := p.IntrospectionClient()
	t.Setenv("SKILLREG_TEST_INTROSPECTION_SECRET", secret)
	w := startOIDCWorldOn(t, p, "  introspection:\n    client_id: "+id+"\n    client_secret_env: SKILLREG_TEST_INTROSPECTION_SECRET\n"+oidcAccess)
	w.keep(secret)
	tok := w.robotToken(t)
	if strings.Count(tok, ".") == 2 {
		t.Fatalf("the provider issued a JWT, not an opaque token")
	}
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", tok), "an opaque token", "2025-11-25", []string{"platform"})
	checkSees(t, connectAs(t, w.d.URL, "2025-11-25", w.userToken(t, "alice")), "a person's opaque token", "2025-11-25", []string{"acme"})
	if code, ch, _ := w.mcpStatus(t, "made-up-opaque-token"); code != http.StatusUnauthorized || !strings.Contains(ch, "invalid_token") {
		t.Errorf("a made-up opaque token: %d %q", code, ch)
	}
}

// TestOIDCSDKClientSignsIn: the official Go SDK's client with its OAuth
// handler (auth.AuthorizationCodeHandler, a pre-registered client with a
// secret, as `claude mcp add --client-id --client-secret` gives Claude
// Code) gets the 401, finds the provider through the protected resource
// metadata, signs alice in through the provider's login form, exchanges
// the code (PKCE, the resource named) and reads the catalog she may see.
func TestOIDCSDKClientSignsIn(t *testing.T) {
	t.Parallel()
	w := startOIDCWorld(t, defaultProviderOptions(), "  scopes: [skills.read]\n"+oidcAccess)
	var authURLs []string
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{
			ClientID:         hostsClient,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: hostsSecret},
			Issuer:           w.p.Issuer(),
		},
		RedirectURL: hostsRedirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			authURLs = append(authURLs, args.URL)
			// The person at the browser: the provider's login form.
			redirect, err := w.p.Login(ctx, args.URL, "alice", userPassword)
			if err != nil {
				return nil, err
			}
			q := redirect.Query()
			if e := q.Get("error"); e != "" {
				return nil, errors.New("the provider answered " + e)
			}
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "oidc-sdk-test", Version: "1"}, nil)
	sdk.AddSendingCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](c, "skills/list")
	sdk.AddSendingCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](c, "skills/get")
	sdk.AddSendingCustomMethod[*mcp.ReadDirectoryParams, *mcp.ReadDirectoryResult](c, "resources/directory/read")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: w.resource, OAuthHandler: handler}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect through the authorization code flow: %v", err)
	}
	defer cs.Close()
	if len(authURLs) != 1 {
		t.Fatalf("the browser was opened %d times, want once", len(authURLs))
	}
	u, _ := url.Parse(authURLs[0])
	q := u.Query()
	if q.Get("resource") != w.resource || q.Get("code_challenge_method") != "S256" || q.Get("scope") != "skills.read" {
		t.Errorf("the authorization request: resource %q, PKCE %q, scope %q", q.Get("resource"), q.Get("code_challenge_method"), q.Get("scope"))
	}
	checkSees(t, cs, "the SDK's OAuth client as alice", "2025-11-25", []string{"acme"})
	ts, _ := handler.TokenSource(ctx)
	if tok, err := ts.Token(); err == nil {
		w.keep(tok.AccessToken)
	}
}

// TestOIDCHeadersHelper runs the marketplace headersHelper of
// deploy/headers-helper as Claude Code would: its JSON header opens the
// marketplace with the machine's sources (client credentials), the cached
// token is reused while the provider is down, and SKILLREG_TOKEN_COMMAND
// takes a token from a command the organisation already has.
func TestOIDCHeadersHelper(t *testing.T) {
	t.Parallel()
	script := headersHelperScript(t)
	w := startOIDCWorld(t, defaultProviderOptions(), oidcAccess)
	cache := t.TempDir()
	runArgs := func(args []string, env ...string) (map[string]string, string, error) {
		cmd := exec.Command(script, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SKILLREG_CACHE_DIR=" + cache}, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var headers map[string]string
		if err == nil {
			if jerr := json.Unmarshal(stdout.Bytes(), &headers); jerr != nil {
				t.Fatalf("the helper printed what is not a JSON object of headers: %v", jerr)
			}
		}
		return headers, stderr.String(), err
	}
	run := func(env ...string) (map[string]string, string, error) { return runArgs(nil, env...) }
	machine := []string{"SKILLREG_OIDC_ISSUER=" + w.p.Issuer(), "SKILLREG_OIDC_CLIENT_ID=" + robotClient,
		"SKILLREG_OIDC_CLIENT_SECRET=" + robotSecret, "SKILLREG_RESOURCE=" + w.resource}
	marketplace := func(headers map[string]string) map[string]bool {
		t.Helper()
		tok, ok := strings.CutPrefix(headers["Authorization"], "Bearer ")
		if !ok {
			t.Fatalf("headers %v: no bearer token", headers)
		}
		w.keep(tok)
		code, b := w.get(t, "/marketplace.json", tok)
		var market struct{ Plugins []struct{ Name string } }
		if err := json.Unmarshal(b, &market); code != 200 || err != nil {
			t.Fatalf("marketplace with the helper's header: %d %v", code, err)
		}
		got := map[string]bool{}
		for _, p := range market.Plugins {
			got[p.Name] = true
		}
		return got
	}

	h1, stderr, err := run(machine...)
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr)
	}
	if got := marketplace(h1); !got["lint"] || got["deploy"] {
		t.Errorf("the machine's marketplace: %v, want lint and not deploy", got)
	}
	if strings.Contains(stderr, robotSecret) || strings.Contains(stderr, strings.TrimPrefix(h1["Authorization"], "Bearer ")) {
		t.Errorf("the helper's stderr holds a secret: %q", stderr)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "token-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the cache file's mode: %v %v", st.Mode(), err)
	}

	// The cached token, while it lasts: the provider is not asked.
	w.p.Stop(t)
	h2, stderr, err := run(machine...)
	if err != nil || h2["Authorization"] != h1["Authorization"] {
		t.Fatalf("with the provider down, the cached token: %v %v\n%s", h2, err, stderr)
	}
	w.p.Restart(t)

	// A command the organisation already has.
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte(w.userToken(t, "alice")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h3, stderr, err := run("SKILLREG_TOKEN_COMMAND=cat " + tokFile)
	if err != nil {
		t.Fatalf("SKILLREG_TOKEN_COMMAND: %v\n%s", err, stderr)
	}
	if got := marketplace(h3); !got["deploy"] || got["lint"] {
		t.Errorf("alice's marketplace: %v, want deploy and not lint", got)
	}
	// A command whose output is no bearer token breaks nothing: the
	// helper fails and says so.
	if _, stderr, err := run(`SKILLREG_TOKEN_COMMAND=echo 'x", "Cookie": "y'`); err == nil || !strings.Contains(stderr, "not a bearer token") {
		t.Errorf("a command printing junk: %v %q", err, stderr)
	}
	// A device flow the provider refuses (a confidential client without
	// its secret) ends at once, naming the provider's error.
	if _, stderr, err := runArgs([]string{"login"}, "SKILLREG_OIDC_ISSUER="+w.p.Issuer(), "SKILLREG_OIDC_CLIENT_ID="+hostsClient, "SKILLREG_RESOURCE="+w.resource); err == nil || !strings.Contains(stderr, "refused: invalid_client") {
		t.Errorf("login refused by the provider: %v %q", err, stderr)
	}
	// Without a token and without a secret, it does not wait for a person.
	if _, stderr, err := run("SKILLREG_OIDC_ISSUER="+w.p.Issuer(), "SKILLREG_OIDC_CLIENT_ID="+hostsClient, "SKILLREG_RESOURCE="+w.resource,
		"SKILLREG_CACHE_DIR="+t.TempDir()); err == nil || !strings.Contains(stderr, "skillreg-headers login") {
		t.Errorf("no token yet: %v %q", err, stderr)
	}
}

// TestOIDCHeadersHelperDeviceFlow: a person signs the headersHelper in
// once with the provider's device flow (`skillreg-headers login` prints
// where to go; the person approves there), and from then on the helper
// prints a header with that person's token, which opens the marketplace
// with exactly their sources.
func TestOIDCHeadersHelperDeviceFlow(t *testing.T) {
	t.Parallel()
	script := headersHelperScript(t)
	w := startOIDCWorld(t, defaultProviderOptions(), oidcAccess)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SKILLREG_CACHE_DIR=" + t.TempDir(),
		"SKILLREG_OIDC_ISSUER=" + w.p.Issuer(), "SKILLREG_OIDC_CLIENT_ID=" + cliClient, "SKILLREG_RESOURCE=" + w.resource}

	login := exec.Command(script, "login")
	login.Env = env
	stderr, err := login.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	lines := bufio.NewScanner(stderr)
	verification := ""
	for verification == "" && lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if u, ok := strings.CutPrefix(lines.Text(), "Open "); ok {
			verification = u
		}
	}
	if verification == "" {
		login.Wait()
		t.Fatalf("login said no verification URI:\n%s", said.String())
	}
	// The person, on another device.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.p.ApproveDevice(ctx, verification, "alice", userPassword); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
	}
	if err := login.Wait(); err != nil || !strings.Contains(said.String(), "signed in") {
		t.Fatalf("login: %v\n%s", err, said.String())
	}

	helper := exec.Command(script)
	helper.Env = env
	out, err := helper.Output()
	if err != nil {
		t.Fatalf("the helper after login: %v", err)
	}
	var headers map[string]string
	if err := json.Unmarshal(out, &headers); err != nil {
		t.Fatalf("the helper printed what is not a JSON object of headers: %v", err)
	}
	tok, ok := strings.CutPrefix(headers["Authorization"], "Bearer ")
	if !ok {
		t.Fatalf("headers %v: no bearer token", headers)
	}
	w.keep(tok)
	if strings.Contains(said.String(), tok) {
		t.Errorf("login printed the token")
	}
	code, b := w.get(t, "/marketplace.json", tok)
	var market struct{ Plugins []struct{ Name string } }
	if err := json.Unmarshal(b, &market); code != 200 || err != nil {
		t.Fatalf("marketplace with the helper's header: %d %v", code, err)
	}
	got := map[string]bool{}
	for _, p := range market.Plugins {
		got[p.Name] = true
	}
	if !got["deploy"] || got["lint"] {
		t.Errorf("alice's marketplace through the device flow: %v, want deploy and not lint", got)
	}
}

// headersHelperScript is the path of deploy/headers-helper's script, once
// the tools it runs (curl, jq) are found.
func headersHelperScript(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			tools.Missing(t, "the headersHelper needs "+tool+" (make test installs it: scripts/install-debian-tools.sh)")
		}
	}
	script, err := filepath.Abs("../../deploy/headers-helper/skillreg-headers")
	if err != nil {
		t.Fatal(err)
	}
	return script
}
