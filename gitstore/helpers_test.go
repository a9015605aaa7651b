package gitstore

import (
	"context"
	"os"
	"testing"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// fixture is a server with one repository and a pool with its Repo.
type fixture struct {
	srv    *gittest.Server
	remote *gittest.Repo
	pool   *Pool
	repo   *Repo
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("skills")
	pool := newPool(t, t.TempDir())
	repo, err := pool.Repo(remote.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, remote: remote, pool: pool, repo: repo}
}

func newPool(t *testing.T, dir string) *Pool {
	t.Helper()
	p, err := NewPool(dir, PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// resolve lists the remote and resolves pin.
func resolve(t *testing.T, r *Repo, pin gitref.Pin) Resolved {
	t.Helper()
	refs, err := r.ListRemote(context.Background(), Auth{})
	if err != nil {
		t.Fatalf("ListRemote: %v", err)
	}
	res, err := refs.Resolve(pin)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", pin, err)
	}
	return res
}

// syncPin resolves pin and fetches its commit.
func syncPin(t *testing.T, r *Repo, pin gitref.Pin) Resolved {
	t.Helper()
	res := resolve(t, r, pin)
	if err := r.Fetch(context.Background(), res, Auth{}); err != nil {
		t.Fatalf("Fetch(%+v): %v", res, err)
	}
	return res
}

// snapshot returns path -> content of every entry under sub in commit.
func snapshot(t *testing.T, r *Repo, commit, sub string) map[string]string {
	t.Helper()
	entries, err := r.Walk(commit, sub)
	if err != nil {
		t.Fatalf("Walk(%s, %q): %v", commit, sub, err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Mode == ModeSubmodule {
			out[e.Path] = "submodule " + e.Blob
			continue
		}
		data, err := r.ReadBlob(e.Blob)
		if err != nil {
			t.Fatalf("ReadBlob(%s) for %s: %v", e.Blob, e.Path, err)
		}
		out[e.Path] = string(data)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
