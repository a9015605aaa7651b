package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/store"
)

// credentials records, per repository path, the passwords a git server
// was shown.
type credentials struct {
	mu   sync.Mutex
	seen map[string][]string // "/acme/skills.git" -> passwords
}

func (c *credentials) record(path, password string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	repo, _, _ := strings.Cut(path, ".git/")
	c.seen[repo+".git"] = append(c.seen[repo+".git"], password)
}

func (c *credentials) of(repo string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen[repo]...)
}

func (c *credentials) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ps := range c.seen {
		out = append(out, ps...)
	}
	return out
}

// appFixture is a fake GitHub with App appID registered, and the App's
// private key in dir/app.pem (with mode perm).
func appFixture(t *testing.T, dir string, appID int64, perm os.FileMode, now ...func() time.Time) (*fakegithub.Server, []byte, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	keyFile := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(keyFile, keyPEM, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	var opts fakegithub.Options
	if len(now) > 0 {
		opts.Now = now[0]
	}
	gh := fakegithub.New(opts)
	t.Cleanup(gh.Close)
	gh.RegisterApp(appID, &key.PublicKey)
	return gh, keyPEM, keyFile
}

// TestGitHubAppAsksNothingBeforeServing: opening a daemon with a GitHub
// App sends nothing to GitHub (the stored catalog is served before any
// network call; tokens are minted by the first sync that needs one), and
// a key file others may read is warned about.
func TestGitHubAppAsksNothingBeforeServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gh, _, keyFile := appFixture(t, dir, 5, 0o644)
	gh.Install(5, "acme", fakegithub.Organization)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`data_dir: %s
github:
  api_url: %s/
  app: {app_id: 5, private_key_file: %s}
sources:
  - name: acme
    url: http://127.0.0.1:9/acme/skills.git
    poll: 0
`, filepath.Join(dir, "data"), gh.URL, keyFile)), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	var logs testkit.Buffer
	d, err := NewDaemon(cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n := gh.Total(); n != 0 {
		t.Fatalf("%d requests to GitHub while the daemon opened", n)
	}
	if !strings.Contains(logs.String(), "may be read by others") {
		t.Fatalf("no warning about the key file's mode:\n%s", logs.String())
	}
}

// TestGitHubAppEndToEnd runs the daemon with a GitHub App against the fake
// GitHub API and a loopback git server that accepts only what GitHub
// accepts (unexpired installation tokens, and github.token_env's token,
// which the fake's API does not take): the App's installation token
// fetches the App's owner's repository and opens the Releases API for its
// release pin; a source's own auth wins over the App; an owner without
// the App falls back to github.token_env. One token is minted and shared.
// Then the key, the JWT and every token are looked for in the log (at
// debug), /readyz, /sources, /metrics, diagnose, the sources' states and
// the store file, with a hostile remote on the GitHub host echoing the
// installation token back in its 401.
func TestGitHubAppEndToEnd(t *testing.T) {
	const (
		appID    = 31337
		envToken = "env-token-for-other-owners"
		ownToken = "own-token-of-a-source"
	)
	t.Setenv("SKILLREG_TEST_GH_TOKEN", envToken)
	t.Setenv("SKILLREG_TEST_OWN_TOKEN", ownToken)
	dir := t.TempDir()
	gh, keyPEM, keyFile := appFixture(t, dir, appID, 0o600)
	acme := gh.Install(appID, "acme", fakegithub.Organization)
	gh.CreateRepo("acme/skills")
	gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.0.0"})

	srv := gittest.NewServer(t)
	creds := &credentials{seen: map[string][]string{}}
	srv.RequireCredential(func(path, user, password string) bool {
		creds.record(path, password)
		return user == "x-access-token" && (gh.ValidToken(password) || password == envToken || password == ownToken)
	})
	for _, name := range []string{"acme/skills", "acme/own", "other/pub"} {
		r := srv.CreateRepo(name)
		skill := strings.ReplaceAll(name, "/", "-")
		r.WriteFiles(map[string]string{skill + "/SKILL.md": "---\nname: " + skill + "\ndescription: A skill of " + name + ".\n---\n"})
		r.Commit("first")
		r.Push("main")
		r.Tag("v1.0.0", true)
	}
	// A remote on the GitHub host that echoes the credential it is sent
	// (the installation token) in its 401.
	echo := gittest.NewEchoServer(t, http.StatusUnauthorized)
	echoURL, _ := url.Parse(echo.URL())

	yaml := fmt.Sprintf(`data_dir: %s
github:
  api_url: %s/
  token_env: SKILLREG_TEST_GH_TOKEN
  app: {app_id: %d, private_key_file: %s}
sources:
  - name: acme
    url: %s/acme/skills.git
    ref: {release: latest}
    poll: 0
  - name: own
    url: %s/acme/own.git
    auth: {token_env: SKILLREG_TEST_OWN_TOKEN}
    poll: 0
  - name: other
    url: %s/other/pub.git
    poll: 0
  - name: hostile
    url: http://127.0.0.1:%s/acme/hostile.git
    poll: 0
`, filepath.Join(dir, "data"), gh.URL, appID, keyFile, srv.URL(), srv.URL(), srv.URL(), echoURL.Port())
	cfg, err := config.Parse([]byte(yaml), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	var logs testkit.Buffer
	d, err := NewDaemon(cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	td := serveDaemon(t, d)

	state := func(name string) catalog.State {
		for _, st := range d.Registry.States() {
			if st.Source == name {
				return st
			}
		}
		return catalog.State{}
	}
	waitUntil(t, func() bool {
		for _, name := range []string{"acme", "own", "other"} {
			if _, ok := d.Registry.Current().Snapshot(name); !ok {
				return false
			}
		}
		st := state("hostile")
		return st.Attempted && st.LastResult == "stalled"
	})
	if snap, _ := d.Registry.Current().Snapshot("acme"); snap.Ref != "release:latest" {
		t.Errorf("acme follows %q", snap.Ref)
	}

	// Who was shown what.
	minted := func(ps []string) bool {
		for _, p := range ps {
			if !strings.HasPrefix(p, "ghs_") {
				return false
			}
		}
		return len(ps) > 0
	}
	if ps := creds.of("/acme/skills.git"); !minted(ps) {
		t.Errorf("the App's owner's repository was fetched with %d credentials, not all installation tokens", len(ps))
	}
	for repo, want := range map[string]string{"/acme/own.git": ownToken, "/other/pub.git": envToken} {
		for _, p := range creds.of(repo) {
			if p != want {
				t.Errorf("%s was shown a credential other than its own (%d bytes)", repo, len(p))
			}
		}
		if len(creds.of(repo)) == 0 {
			t.Errorf("%s was never fetched", repo)
		}
	}
	// One token shared by git and the Releases API, and one more: the
	// hostile remote (on acme, on the GitHub host) refused the first, and
	// a token git refused is replaced once (TestGitHubAppReplacesATokenGitRefused).
	if n := gh.TokensIssued(acme); n != 2 {
		t.Errorf("%d installation tokens minted, want 2 (one shared by git and the Releases API, one after the hostile remote's refusal)", n)
	}
	if a, b := gh.Requests("/orgs/other/installation"), gh.Requests("/users/other/installation"); a != 1 || b != 1 {
		t.Errorf("other's installation looked up %d+%d times, want once each (remembered)", a, b)
	}
	appRequests := gh.Requests("/orgs/acme/installation") + gh.Requests("/users/acme/installation") +
		gh.Requests(fmt.Sprintf("/app/installations/%d/access_tokens", acme)) +
		gh.Requests("/orgs/other/installation") + gh.Requests("/users/other/installation")
	t.Logf("the App's own requests: %d (the README's cost section quotes this)", appRequests)
	if appRequests != 5 {
		t.Errorf("the App sent %d requests, want 5 (acme: lookup, mint, a mint after the hostile remote's refusal; other: two lookups)", appRequests)
	}
	// The Releases API was asked with the installation token: answered,
	// and never 401 (the fake takes no github.token_env token).
	if st := gh.Stats("/repos/acme/skills/releases/latest"); st.Status[http.StatusOK] == 0 || st.Status[http.StatusUnauthorized] != 0 {
		t.Errorf("releases/latest answered %v", st.Status)
	}
	if _, remaining, _ := gh.RateLimit(false); remaining != fakegithub.DefaultAnonymousLimit {
		t.Errorf("%d anonymous requests to the API", fakegithub.DefaultAnonymousLimit-remaining)
	}
	hostile := state("hostile")
	if hostile.Stalled != "auth_refused" {
		t.Errorf("the hostile remote's source: %+v", hostile)
	}

	// Nothing secret anywhere.
	get := func(path string) string {
		resp, err := http.Get(td.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var diag mcp.DiagnoseOutput
	if msg := callTool(t, connect(t, td.URL, "2025-11-25"), "diagnose", map[string]any{}, &diag); msg != "" {
		t.Fatalf("diagnose: %s", msg)
	}
	dj, _ := json.Marshal(diag)
	st, _ := json.Marshal(d.Registry.States())
	shown := map[string]string{
		"registry state": string(st), "/readyz": get("/readyz"), "/sources": get("/sources"),
		"diagnose": string(dj), "/metrics": get("/metrics"), "log": logs.String(),
	}
	if !strings.Contains(shown["log"], "minted a GitHub App installation token") {
		t.Fatal("the log at debug has no mint line: is the App in use?")
	}
	leaks := []string{
		// The JWT's header ({"alg":"RS256","typ":"JWT"}) begins every JWT.
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)),
		"RSA PRIVATE KEY", ownToken, envToken,
	}
	for _, line := range strings.Split(string(keyPEM), "\n") {
		if len(line) > 20 && !strings.HasPrefix(line, "-----") {
			leaks = append(leaks, line)
		}
	}
	// The hostile remote was shown the App's tokens too, one of them
	// (minted after its refusal) perhaps to nobody else.
	shownHostile := echo.Passwords()
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(shownHostile)))); distinct != 2 {
		t.Fatalf("the hostile remote was shown %d distinct credentials, want 2 (the token it refused, the one retry's)", distinct)
	}
	for _, tok := range append(creds.all(), shownHostile...) {
		pair := "x-access-token:" + tok
		leaks = append(leaks, tok, base64.StdEncoding.EncodeToString([]byte(pair)), base64.StdEncoding.EncodeToString([]byte(tok)))
	}
	if echo.Requests() == 0 {
		t.Fatal("the hostile remote was never asked")
	}
	for where, text := range shown {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds a secret (%.12s...)", where, leak)
			}
		}
	}
	// The store, as bytes on disk.
	raw, err := os.ReadFile(filepath.Join(dir, "data", store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range leaks {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the store holds a secret (%.12s...)", leak)
		}
	}
}

// TestAppReleasesTransport: the Releases API's requests go out with the
// installation token of the repository's owner where the App is installed,
// else with github.token_env's token, on the public API's paths and on
// GitHub Enterprise's (/api/v3/).
func TestAppReleasesTransport(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"/", "/api/v3/"} {
		t.Run(prefix, func(t *testing.T) {
			t.Parallel()
			gh, keyPEM, _ := appFixture(t, t.TempDir(), 8, 0o600)
			acme := gh.Install(8, "acme", fakegithub.Organization)
			gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.0.0"})
			gh.Publish("other/pub", fakegithub.Release{TagName: "v2.0.0"})
			app, err := ghapp.New(ghapp.Config{APIURL: gh.URL + prefix, AppID: 8, PrivateKey: keyPEM})
			if err != nil {
				t.Fatal(err)
			}
			// The fake takes no static token: github.token_env's is
			// refused with a 401, which shows it was the one sent.
			hc := newAppReleases(app, gh.URL+prefix, "env-token")
			get := func(repo string) int {
				resp, err := hc.Get(gh.URL + prefix + "repos/" + repo + "/releases/latest")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if got := get("acme/skills"); got != http.StatusOK || gh.TokensIssued(acme) != 1 {
				t.Fatalf("acme/skills: %d after %d mints; want 200 with the installation token", got, gh.TokensIssued(acme))
			}
			if got := get("other/pub"); got != http.StatusUnauthorized {
				t.Fatalf("other/pub: %d; want the fallback token (refused by the fake)", got)
			}
			if _, remaining, _ := gh.RateLimit(false); remaining != fakegithub.DefaultAnonymousLimit {
				t.Fatal("a request went out without credentials")
			}
		})
	}
}

// TestGitHubAppRefreshesTheGitCredential: with GitHub's clock and the
// App's one clock that the test moves, each sync presents the installation
// token GitHub accepts at that time. The git server refuses a token once
// GitHub's clock passes its expires_at, so a token read once and kept
// would fail the second and third syncs.
func TestGitHubAppRefreshesTheGitCredential(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := fakegithub.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	gh, _, keyFile := appFixture(t, dir, 12, 0o600, clock.Now)
	acme := gh.Install(12, "acme", fakegithub.Organization)
	srv := gittest.NewServer(t)
	creds := &credentials{seen: map[string][]string{}}
	srv.RequireCredential(func(path, user, password string) bool {
		creds.record(path, password)
		return user == "x-access-token" && gh.ValidToken(password)
	})
	remote := srv.CreateRepo("acme/skills")
	write := func(version string) {
		remote.WriteFiles(map[string]string{"deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy, " + version + ".\n---\n"})
		remote.Commit(version)
		remote.Push("main")
	}
	write("one")
	cfg, err := config.Parse([]byte(fmt.Sprintf(`data_dir: %s
github:
  api_url: %s/
  app: {app_id: 12, private_key_file: %s}
sources:
  - name: acme
    url: %s
    poll: 0
`, filepath.Join(dir, "data"), gh.URL, keyFile, remote.URL())), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	d, err := openDaemon(context.Background(), cfg, slog.New(slog.DiscardHandler), serveSurfaces, false,
		func(d *Daemon) { d.appNow = clock.Now })
	if err != nil {
		t.Fatal(err)
	}
	serveDaemon(t, d)
	served := func() string {
		snap, _ := d.Registry.Current().Snapshot("acme")
		if snap == nil {
			return ""
		}
		return snap.Commit
	}
	waitUntil(t, func() bool { return served() == remote.Head() })
	sync := func(step string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Registry.SyncNow(ctx, "acme"); err != nil {
			t.Fatalf("%s: sync: %v", step, err)
		}
		if served() != remote.Head() {
			t.Fatalf("%s: serving %s, want %s", step, served(), remote.Head())
		}
	}
	first := creds.of("/acme/skills.git")
	clock.Advance(56 * time.Minute) // the first token has 4 minutes left
	write("two")
	sync("within the refresh window")
	if n := gh.TokensIssued(acme); n != 2 {
		t.Fatalf("%d tokens minted, want the first and one refreshed 5 minutes before its expiry", n)
	}
	clock.Advance(61 * time.Minute) // both tokens so far have expired
	write("three")
	sync("after the expiry")
	if n := gh.TokensIssued(acme); n != 3 {
		t.Fatalf("%d tokens minted, want 3", n)
	}
	all := creds.of("/acme/skills.git")
	if last := all[len(all)-1]; last == first[0] || !gh.ValidToken(last) {
		t.Fatal("the last fetch did not present the current token")
	}
}
