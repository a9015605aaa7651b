package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/oidctest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/mcp"
)

// startOIDCDaemon starts a daemon whose public_url is its own loopback
// address (the resource its tokens are issued for), from YAML with
// "PUBLIC_URL" in it, and waits until it is ready. The config is written
// to a file, so that the test can reload it.
func startOIDCDaemon(t *testing.T, yaml string) (*testDaemon, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startOIDCDaemonOn(t, ln, yaml)
}

// startOIDCDaemonOn is startOIDCDaemon on a listener the test bound (to
// know the URL first).
func startOIDCDaemonOn(t *testing.T, ln net.Listener, yaml string) (*testDaemon, string) {
	t.Helper()
	base := "http://" + ln.Addr().String()
	path := filepath.Join(t.TempDir(), "skillreg.yaml")
	yaml = strings.ReplaceAll(yaml, "PUBLIC_URL", base)
	if err := os.WriteFile(path, []byte("listen: "+ln.Addr().String()+"\ndata_dir: "+t.TempDir()+"\n"+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelWarn))
	if err != nil {
		t.Fatal(err)
	}
	// Serve on the listener the URL was made from (what Listen does).
	d.ln = d.limitListener(ln)
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
	td := &testDaemon{d, base}
	waitUntil(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return td, path
}

func postInitialize(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestOIDCGate runs the daemon against a real provider on loopback: the
// 401 challenge and the protected resource metadata it points to, a valid
// token seeing exactly its rule's sources on /mcp, the discovery index and
// /readyz, a missing scope (403), a token for another resource (401), and
// a reload that changes the rules but keeps the verifier.
func TestOIDCGate(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{Clients: []oidctest.Client{
		{ID: "agent-platform", Secret: "secret-p", Groups: []string{"platform"}},
		{ID: "agent-sales", Secret: "secret-s", Groups: []string{"sales"}},
	}})
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "acme", "deploy"), "deploy", nil)
	writeSkill(t, filepath.Join(root, "platform", "lint"), "lint", nil)
	sources := "sources:\n  - name: acme\n    dir: " + root + "/acme\n  - name: platform\n    dir: " + root + "/platform\n"
	oidcYAML := "public_url: PUBLIC_URL\noidc:\n  issuer: " + p.Issuer() + "\n  scopes: [skills:read]\n"
	d, path := startOIDCDaemon(t, sources+oidcYAML+"access:\n  - groups: [platform]\n    sources: [platform]\n")
	resource := d.URL + "/mcp"
	prmURL := d.URL + "/.well-known/oauth-protected-resource"

	// No credential: the challenge that starts OAuth discovery.
	r := postInitialize(t, d.URL, "")
	if want := `Bearer resource_metadata="` + prmURL + `", scope="skills:read"`; r.StatusCode != 401 || r.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q, want 401 %q", r.StatusCode, r.Header.Get("WWW-Authenticate"), want)
	}
	for _, u := range []string{prmURL, prmURL + "/mcp"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
			Bearer               []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || doc.Resource != resource || !slices.Equal(doc.AuthorizationServers, []string{p.Issuer()}) ||
			!slices.Equal(doc.Scopes, []string{"skills:read"}) || !slices.Equal(doc.Bearer, []string{"header"}) {
			t.Fatalf("GET %s: %d %+v %v", u, resp.StatusCode, doc, err)
		}
	}

	platform := p.ClientCredentials(t, "agent-platform", "secret-p", resource, "skills:read")
	sales := p.ClientCredentials(t, "agent-sales", "secret-s", resource, "skills:read")
	noScope := p.ClientCredentials(t, "agent-platform", "secret-p", resource)
	otherAud := p.ClientCredentials(t, "agent-platform", "secret-p", "https://other.example.com/mcp", "skills:read")

	if r := postInitialize(t, d.URL, noScope); r.StatusCode != 403 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Fatalf("without the scope: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	if r := postInitialize(t, d.URL, otherAud); r.StatusCode != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("another resource's token: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}

	list := func(token string) []string {
		t.Helper()
		cs := connectAs(t, d.URL, "2026-07-28", token)
		res, err := sdk.CallCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](context.Background(), cs, "skills/list", &mcp.ListSkillsParams{})
		if err != nil {
			t.Fatal(err)
		}
		if res.CacheScope != "private" {
			t.Errorf("cacheScope %q, want private", res.CacheScope)
		}
		var out []string
		for _, s := range res.Skills {
			out = append(out, s.URI)
		}
		slices.Sort(out)
		return out
	}
	if got := list(platform); !slices.Equal(got, []string{"skill://platform/lint/SKILL.md"}) {
		t.Fatalf("platform sees %v", got)
	}
	if got := list(sales); len(got) != 0 {
		t.Fatalf("sales, matching no rule, sees %v", got)
	}
	// The installers' index and /readyz ask the same gate.
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", d.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/.well-known/agent-skills/index.json", platform); code != 200 || !strings.Contains(body, `"lint"`) || strings.Contains(body, `"deploy"`) {
		t.Fatalf("platform's index: %d %s", code, body)
	}
	if code, body := get("/readyz", platform); code != 200 || !strings.Contains(body, `"generation"`) {
		t.Fatalf("/readyz with a provider token: %d %s", code, body)
	}
	// The git mirror takes the token as git sends it: the Basic password.
	gitRefs := func(repo, token string) int {
		req, _ := http.NewRequest("GET", d.URL+"/git/"+repo+".git/info/refs?service=git-upload-pack", nil)
		req.Header.Set("Git-Protocol", "version=2")
		req.SetBasicAuth("x", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b, c := gitRefs("platform", platform), gitRefs("acme", platform), gitRefs("platform", "forged"); a != 200 || b != 404 || c != 401 {
		t.Fatalf("git mirror with a provider token: platform %d, acme %d, forged %d; want 200 404 401", a, b, c)
	}

	// A reload that changes the rules: the same token sees the new ones
	// at once, and the verifier (with its cached keys) is kept.
	v := d.running().oidc.verifier
	if err := os.WriteFile(path, []byte("listen: "+d.Addr()+"\ndata_dir: "+d.running().cfg.DataDir+"\n"+strings.ReplaceAll(sources+oidcYAML, "PUBLIC_URL", d.URL)+
		"access:\n  - groups: [platform, sales]\n    sources: [acme]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if d.running().oidc.verifier != v {
		t.Error("a reload that kept the oidc section made a new verifier")
	}
	if got := list(sales); !slices.Equal(got, []string{"skill://acme/deploy/SKILL.md"}) {
		t.Fatalf("after the reload sales sees %v", got)
	}

	// A reload onto another provider: a new verifier, and the first
	// provider's tokens are refused from then on.
	p2 := oidctest.Start(t, oidctest.Options{Clients: []oidctest.Client{{ID: "agent-platform", Secret: "secret-2", Groups: []string{"platform"}}}})
	if err := os.WriteFile(path, []byte("listen: "+d.Addr()+"\ndata_dir: "+d.running().cfg.DataDir+"\n"+sources+
		"public_url: "+d.URL+"\noidc:\n  issuer: "+p2.Issuer()+"\naccess:\n  - groups: [platform]\n    sources: [platform]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = config.Load(path); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if d.running().oidc.verifier == v {
		t.Fatal("a new issuer kept the old verifier")
	}
	if r := postInitialize(t, d.URL, platform); r.StatusCode != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("the old provider's token after the switch: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	if got := list(p2.ClientCredentials(t, "agent-platform", "secret-2", resource)); !slices.Equal(got, []string{"skill://platform/lint/SKILL.md"}) {
		t.Fatalf("the new provider's token sees %v", got)
	}
}

// TestOIDCSecretsRequired: a serving daemon refuses to start when an
// environment variable the oidc section names is empty, naming the key
// (sync and stdio read no such setting: TestSyncBuildsNoSurface).
func TestOIDCSecretsRequired(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"  introspection:\n    client_id: c\n    client_secret_env: SKILLREG_TEST_UNSET_SECRET\n", "oidc.introspection.client_secret_env: the environment variable SKILLREG_TEST_UNSET_SECRET is empty"},
		{"  client_id: web\n  client_secret_env: SKILLREG_TEST_UNSET_SECRET\n", "oidc.client_secret_env: the environment variable SKILLREG_TEST_UNSET_SECRET is empty"},
	} {
		cfg, err := config.Parse([]byte("public_url: http://127.0.0.1:1\noidc:\n  issuer: http://127.0.0.1:1\n"+tc.yaml), "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = t.TempDir()
		_, err = NewDaemon(cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewDaemon = %v, want %q", err, tc.want)
		}
	}
	t.Setenv("SKILLREG_TEST_SET_SECRET", "s3cr3t-value")
	cfg, err := config.Parse([]byte("public_url: http://127.0.0.1:1\noidc:\n  issuer: http://127.0.0.1:1\n  client_id: web\n  client_secret_env: SKILLREG_TEST_SET_SECRET\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	d, err := NewDaemon(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if or := d.running().oidc; or.clientSecret != "s3cr3t-value" || !slices.Contains(or.secrets, "s3cr3t-value") {
		t.Fatalf("web client secret %q, scrubbed %v", or.clientSecret, len(or.secrets))
	}
}

// TestOIDCProviderUnreachable: with the provider down before the daemon
// ever reached it (no keys cached), a provider token can be neither
// accepted nor refused: 503 with Retry-After, never a failed attempt, so
// however often it is retried the address is not locked out (a client
// token from it still works).
func TestOIDCProviderUnreachable(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{Clients: []oidctest.Client{{ID: "agent", Secret: "s", Groups: []string{"g"}}}})
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one", "a"), "a", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tok := p.ClientCredentials(t, "agent", "s", "http://"+ln.Addr().String()+"/mcp")
	p.Stop(t)
	clientTok, hash, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := startOIDCDaemonOn(t, ln, "sources:\n  - name: one\n    dir: "+root+"/one\npublic_url: PUBLIC_URL\noidc:\n  issuer: "+p.Issuer()+
		"\naccess:\n  - groups: [g]\n    sources: [one]\nclients:\n  - name: ci\n    token_sha256: "+hash+"\n    sources: [\"*\"]\n")
	for range 20 {
		req, _ := http.NewRequest("POST", d.URL+"/mcp", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("WWW-Authenticate") != "" {
			t.Fatalf("provider down: %d %q, want 503 with Retry-After", resp.StatusCode, resp.Header)
		}
	}
	if r := postInitialize(t, d.URL, clientTok); r.StatusCode != http.StatusOK {
		t.Fatalf("a client token after 20 answers of 503: %d, want 200 (no lock-out)", r.StatusCode)
	}
}

// TestOIDCReloadRefused: a reload whose oidc section cannot apply (an
// empty secret; oidc on a daemon started without public_url, which only a
// restart sets) is refused, and the running gate stays.
func TestOIDCReloadRefused(t *testing.T) {
	_, hash, _ := access.NewToken()
	clients := "clients:\n  - name: ci\n    token_sha256: " + hash + "\n    sources: [\"*\"]\n"
	d := startDaemon(t, clients, "")
	g := d.currentGate()
	for _, tc := range []struct{ yaml, want string }{
		{"public_url: http://127.0.0.1:1\noidc:\n  issuer: http://127.0.0.1:1\n", "oidc: requires public_url, which only a restart sets"},
	} {
		cfg, err := config.Parse([]byte(clients+tc.yaml), "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen, cfg.DataDir = d.running().cfg.Listen, d.running().cfg.DataDir
		if err := d.Reload(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Reload = %v, want %q", err, tc.want)
		}
		if d.currentGate() != g || d.currentGate().OIDC() {
			t.Error("a refused reload changed the gate")
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	od, path := startOIDCDaemonOn(t, ln, clients+"public_url: PUBLIC_URL\noidc:\n  issuer: http://127.0.0.1:1\n")
	g = od.currentGate()
	cfg, err := config.Parse([]byte(clients+"public_url: "+od.URL+"\noidc:\n  issuer: http://127.0.0.1:1\n  introspection:\n    client_id: c\n    client_secret_env: SKILLREG_TEST_UNSET_SECRET\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir, cfg.Path = od.running().cfg.Listen, od.running().cfg.DataDir, path
	if err := od.Reload(cfg); err == nil || !strings.Contains(err.Error(), "oidc.introspection.client_secret_env") {
		t.Errorf("Reload with an empty secret = %v", err)
	}
	if od.currentGate() != g {
		t.Error("a refused reload changed the gate")
	}
}
