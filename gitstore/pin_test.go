package gitstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/gitref"
)

// TestDirName: URLs with one canonical form share one store directory,
// whose name holds nothing of the URL. (The canonical forms themselves are
// gitref's; see gitref.TestParseRepo.)
func TestDirName(t *testing.T) {
	t.Parallel()
	a := mustRepo(t, "https://Example.com/org/repo/").URL()
	b := mustRepo(t, "https://example.com:443/org/repo").URL()
	if DirName(a) != DirName(b) || !strings.HasSuffix(DirName(a), ".git") || strings.Contains(DirName(a), "example") {
		t.Errorf("DirName(%q) = %q, DirName(%q) = %q", a, DirName(a), b, DirName(b))
	}
	if _, err := newPool(t, t.TempDir()).Repo("https://user:s3cret@example.com/org/repo"); !errors.Is(err, ErrInvalidURL) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Pool.Repo with credentials: %v, want ErrInvalidURL without the secret", err)
	}
}

func mustRepo(t *testing.T, raw string) gitref.Repo {
	t.Helper()
	r, err := gitref.ParseRepo(raw)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAuthNeverPrints(t *testing.T) {
	t.Parallel()
	a := Auth{Token: "s3cret"}
	for _, s := range []string{a.String(), fmt.Sprintf("%v %+v %#v %s", a, a, a, a)} {
		if strings.Contains(s, "s3cret") {
			t.Fatalf("Auth printed its token: %s", s)
		}
	}
}

// TestPinKinds resolves and fetches every kind of pin against one remote
// history and checks each lands on the right commit's content.
func TestPinKinds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.remote
	commits := map[string]string{}
	commit := func(name string) string {
		r.WriteFiles(map[string]string{"version.txt": name})
		commits[name] = r.Commit(name)
		return commits[name]
	}
	commit("c0")
	r.Tag("1.0.0", false) // lightweight, no "v"
	commit("c1")
	r.Tag("v1.2.0", true) // annotated
	commit("c2")
	r.Tag("v1.3.0-rc.1", true) // prerelease
	commit("c3")
	r.Tag("v1.9.9", false)
	commit("c4")
	r.Tag("v2.0.0", true)
	r.Push("main")
	r.Branch("dev")
	commit("dev1")
	r.Push("dev")
	r.Branch("main")

	tests := []struct {
		pin     gitref.Pin
		commit  string
		wantRef string
	}{
		{gitref.Pin{Kind: gitref.Default}, "c4", "refs/heads/main"},
		{gitref.Pin{Kind: gitref.Branch, Value: "main"}, "c4", "refs/heads/main"},
		{gitref.Pin{Kind: gitref.Branch, Value: "dev"}, "dev1", "refs/heads/dev"},
		{gitref.Pin{Kind: gitref.Tag, Value: "1.0.0"}, "c0", "refs/tags/1.0.0"},
		{gitref.Pin{Kind: gitref.Tag, Value: "v1.2.0"}, "c1", "refs/tags/v1.2.0"}, // annotated: peeled to the commit
		{gitref.Pin{Kind: gitref.Tag, Value: "v2.0.0"}, "c4", "refs/tags/v2.0.0"},
		{gitref.Pin{Kind: gitref.Commit, Value: commits["c2"]}, "c2", ""}, // not a ref tip: fetched by id
		{gitref.Pin{Kind: gitref.Semver, Value: ">=1.2.0 <2.0.0"}, "c3", "refs/tags/v1.9.9"},
		{gitref.Pin{Kind: gitref.Semver, Value: "~1.2"}, "c1", "refs/tags/v1.2.0"},
		{gitref.Pin{Kind: gitref.Semver, Value: "<1.1"}, "c0", "refs/tags/1.0.0"}, // tag without "v"
		{gitref.Pin{Kind: gitref.Semver, Value: ">=1.3.0-rc.0 <1.4.0"}, "c2", "refs/tags/v1.3.0-rc.1"},
		{gitref.Pin{Kind: gitref.Semver, Value: ">=2"}, "c4", "refs/tags/v2.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.pin.String(), func(t *testing.T) {
			res := syncPin(t, f.repo, tt.pin)
			if res.Commit != commits[tt.commit] || res.Ref != tt.wantRef {
				t.Fatalf("resolved %+v, want %s (%s) at %q", res, commits[tt.commit], tt.commit, tt.wantRef)
			}
			if got := snapshot(t, f.repo, res.Commit, ""); got["version.txt"] != tt.commit {
				t.Fatalf("content = %q, want %q", got["version.txt"], tt.commit)
			}
		})
	}

	refs, err := f.repo.ListRemote(context.Background(), Auth{})
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := refs.LatestSemverTag(); err != nil || tag != "v2.0.0" {
		t.Fatalf("LatestSemverTag = %q, %v", tag, err)
	}
	if got := strings.Join(refs.Tags(), ","); got != "1.0.0,v1.2.0,v1.3.0-rc.1,v1.9.9,v2.0.0" {
		t.Fatalf("Tags = %s", got)
	}
	if refs.DefaultBranch() != "main" {
		t.Fatalf("DefaultBranch = %q", refs.DefaultBranch())
	}
	for _, pin := range []gitref.Pin{{Kind: gitref.Branch, Value: "nope"}, {Kind: gitref.Tag, Value: "v9"}, {Kind: gitref.Semver, Value: ">=3"}} {
		if _, err := refs.Resolve(pin); !errors.Is(err, ErrRefNotFound) {
			t.Errorf("Resolve(%s) error = %v, want ErrRefNotFound", pin, err)
		}
	}
	// The default branch follows the remote's HEAD.
	r.SetDefaultBranch("dev")
	if res := resolve(t, f.repo, gitref.Pin{}); res.Commit != commits["dev1"] || res.Ref != "refs/heads/dev" {
		t.Fatalf("after HEAD moved to dev, default resolved to %+v", res)
	}
}

func TestLatestSemverTagSkipsPrereleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.Commit("c0")
	f.remote.Push("main")
	f.remote.Tag("v1.0.0", false)
	f.remote.Tag("v1.1.0-beta.1", false)
	f.remote.Tag("not-a-version", false)
	refs, err := f.repo.ListRemote(context.Background(), Auth{})
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := refs.LatestSemverTag(); err != nil || tag != "v1.0.0" {
		t.Fatalf("LatestSemverTag = %q, %v", tag, err)
	}

	g := newFixture(t)
	g.remote.Commit("c0")
	g.remote.Push("main")
	g.remote.Tag("v2.0.0-rc.1", false)
	refs, err = g.repo.ListRemote(context.Background(), Auth{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refs.LatestSemverTag(); !errors.Is(err, ErrRefNotFound) {
		t.Fatalf("LatestSemverTag with only prereleases: %v, want ErrRefNotFound", err)
	}
}
