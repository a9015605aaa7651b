package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/gittest"
)

// refusedAppFixture is a daemon serving acme/skills from a loopback git
// server that takes the GitHub App's installation tokens (while refuseAll
// is false), synced once with the first token.
type refusedAppFixture struct {
	gh        *fakegithub.Server
	acme      int64
	srv       *gittest.Server
	remote    *gittest.Repo
	creds     *credentials
	refuseAll atomic.Bool
	// revokeAtFetch revokes the installation's tokens when the next
	// git-upload-pack POST (the fetch, after a good ref listing) arrives.
	revokeAtFetch atomic.Bool
	d             *Daemon
}

func newRefusedAppFixture(t *testing.T) *refusedAppFixture {
	t.Helper()
	dir := t.TempDir()
	f := &refusedAppFixture{creds: &credentials{seen: map[string][]string{}}}
	var keyFile string
	f.gh, _, keyFile = appFixture(t, dir, 12, 0o600)
	f.acme = f.gh.Install(12, "acme", fakegithub.Organization)
	f.srv = gittest.NewServer(t)
	f.srv.RequireCredential(func(path, user, password string) bool {
		f.creds.record(path, password)
		if strings.HasSuffix(path, "/git-upload-pack") && f.revokeAtFetch.CompareAndSwap(true, false) {
			f.gh.RevokeTokens(f.acme)
		}
		return !f.refuseAll.Load() && user == "x-access-token" && f.gh.ValidToken(password)
	})
	f.remote = f.srv.CreateRepo("acme/skills")
	f.write("one")
	cfg, err := config.Parse([]byte(fmt.Sprintf(`data_dir: %s
github:
  api_url: %s/
  app: {app_id: 12, private_key_file: %s}
sources:
  - name: acme
    url: %s
    poll: 0
`, filepath.Join(dir, "data"), f.gh.URL, keyFile, f.remote.URL())), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	f.d, err = openDaemon(context.Background(), cfg, slog.New(slog.DiscardHandler), serveSurfaces, false)
	if err != nil {
		t.Fatal(err)
	}
	serveDaemon(t, f.d)
	waitUntil(t, func() bool { return f.served() == f.remote.Head() })
	if n := f.gh.TokensIssued(f.acme); n != 1 {
		t.Fatalf("%d tokens minted by the first sync, want 1", n)
	}
	return f
}

func (f *refusedAppFixture) write(version string) {
	f.remote.WriteFiles(map[string]string{"deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy, " + version + ".\n---\n"})
	f.remote.Commit(version)
	f.remote.Push("main")
}

func (f *refusedAppFixture) served() string {
	snap, _ := f.d.Registry.Current().Snapshot("acme")
	if snap == nil {
		return ""
	}
	return snap.Commit
}

func (f *refusedAppFixture) syncNow(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return f.d.Registry.SyncNow(ctx, "acme")
}

// TestGitHubAppReplacesATokenGitRefused: an installation token the App
// holds for valid but GitHub's git service refuses (revoked; or this
// machine's clock behind GitHub's) is dropped at the 401, one new token is
// minted and the ref listing retried with it, in the same sync: no stall
// until the old token's expiry.
func TestGitHubAppReplacesATokenGitRefused(t *testing.T) {
	t.Parallel()
	f := newRefusedAppFixture(t)
	tokenA := f.creds.of("/acme/skills.git")[0]
	before := len(f.creds.of("/acme/skills.git"))
	listings := f.srv.Requests().RefListings

	f.gh.RevokeTokens(f.acme)
	f.write("two")
	if err := f.syncNow(t); err != nil {
		t.Fatalf("sync after the token was revoked: %v", err)
	}
	if f.served() != f.remote.Head() {
		t.Fatalf("serving %s, want %s", f.served(), f.remote.Head())
	}
	if n := f.gh.TokensIssued(f.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2 (the first, and one after the refusal)", n)
	}
	seen := f.creds.of("/acme/skills.git")[before:]
	if len(seen) < 2 || seen[0] != tokenA {
		t.Fatalf("after the revocation git was shown %d credentials, the first the revoked token: %v", len(seen), seen[0] == tokenA)
	}
	for i, p := range seen[1:] {
		if p == tokenA || !f.gh.ValidToken(p) {
			t.Fatalf("request %d after the refusal did not present the fresh token", i+1)
		}
	}
	if n := f.srv.Requests().RefListings - listings; n != 2 {
		t.Errorf("%d ref listings in the sync, want 2 (refused, retried)", n)
	}
	for _, st := range f.d.Registry.States() {
		if st.Source == "acme" && st.Stalled != "" {
			t.Errorf("the source is stalled: %+v", st)
		}
	}

	// The fresh token is kept: the next sync mints nothing.
	f.write("three")
	if err := f.syncNow(t); err != nil {
		t.Fatal(err)
	}
	if n := f.gh.TokensIssued(f.acme); n != 2 || f.served() != f.remote.Head() {
		t.Fatalf("%d tokens minted, serving %s (want 2, %s)", n, f.served(), f.remote.Head())
	}
}

// TestGitHubAppRefusedTwiceStalls: when git refuses the fresh token too,
// the sync stalls as auth_refused after exactly one retry and one mint.
func TestGitHubAppRefusedTwiceStalls(t *testing.T) {
	t.Parallel()
	f := newRefusedAppFixture(t)
	served := f.served()
	listings := f.srv.Requests().RefListings

	f.gh.RevokeTokens(f.acme)
	f.refuseAll.Store(true)
	f.write("two")
	err := f.syncNow(t)
	if !errors.Is(err, gitstore.ErrAuth) {
		t.Fatalf("sync: %v, want an authentication failure", err)
	}
	if n := f.gh.TokensIssued(f.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2 (the first, and one retry)", n)
	}
	if n := f.srv.Requests().RefListings - listings; n != 2 {
		t.Errorf("%d ref listings in the sync, want 2 (refused, retried once)", n)
	}
	var stalled string
	for _, st := range f.d.Registry.States() {
		if st.Source == "acme" {
			stalled = string(st.Stalled)
		}
	}
	if stalled != "auth_refused" {
		t.Errorf("the source's stall: %q, want auth_refused", stalled)
	}
	if f.served() != served {
		t.Errorf("serving %s, want the last good commit %s", f.served(), served)
	}
}

// TestGitHubAppReplacesATokenRefusedAtFetch: a token refused at the fetch
// (revoked after the ref listing accepted it) is replaced the same way:
// one mint, the fetch retried once, the new commit served.
func TestGitHubAppReplacesATokenRefusedAtFetch(t *testing.T) {
	t.Parallel()
	f := newRefusedAppFixture(t)
	counts := f.srv.Requests()
	f.revokeAtFetch.Store(true)
	f.write("two")
	if err := f.syncNow(t); err != nil {
		t.Fatalf("sync with the token revoked at the fetch: %v", err)
	}
	if f.revokeAtFetch.Load() {
		t.Fatal("the sync did not fetch")
	}
	if f.served() != f.remote.Head() {
		t.Fatalf("serving %s, want %s", f.served(), f.remote.Head())
	}
	if n := f.gh.TokensIssued(f.acme); n != 2 {
		t.Fatalf("%d tokens minted, want 2 (the first, and one after the refused fetch)", n)
	}
	after := f.srv.Requests()
	if l, n := after.RefListings-counts.RefListings, after.Fetches-counts.Fetches; l != 1 || n != 2 {
		t.Errorf("%d ref listings and %d fetch requests, want 1 and 2 (the refused fetch, the retry)", l, n)
	}
}
