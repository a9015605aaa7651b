package fakegithub_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/skillreg/skillreg/internal/fakegithub"
)

var (
	appKeyOnce sync.Once
	appKeys    [2]*rsa.PrivateKey
)

func appKey(t *testing.T, i int) *rsa.PrivateKey {
	t.Helper()
	appKeyOnce.Do(func() {
		for j := range appKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			appKeys[j] = k
		}
	})
	return appKeys[i]
}

// signJWT signs claims with key as alg (only RS256 is really signed;
// anything else gets a junk signature).
func signJWT(t *testing.T, key *rsa.PrivateKey, alg string, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + enc.EncodeToString(sig)
}

type jwtAuth struct {
	token string
}

func (b jwtAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func clientWith(t *testing.T, base, token string) *github.Client {
	t.Helper()
	c := client(t, base)
	return c.WithAuthToken(token)
}

// TestAppFlowThroughGoGitHub: go-github's own Apps service, against the
// fake, finds the installation and mints a token that opens the Releases
// API until it expires, then GitHub's 401 "Bad credentials".
func TestAppFlowThroughGoGitHub(t *testing.T) {
	t.Parallel()
	s, clk := newFake(t, fakegithub.Options{})
	seed(s)
	s.RegisterApp(7, &appKey(t, 0).PublicKey)
	inst := s.Install(7, "chainbase-labs", fakegithub.Organization)
	now := clk.Now()
	jwt := signJWT(t, appKey(t, 0), "RS256", map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": "7"})
	ctx := context.Background()
	app := github.NewClient(&http.Client{Transport: jwtAuth{jwt}})
	app.BaseURL = client(t, s.URL).BaseURL

	got, _, err := app.Apps.FindOrganizationInstallation(ctx, "chainbase-labs")
	if err != nil || got.GetID() != inst || got.GetAccount().GetLogin() != "chainbase-labs" {
		t.Fatalf("organisation installation: %v, %+v", err, got)
	}
	if _, resp, err := app.Apps.FindUserInstallation(ctx, "chainbase-labs"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an organisation's installation found as a user's: %v", err)
	}
	if got, _, err := app.Apps.FindRepositoryInstallation(ctx, "chainbase-labs", "agentkey"); err != nil || got.GetID() != inst {
		t.Fatalf("repository installation: %v", err)
	}
	tok, resp, err := app.Apps.CreateInstallationToken(ctx, inst, nil)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("mint: %v", err)
	}
	if !strings.HasPrefix(tok.GetToken(), "ghs_") || !tok.GetExpiresAt().Time.Equal(now.Add(time.Hour)) {
		t.Fatalf("token %q expires %v, want ghs_... at %v", tok.GetToken(), tok.GetExpiresAt(), now.Add(time.Hour))
	}
	if s.TokensIssued(inst) != 1 || !s.ValidToken(tok.GetToken()) {
		t.Fatal("the token is not counted or not valid")
	}
	if account, ok := s.InstallationAccount(tok.GetToken()); !ok || account != "chainbase-labs" {
		t.Fatalf("the token's installation account: %q %v", account, ok)
	}

	user := clientWith(t, s.URL, tok.GetToken())
	rel, _, err := user.Repositories.GetReleaseByTag(ctx, "chainbase-labs", "agentkey", "v2.0.0")
	if err != nil || !rel.GetDraft() {
		t.Fatalf("a draft through the installation token (authenticated): %v", err)
	}
	if _, _, err := user.Apps.CreateInstallationToken(ctx, inst, nil); err == nil {
		t.Fatal("an installation token minted a token")
	}
	if _, _, err := app.Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey"); err == nil {
		t.Fatal("the App's JWT opened the Releases API")
	}

	clk.Advance(time.Hour)
	var ghErr *github.ErrorResponse
	if _, _, err := user.Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey"); !errors.As(err, &ghErr) ||
		ghErr.Response.StatusCode != http.StatusUnauthorized || ghErr.Message != "Bad credentials" {
		t.Fatalf("an expired token: %v, want 401 Bad credentials", err)
	}
	if s.ValidToken(tok.GetToken()) {
		t.Fatal("ValidToken accepts an expired token")
	}
	if _, ok := s.InstallationAccount(tok.GetToken()); ok {
		t.Fatal("an expired token still names its installation's account")
	}
}

func TestJWTIsCheckedAsGitHubDoes(t *testing.T) {
	t.Parallel()
	s, clk := newFake(t, fakegithub.Options{})
	s.RegisterApp(7, &appKey(t, 0).PublicKey)
	now := clk.Now().Unix()
	good := map[string]any{"iat": now - 60, "exp": now + 540, "iss": 7}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		token  string
		status int
		says   string
	}{
		{name: "good, iss a number", token: signJWT(t, appKey(t, 0), "RS256", good), status: http.StatusOK},
		{name: "good, iss a string", token: signJWT(t, appKey(t, 0), "RS256", with("iss", "7")), status: http.StatusOK},
		{name: "another key", token: signJWT(t, appKey(t, 1), "RS256", good), status: 401, says: "A JSON web token could not be decoded"},
		{name: "alg none", token: signJWT(t, appKey(t, 0), "none", good), status: 401, says: "A JSON web token could not be decoded"},
		{name: "unknown app", token: signJWT(t, appKey(t, 0), "RS256", with("iss", 8)), status: 401, says: "Integration not found"},
		{name: "expired", token: signJWT(t, appKey(t, 0), "RS256", with("exp", now)), status: 401, says: "'Expiration time' claim ('exp') must be a numeric value"},
		{name: "no exp", token: signJWT(t, appKey(t, 0), "RS256", with("exp", nil)), status: 401, says: "'Expiration time' claim ('exp') must be a numeric value"},
		{name: "exp too far", token: signJWT(t, appKey(t, 0), "RS256", with("exp", now+601)), status: 401, says: "'Expiration time' claim ('exp') is too far in the future"},
		{name: "fractional exp", token: signJWT(t, appKey(t, 0), "RS256", with("exp", float64(now)+300.5)), status: 401, says: "'Expiration time' claim ('exp')"},
		{name: "iat ahead", token: signJWT(t, appKey(t, 0), "RS256", with("iat", now+1)), status: 401, says: "'Issued at' claim ('iat')"},
		{name: "no iat", token: signJWT(t, appKey(t, 0), "RS256", with("iat", nil)), status: 401, says: "'Issued at' claim ('iat')"},
		{name: "opaque token", token: "ghs_notajwt", status: 401, says: "A JSON web token could not be decoded"},
		{name: "no credentials", token: "", status: 401, says: "A JSON web token could not be decoded"},
	} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/app", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Message string `json:"message"`
			ID      int64  `json:"id"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(body.Message, tc.says) || (tc.status == 200 && body.ID != 7) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body.Message, tc.status, tc.says)
		}
	}
}

func TestSuspendedAndUninstalled(t *testing.T) {
	t.Parallel()
	s, clk := newFake(t, fakegithub.Options{})
	s.RegisterApp(7, &appKey(t, 0).PublicKey)
	inst := s.Install(7, "octocat", fakegithub.User)
	now := clk.Now()
	app := github.NewClient(&http.Client{Transport: jwtAuth{signJWT(t, appKey(t, 0), "RS256",
		map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": 7})}})
	app.BaseURL = client(t, s.URL).BaseURL
	ctx := context.Background()
	if got, _, err := app.Apps.FindUserInstallation(ctx, "OctoCat"); err != nil || got.GetID() != inst {
		t.Fatalf("user installation (any case): %v", err)
	}
	tok, _, err := app.Apps.CreateInstallationToken(ctx, inst, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Suspend(inst, true)
	if s.ValidToken(tok.GetToken()) {
		t.Fatal("a suspended installation's token is still valid")
	}
	if got, _, err := app.Apps.FindUserInstallation(ctx, "octocat"); err != nil || got.SuspendedAt == nil {
		t.Fatalf("a suspended installation: %v, suspended_at %v", err, got.GetSuspendedAt())
	}
	if _, resp, err := app.Apps.CreateInstallationToken(ctx, inst, nil); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("mint for a suspended installation: %v", err)
	}
	s.Suspend(inst, false)
	if _, _, err := app.Apps.CreateInstallationToken(ctx, inst, nil); err != nil {
		t.Fatalf("mint after unsuspending: %v", err)
	}
	s.Uninstall(inst)
	if _, resp, err := app.Apps.CreateInstallationToken(ctx, inst, nil); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("mint for a deleted installation: %v", err)
	}
}
