package gitstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParsePin(t *testing.T) {
	sha := strings.Repeat("ab", 20)
	tests := []struct {
		kind, value string
		want        Pin
		ok          bool
	}{
		{"", "", Pin{Kind: PinDefault}, true},
		{"branch", "main", Pin{PinBranch, "main"}, true},
		{"branch", "feature/x-1", Pin{PinBranch, "feature/x-1"}, true},
		{"tag", "v1.4.0", Pin{PinTag, "v1.4.0"}, true},
		{"commit", strings.ToUpper(sha), Pin{PinCommit, sha}, true},
		{"semver", ">=1.2.0 <2.0.0", Pin{PinSemver, ">=1.2.0 <2.0.0"}, true},
		{"semver", "^1.2", Pin{PinSemver, "^1.2"}, true},
		{"", "main", Pin{}, false},
		{"branch", "", Pin{}, false},
		{"branch", "a..b", Pin{}, false},
		{"branch", "-rf", Pin{}, false},
		{"branch", "x y", Pin{}, false},
		{"branch", "main:refs/heads/evil", Pin{}, false},
		{"branch", "HEAD@{1}", Pin{}, false},
		{"branch", "a/.hidden", Pin{}, false},
		{"branch", "x.lock", Pin{}, false},
		{"tag", "v1^{}", Pin{}, false},
		{"commit", "abc123", Pin{}, false},
		{"commit", strings.Repeat("g", 40), Pin{}, false},
		{"semver", "not a range", Pin{}, false},
		{"release", "latest", Pin{}, false},
	}
	for _, tt := range tests {
		got, err := ParsePin(tt.kind, tt.value)
		if tt.ok != (err == nil) {
			t.Errorf("ParsePin(%q, %q) error = %v, want ok=%v", tt.kind, tt.value, err, tt.ok)
			continue
		}
		if !tt.ok {
			if !errors.Is(err, ErrInvalidPin) {
				t.Errorf("ParsePin(%q, %q) error %v is not ErrInvalidPin", tt.kind, tt.value, err)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("ParsePin(%q, %q) = %+v, want %+v", tt.kind, tt.value, got, tt.want)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://Example.COM/Org/Repo.git", "https://example.com/Org/Repo.git"},
		{"https://example.com:443/org/repo/", "https://example.com/org/repo"},
		{"HTTP://example.com:80/org//repo", "http://example.com/org/repo"},
		{"http://127.0.0.1:8080/a/b.git", "http://127.0.0.1:8080/a/b.git"},
		{"https://example.com/org/x/../repo", "https://example.com/org/repo"},
		{"file:///srv/git/repo.git", "file:///srv/git/repo.git"},
		{"file://localhost/srv/git/repo.git/", "file:///srv/git/repo.git"},
	}
	for _, tt := range tests {
		got, err := NormalizeURL(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{
		"https://user:s3cret@example.com/org/repo",
		"https://s3cret@example.com/org/repo",
		"ssh://git@example.com/org/repo",
		"git@example.com:org/repo.git",
		"https://example.com",
		"https://example.com/org/repo?token=s3cret",
		"file://otherhost/x",
		"://",
	} {
		_, err := NormalizeURL(bad)
		if !errors.Is(err, ErrInvalidURL) {
			t.Errorf("NormalizeURL(%q) error = %v, want ErrInvalidURL", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("NormalizeURL(%q) error leaks the secret: %v", bad, err)
		}
	}
	a, _ := NormalizeURL("https://Example.com/org/repo/")
	b, _ := NormalizeURL("https://example.com:443/org/repo")
	if DirName(a) != DirName(b) || !strings.HasSuffix(DirName(a), ".git") || strings.Contains(DirName(a), "example") {
		t.Errorf("DirName(%q) = %q, DirName(%q) = %q", a, DirName(a), b, DirName(b))
	}
}

func TestAuthNeverPrints(t *testing.T) {
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
		pin     Pin
		commit  string
		wantRef string
	}{
		{Pin{Kind: PinDefault}, "c4", "refs/heads/main"},
		{Pin{PinBranch, "main"}, "c4", "refs/heads/main"},
		{Pin{PinBranch, "dev"}, "dev1", "refs/heads/dev"},
		{Pin{PinTag, "1.0.0"}, "c0", "refs/tags/1.0.0"},
		{Pin{PinTag, "v1.2.0"}, "c1", "refs/tags/v1.2.0"}, // annotated: peeled to the commit
		{Pin{PinTag, "v2.0.0"}, "c4", "refs/tags/v2.0.0"},
		{Pin{PinCommit, commits["c2"]}, "c2", ""}, // not a ref tip: fetched by id
		{Pin{PinSemver, ">=1.2.0 <2.0.0"}, "c3", "refs/tags/v1.9.9"},
		{Pin{PinSemver, "~1.2"}, "c1", "refs/tags/v1.2.0"},
		{Pin{PinSemver, "<1.1"}, "c0", "refs/tags/1.0.0"}, // tag without "v"
		{Pin{PinSemver, ">=1.3.0-rc.0 <1.4.0"}, "c2", "refs/tags/v1.3.0-rc.1"},
		{Pin{PinSemver, ">=2"}, "c4", "refs/tags/v2.0.0"},
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
	for _, pin := range []Pin{{PinBranch, "nope"}, {PinTag, "v9"}, {PinSemver, ">=3"}} {
		if _, err := refs.Resolve(pin); !errors.Is(err, ErrRefNotFound) {
			t.Errorf("Resolve(%s) error = %v, want ErrRefNotFound", pin, err)
		}
	}
	// The default branch follows the remote's HEAD.
	r.SetDefaultBranch("dev")
	if res := resolve(t, f.repo, Pin{}); res.Commit != commits["dev1"] || res.Ref != "refs/heads/dev" {
		t.Fatalf("after HEAD moved to dev, default resolved to %+v", res)
	}
}

func TestLatestSemverTagSkipsPrereleases(t *testing.T) {
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
