package ghapp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/internal/fakegithub"
)

const appID = 4242

var (
	keyOnce sync.Once
	keys    [2]*rsa.PrivateKey
)

// testKey returns one of two throwaway RSA keys, made once per test binary.
func testKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	keyOnce.Do(func() {
		for j := range keys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			keys[j] = k
		}
	})
	return keys[i]
}

func pkcs1(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// env is a fake GitHub with the App registered and installed on the
// organisation acme, and an App whose clock may lag GitHub's.
type env struct {
	gh          *fakegithub.Server
	ghClock     *fakegithub.Clock // GitHub's
	appClock    *fakegithub.Clock // this machine's
	acme        int64             // acme's installation id
	app         *ghapp.App
	log         *bytes.Buffer
	mu          sync.Mutex
	tokens      []string // OnToken's
	releasePath string
}

type envOptions struct {
	behind         time.Duration // how far this machine's clock is behind GitHub's
	key            int           // which test key the App signs with (0 is registered)
	installationID bool          // configure acme's installation id instead of finding it
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e := &env{ghClock: fakegithub.NewClock(start), appClock: fakegithub.NewClock(start.Add(-o.behind)), log: &bytes.Buffer{}}
	e.gh = fakegithub.New(fakegithub.Options{Now: e.ghClock.Now})
	t.Cleanup(e.gh.Close)
	e.gh.RegisterApp(appID, &testKey(t, 0).PublicKey)
	e.acme = e.gh.Install(appID, "acme", fakegithub.Organization)
	e.gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.0.0"})
	e.releasePath = "/repos/acme/skills/releases/latest"
	cfg := ghapp.Config{
		APIURL:     e.gh.URL + "/",
		AppID:      appID,
		PrivateKey: pkcs1(testKey(t, o.key)),
		Now:        e.appClock.Now,
		Logger:     slog.New(slog.NewTextHandler(&syncWriter{w: e.log, mu: &e.mu}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnToken: func(tok string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.tokens = append(e.tokens, tok)
		},
	}
	if o.installationID {
		cfg.InstallationID = e.acme
	}
	var err error
	if e.app, err = ghapp.New(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

type syncWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (e *env) advance(d time.Duration) {
	e.ghClock.Advance(d)
	e.appClock.Advance(d)
}

func (e *env) minted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.tokens...)
}

// latest asks for acme/skills' latest release through the App's client.
func (e *env) latest(t *testing.T) (int, string) {
	t.Helper()
	resp, err := e.app.Client("acme").Get(e.gh.URL + e.releasePath)
	if err != nil {
		t.Fatalf("GET latest release: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTokenIsMintedWithTheAppsJWT(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	tok, err := e.app.Token(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "ghs_") || !e.gh.ValidToken(tok) {
		t.Fatalf("token %q is not one GitHub accepts", tok)
	}
	if got := e.minted(); len(got) != 1 || got[0] != tok {
		t.Fatalf("OnToken saw %d tokens, want the one minted", len(got))
	}
	// Cached: the lookup and the mint happen once; the case of the owner
	// does not matter (GitHub logins are case-insensitive).
	again, err := e.app.Token(ctx, "ACME")
	if err != nil || again != tok {
		t.Fatalf("second Token: %v (same token: %v)", err, again == tok)
	}
	if n := e.gh.Requests("/orgs/acme/installation"); n != 1 {
		t.Errorf("installation looked up %d times, want 1", n)
	}
	if n := e.gh.Requests("/orgs/ACME/installation"); n != 0 {
		t.Errorf("installation looked up again for ACME")
	}
	if n := e.gh.TokensIssued(e.acme); n != 1 {
		t.Errorf("%d tokens minted, want 1", n)
	}
	if e.gh.Total() != 2 {
		t.Errorf("%d requests to GitHub, want 2 (lookup, mint)", e.gh.Total())
	}
	if status, body := e.latest(t); status != http.StatusOK || !strings.Contains(body, `"tag_name":"v1.0.0"`) {
		t.Fatalf("latest release through the installation: %d %s", status, body)
	}
	if strings.Contains(e.log.String(), tok) {
		t.Fatal("the token is in the log")
	}
}

func TestUserInstallationIsFoundAfterTheOrganisationLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	octo := e.gh.Install(appID, "octocat", fakegithub.User)
	tok, err := e.app.Token(context.Background(), "octocat")
	if err != nil {
		t.Fatal(err)
	}
	if e.gh.Requests("/orgs/octocat/installation") != 1 || e.gh.Requests("/users/octocat/installation") != 1 {
		t.Fatalf("lookups: orgs %d, users %d; want one each",
			e.gh.Requests("/orgs/octocat/installation"), e.gh.Requests("/users/octocat/installation"))
	}
	if !e.gh.ValidToken(tok) || e.gh.TokensIssued(octo) != 1 {
		t.Fatal("no token minted for the user's installation")
	}
}

func TestConfiguredInstallationNeedsNoLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{installationID: true})
	if _, err := e.app.Token(context.Background(), "anyone"); err != nil {
		t.Fatal(err)
	}
	if e.gh.Total() != 1 || e.gh.TokensIssued(e.acme) != 1 {
		t.Fatalf("%d requests, %d mints; want the mint alone", e.gh.Total(), e.gh.TokensIssued(e.acme))
	}
}

func TestNotInstalledIsRememberedThenAskedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	_, err := e.app.Token(ctx, "nobody")
	if !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("Token for an owner without the App: %v, want ErrNotInstalled", err)
	}
	asked := func() int {
		return e.gh.Requests("/orgs/nobody/installation") + e.gh.Requests("/users/nobody/installation")
	}
	if asked() != 2 {
		t.Fatalf("asked %d times, want orgs then users", asked())
	}
	if _, err := e.app.Token(ctx, "nobody"); !errors.Is(err, ghapp.ErrNotInstalled) || asked() != 2 {
		t.Fatalf("second Token: %v after %d requests; want the remembered answer", err, asked())
	}
	// A client for that owner sends nothing.
	if _, err := e.app.Client("nobody").Get(e.gh.URL + "/repos/nobody/x/releases/latest"); !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("client for an owner without the App: %v", err)
	}
	if e.gh.Requests("/repos/nobody/x/releases/latest") != 0 {
		t.Fatal("the client sent a request without a token")
	}
	// Installed later: found once the answer is old, or at once after
	// Forget (an installation webhook).
	e.gh.Install(appID, "nobody", fakegithub.Organization)
	e.app.Forget("nobody")
	if _, err := e.app.Token(ctx, "nobody"); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
	e.gh.Install(appID, "later", fakegithub.Organization)
	e.gh.Uninstall(e.gh.Install(appID, "gone", fakegithub.Organization))
	if _, err := e.app.Token(ctx, "gone"); !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("uninstalled: %v", err)
	}
	e.advance(11 * time.Minute)
	e.gh.Install(appID, "gone", fakegithub.Organization)
	if _, err := e.app.Token(ctx, "gone"); err != nil {
		t.Fatalf("installed again, asked after the answer aged: %v", err)
	}
}

func TestTokenIsRefreshedFiveMinutesBeforeItExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	first, err := e.app.Token(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	e.advance(55*time.Minute - time.Second) // expires in 5 min 1 s
	if tok, _ := e.app.Token(ctx, "acme"); tok != first {
		t.Fatal("refreshed more than 5 minutes before the expiry")
	}
	e.advance(time.Second) // expires in exactly 5 min
	second, err := e.app.Token(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if second == first || e.gh.TokensIssued(e.acme) != 2 {
		t.Fatalf("not refreshed 5 minutes before the expiry (%d mints)", e.gh.TokensIssued(e.acme))
	}
	if !e.gh.ValidToken(first) {
		t.Fatal("the first token was refreshed only after GitHub stopped accepting it")
	}
	if status, _ := e.latest(t); status != http.StatusOK {
		t.Fatalf("with the refreshed token: %d", status)
	}
	if n := e.gh.Stats(e.releasePath).Status[http.StatusUnauthorized]; n != 0 {
		t.Fatalf("%d answers 401", n)
	}
}

// TestExpiredTokenIsRefreshedOnceAfter401: this machine's clock is six
// minutes behind GitHub's, so the token expires on GitHub while the App
// still holds it for valid. The client gets one 401, mints once and
// retries.
func TestExpiredTokenIsRefreshedOnceAfter401(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{behind: 6 * time.Minute})
	if status, _ := e.latest(t); status != http.StatusOK {
		t.Fatalf("first request: %d", status)
	}
	first := e.minted()[0]
	e.advance(60*time.Minute + 30*time.Second) // expired on GitHub; 5 min 30 s left by our clock
	if e.gh.ValidToken(first) {
		t.Fatal("the token should have expired on GitHub")
	}
	status, body := e.latest(t)
	if status != http.StatusOK || !strings.Contains(body, "v1.0.0") {
		t.Fatalf("after the expiry: %d %s", status, body)
	}
	st := e.gh.Stats(e.releasePath)
	if st.Status[http.StatusUnauthorized] != 1 || st.Status[http.StatusOK] != 2 {
		t.Fatalf("answers %v, want one 401 between two 200s", st.Status)
	}
	if n := e.gh.TokensIssued(e.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2 (one refresh)", n)
	}
	// The refreshed token serves the next request without another mint.
	if status, _ := e.latest(t); status != http.StatusOK || e.gh.TokensIssued(e.acme) != 2 {
		t.Fatalf("next request: %d after %d mints", status, e.gh.TokensIssued(e.acme))
	}
}

// TestA401IsRetriedOnlyOnce: tokens GitHub refuses at once (they live no
// time at all) get one retry with a fresh token, then the 401 is the
// caller's.
func TestA401IsRetriedOnlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.gh.SetTokenLifetime(0)
	status, _ := e.latest(t)
	if status != http.StatusUnauthorized {
		t.Fatalf("answered %d, want the second 401", status)
	}
	if st := e.gh.Stats(e.releasePath); st.Requests != 2 {
		t.Fatalf("%d requests, want the first and one retry", st.Requests)
	}
	if n := e.gh.TokensIssued(e.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2", n)
	}
	// A POST is not replayed.
	e.gh.SetTokenLifetime(time.Hour)
	if status, _ := e.latest(t); status != http.StatusOK {
		t.Fatalf("with tokens that live an hour: %d", status)
	}
	e.gh.RevokeTokens(e.acme)
	resp, err := e.app.Client("acme").Post(e.gh.URL+e.releasePath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || e.gh.Stats(e.releasePath).Requests != 4 {
		t.Fatalf("POST: %d after %d requests; want its 401, not retried", resp.StatusCode, e.gh.Stats(e.releasePath).Requests)
	}
}

func TestRevokedTokenIsReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	if status, _ := e.latest(t); status != http.StatusOK {
		t.Fatal(status)
	}
	e.gh.RevokeTokens(e.acme)
	// Concurrent requests that all get a 401 share one new token.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if status, _ := e.latest(t); status != http.StatusOK {
				t.Errorf("after the revocation: %d", status)
			}
		})
	}
	wg.Wait()
	if n := e.gh.TokensIssued(e.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2", n)
	}
}

// TestInvalidateDropsOnlyTheCurrentToken: Invalidate(owner, tok) makes
// the next Token mint when tok is the installation's current token, and
// does nothing when it was replaced already: syncs refused with the same
// token at once (git, which Client's retry does not cover) mint one new
// token between them.
func TestInvalidateDropsOnlyTheCurrentToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	a, err := e.app.Token(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	e.gh.RevokeTokens(e.acme)
	var wg sync.WaitGroup
	fresh := make([]string, 8)
	for i := range fresh {
		wg.Go(func() {
			e.app.Invalidate("ACME", a) // owners are case-insensitive
			var err error
			if fresh[i], err = e.app.Token(ctx, "acme"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.gh.TokensIssued(e.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2 (the first, one after the invalidations)", n)
	}
	for _, b := range fresh {
		if b == a || b != fresh[0] || !e.gh.ValidToken(b) {
			t.Fatal("the callers were not all given the one new token")
		}
	}
	// An unknown or replaced token, an unknown owner: nothing dropped.
	e.app.Invalidate("acme", a)
	e.app.Invalidate("acme", "")
	e.app.Invalidate("nobody", fresh[0])
	if b, _ := e.app.Token(ctx, "acme"); b != fresh[0] || e.gh.TokensIssued(e.acme) != 2 {
		t.Fatal("Invalidate of a token no longer current dropped the current one")
	}
}

func TestOneMintInFlightPerInstallation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{installationID: true})
	release := e.gh.Hold()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	toks := make([]string, 10)
	errs := make([]error, 10)
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = e.app.Token(ctx, "acme") })
	}
	if err := e.gh.WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Fatalf("caller %d: %v (same token: %v)", i, errs[i], toks[i] == toks[0])
		}
	}
	if n := e.gh.Requests(fmt.Sprintf("/app/installations/%d/access_tokens", e.acme)); n != 1 {
		t.Fatalf("%d mints for 10 callers, want 1", n)
	}
}

func TestCallerGivingUpDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{installationID: true})
	release := e.gh.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := e.app.Token(ctx, "acme"); done <- err }()
	wait, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	if err := e.gh.WaitHeld(wait, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v", err)
	}
	release()
	if _, err := e.app.Token(wait, "acme"); err != nil {
		t.Fatal(err)
	}
	if n := e.gh.TokensIssued(e.acme); n != 1 {
		t.Fatalf("%d mints, want the one the first caller started", n)
	}
}

func TestRefusedJWT(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   envOptions
		mutate func(*env)
		says   string
	}{
		{name: "another key", opts: envOptions{key: 1, installationID: true}, says: "A JSON web token could not be decoded"},
		{name: "clock ahead of GitHub's", opts: envOptions{behind: -2 * time.Minute, installationID: true}, says: "'Issued at' claim ('iat')"},
		{name: "clock far behind GitHub's", opts: envOptions{behind: 10 * time.Minute, installationID: true}, says: "'Expiration time' claim ('exp')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.opts)
			_, err := e.app.Token(context.Background(), "acme")
			if !errors.Is(err, ghapp.ErrRefused) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Token: %v; want ErrRefused saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "eyJ") {
				t.Fatalf("the error holds the JWT: %v", err)
			}
		})
	}
}

func TestSuspendedInstallationIsNotInstalled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.gh.Suspend(e.acme, true)
	if _, err := e.app.Token(context.Background(), "acme"); !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("suspended (found by lookup): %v", err)
	}
	f := newEnv(t, envOptions{installationID: true})
	f.gh.Suspend(f.acme, true)
	if _, err := f.app.Token(context.Background(), "acme"); !errors.Is(err, ghapp.ErrNotInstalled) || !strings.Contains(err.Error(), "suspended") {
		t.Fatalf("suspended (configured id, refused at the mint): %v", err)
	}
}

func TestRateLimitSilencesTheApp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{installationID: true})
	e.gh.SecondaryRateLimit(http.StatusForbidden, 2*time.Minute)
	ctx := context.Background()
	if _, err := e.app.Token(ctx, "acme"); !errors.Is(err, ghapp.ErrRateLimited) {
		t.Fatalf("rate limited: %v", err)
	}
	before := e.gh.Total()
	if _, err := e.app.Token(ctx, "acme"); !errors.Is(err, ghapp.ErrRateLimited) || e.gh.Total() != before {
		t.Fatalf("asked again within Retry-After: %v, %d requests", err, e.gh.Total()-before)
	}
	e.advance(2 * time.Minute)
	if _, err := e.app.Token(ctx, "acme"); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
}

// TestFailedRefreshKeepsTheLiveToken: GitHub failing while a token is
// within its refresh window keeps the token, which GitHub still accepts.
func TestFailedRefreshKeepsTheLiveToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{installationID: true})
	ctx := context.Background()
	first, err := e.app.Token(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	e.advance(57 * time.Minute)
	e.gh.FailNext(http.StatusBadGateway, 1)
	if tok, err := e.app.Token(ctx, "acme"); err != nil || tok != first {
		t.Fatalf("refresh failed: %v (kept the token: %v)", err, tok == first)
	}
	if !strings.Contains(e.log.String(), "could not refresh") {
		t.Fatalf("the failed refresh is not logged:\n%s", e.log.String())
	}
	if tok, err := e.app.Token(ctx, "acme"); err != nil || tok == first {
		t.Fatalf("next Token: %v (new token: %v)", err, tok != first)
	}
	// Past the expiry, a failed mint is the caller's error.
	e.advance(time.Hour)
	e.gh.FailNext(http.StatusBadGateway, 1)
	if _, err := e.app.Token(ctx, "acme"); !errors.Is(err, ghapp.ErrUnavailable) {
		t.Fatalf("mint failed with no live token: %v", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	good := pkcs1(testKey(t, 0))
	pkcs8, err := x509.MarshalPKCS8PrivateKey(testKey(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  ghapp.Config
		err  string // "" for a config New accepts
	}{
		{name: "pkcs1", cfg: ghapp.Config{AppID: 1, PrivateKey: good}},
		{name: "pkcs8", cfg: ghapp.Config{AppID: 1, PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})}},
		{name: "no app id", cfg: ghapp.Config{PrivateKey: good}, err: "app id"},
		{name: "not PEM", cfg: ghapp.Config{AppID: 1, PrivateKey: []byte("MIIEowIBAAKCAQEA")}, err: "not PEM"},
		{name: "damaged key", cfg: ghapp.Config{AppID: 1, PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("MIIEowIBAAKCAQEAsecret")})}, err: "not a valid PKCS#1"},
		{name: "credentials in the URL", cfg: ghapp.Config{AppID: 1, PrivateKey: good, APIURL: "https://u:p@api.example.com/"}, err: "without credentials"},
	} {
		_, err := ghapp.New(tc.cfg)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.err)
		case err != nil && (strings.Contains(err.Error(), "MII") || strings.Contains(err.Error(), "secret")):
			t.Errorf("%s: the error quotes the key: %v", tc.name, err)
		}
	}
}
