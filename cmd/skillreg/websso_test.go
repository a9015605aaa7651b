package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/oidctest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// TestWebSignInThroughDaemon runs the whole daemon with oidc and access
// rules against the loopback provider and signs people in to the web
// catalog as a browser would (a cookie jar, the provider's login form):
// each sees the sources their groups give them, the daemon's log holds
// neither the client secret, a code nor a token, and sign-out goes
// through the provider.
func TestWebSignInThroughDaemon(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "acme", "deploy"), "deploy", nil)
	writeSkill(t, filepath.Join(root, "payroll", "export"), "export", nil)
	port := strconv.Itoa(freePort(t))
	base := "http://127.0.0.1:" + port
	const secret = "web-client-secret-5b1d"
	p := oidctest.Start(t, oidctest.Options{
		Users: []oidctest.User{
			{Subject: "u-alice", Email: "alice@example.com", Password: "pw-alice", Groups: []string{"eng"}},
			{Subject: "u-bob", Email: "bob@example.com", Password: "pw-bob", Groups: []string{"finance", "eng"}},
			{Subject: "u-carol", Email: "carol@example.com", Password: "pw-carol", Groups: []string{"visitors"}},
		},
		Clients: []oidctest.Client{{ID: "skillreg-web", Secret: secret, RedirectURIs: []string{base + "/login/callback"}, PostLogoutRedirectURIs: []string{base + "/logout"}}},
	})
	t.Setenv("SKILLREG_TEST_WEB_SECRET", secret)
	yaml := "listen: 127.0.0.1:" + port + "\npublic_url: " + base + "\n" +
		"sources:\n  - name: acme\n    dir: " + root + "/acme\n  - name: payroll\n    dir: " + root + "/payroll\n" +
		"oidc:\n  issuer: " + p.Issuer() + "\n  client_id: skillreg-web\n  client_secret_env: SKILLREG_TEST_WEB_SECRET\n" +
		"access:\n  - groups: [eng]\n    sources: [acme]\n  - groups: [finance]\n    sources: [payroll]\n"
	cfg, err := config.Parse([]byte(yaml), root)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	logs := &testkit.Buffer{}
	d, err := NewDaemon(cfg, slog.New(slog.NewJSONHandler(io.MultiWriter(logs, testLogLines{t}), &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	td := serveDaemon(t, d)
	waitUntil(t, func() bool {
		resp, err := http.Get(td.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// browser is a person's browser: a cookie jar, redirects followed on
	// the daemon, stopped where they leave for the provider.
	type browser struct {
		hc   *http.Client
		left *url.URL // the last redirect to the provider
	}
	newBrowser := func() *browser {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		b := &browser{}
		b.hc = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != "127.0.0.1:"+port {
				b.left = req.URL
				return http.ErrUseLastResponse
			}
			return nil
		}}
		return b
	}
	get := func(b *browser, target string) (*http.Response, string) {
		t.Helper()
		res, err := b.hc.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}
	var codes []string
	signIn := func(user, password, path string) (*browser, string) {
		t.Helper()
		b := newBrowser()
		res, _ := get(b, base+path)
		if res.StatusCode != http.StatusFound || b.left == nil || !strings.HasPrefix(b.left.String(), p.Issuer()+"/") {
			t.Fatalf("%s without a session: %d, left for %v", path, res.StatusCode, b.left)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cb, err := p.Login(ctx, b.left.String(), user, password)
		if err != nil {
			t.Fatalf("sign in as %s: %v", user, err)
		}
		codes = append(codes, cb.Query().Get("code"))
		res, body := get(b, cb.String())
		return b, strconv.Itoa(res.StatusCode) + " " + res.Request.URL.Path + "\n" + body
	}

	alice, page := signIn("alice@example.com", "pw-alice", "/")
	var bob *browser
	if !strings.HasPrefix(page, "200 /\n") || !strings.Contains(page, "alice@example.com") || !strings.Contains(page, `href="/skills/acme/deploy"`) || strings.Contains(page, "/skills/payroll/") {
		t.Errorf("alice's catalog:\n%s", page)
	}
	bob, page = signIn("bob@example.com", "pw-bob", "/skills/payroll/export")
	if !strings.HasPrefix(page, "200 /skills/payroll/export\n") {
		t.Errorf("bob's payroll skill:\n%.300s", page)
	}
	if res, _ := get(alice, base+"/skills/payroll/export"); res.StatusCode != http.StatusNotFound {
		t.Errorf("alice opened the payroll skill: %d", res.StatusCode)
	}
	_, page = signIn("carol@example.com", "pw-carol", "/")
	if !strings.HasPrefix(page, "403 /login/callback\n") || !strings.Contains(page, "No access") {
		t.Errorf("carol, in no rule's group:\n%.300s", page)
	}

	// Sign out: the session ends, then the provider's.
	req, _ := http.NewRequest(http.MethodPost, base+"/logout", nil)
	req.Header.Set("Origin", base)
	res, err := alice.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || alice.left == nil || alice.left.Path != "/end_session" || alice.left.Query().Get("post_logout_redirect_uri") != base+"/logout" {
		t.Errorf("sign-out: %d, left for %v", res.StatusCode, alice.left)
	}
	alice.left = nil
	if res, _ := get(alice, base+"/"); res.StatusCode != http.StatusFound || alice.left == nil {
		t.Errorf("after sign-out the catalog answered %d without sending alice to the provider", res.StatusCode)
	}

	// A reload that drops oidc.client_id brings the token page back for
	// the static clients (and ends every session); one that restores it
	// sends /login to the provider again.
	reload := func(y string) {
		t.Helper()
		c, err := config.Parse([]byte(y), root)
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = cfg.DataDir
		if err := d.Reload(c); err != nil {
			t.Fatalf("reload: %v", err)
		}
	}
	tok, hash, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	noWebClient := strings.Replace(yaml, "  client_id: skillreg-web\n  client_secret_env: SKILLREG_TEST_WEB_SECRET\n", "", 1) +
		"clients:\n  - name: ci\n    token_sha256: " + hash + "\n    sources: [payroll]\n"
	reload(noWebClient)
	if res, _ := get(bob, base+"/"); res.StatusCode != http.StatusOK || res.Request.URL.Path != "/login" {
		t.Errorf("bob's session after a reload: %d at %s", res.StatusCode, res.Request.URL.Path)
	}
	ci := newBrowser()
	if res, body := get(ci, base+"/login"); res.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Errorf("/login without oidc.client_id: %d, token field %v", res.StatusCode, strings.Contains(body, `name="token"`))
	}
	req, _ = http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err = ci.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/" || !strings.Contains(string(body), `href="/skills/payroll/export"`) || strings.Contains(string(body), "/skills/acme/") {
		t.Errorf("the ci token's catalog: %d at %s", res.StatusCode, res.Request.URL.Path)
	}
	reload(yaml)
	b := newBrowser()
	if res, _ := get(b, base+"/login"); res.StatusCode != http.StatusFound || b.left == nil || !strings.HasPrefix(b.left.String(), p.Issuer()+"/") {
		t.Errorf("/login after oidc.client_id is back: %d, left for %v", res.StatusCode, b.left)
	}

	for what, s := range map[string]string{"client secret": secret, "a JWT": "eyJ"} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the daemon's log holds %s", what)
		}
	}
	for _, c := range codes {
		if c == "" || strings.Contains(logs.String(), c) {
			t.Errorf("the daemon's log holds an authorization code (or none was issued: %q)", c)
		}
	}
}

// testLogLines hands log lines to the test log.
type testLogLines struct{ t *testing.T }

func (w testLogLines) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Behind a proxy that ends TLS the daemon hears plain HTTP, but the
// browser is on public_url's https: the sign-in's cookies are Secure (and
// the flow cookie __Host- prefixed) all the same.
func TestWebSignInCookiesSecureBehindTLSProxy(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "acme", "deploy"), "deploy", nil)
	p := oidctest.Start(t, oidctest.Options{})
	d := startDaemon(t, "public_url: https://skills.example.com\nsources:\n  - name: acme\n    dir: "+root+"/acme\n"+
		"oidc:\n  issuer: "+p.Issuer()+"\n  client_id: skillreg-web\naccess:\n  - groups: [eng]\n    sources: ['*']\n", root)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Get(d.URL + "/login?next=/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	auth, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || auth.Query().Get("redirect_uri") != "https://skills.example.com/login/callback" {
		t.Fatalf("/login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	var flow *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "__Host-skillreg_signin" {
			flow = c
		}
	}
	if flow == nil || !flow.Secure || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode {
		t.Errorf("flow cookie behind a TLS proxy: %v", res.Cookies())
	}
}
