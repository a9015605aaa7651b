package gitref

import (
	"errors"
	"strings"
	"testing"
)

// Moved from gitstore's NormalizeURL test: the canonical form is the
// repository's identity (its object store, its key, its provenance).
func TestParseRepo(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "https://Example.COM/Org/Repo.git", want: "https://example.com/Org/Repo.git"},
		{in: "https://example.com:443/org/repo/", want: "https://example.com/org/repo"},
		{in: "HTTP://example.com:80/org//repo", want: "http://example.com/org/repo"},
		{in: "http://127.0.0.1:8080/a/b.git", want: "http://127.0.0.1:8080/a/b.git"},
		{in: "https://example.com:8443/a/b", want: "https://example.com:8443/a/b"},
		{in: "https://[::1]/a/b", want: "https://[::1]/a/b"},
		{in: "https://[::1]:8443/a/b", want: "https://[::1]:8443/a/b"},
		{in: "https://example.com/org/x/../repo", want: "https://example.com/org/repo"},
		{in: "  https://example.com/org/repo  ", want: "https://example.com/org/repo"},
		{in: "file:///srv/git/repo.git", want: "file:///srv/git/repo.git"},
		{in: "file://localhost/srv/git/repo.git/", want: "file:///srv/git/repo.git"},
	}
	for _, tt := range tests {
		got, err := ParseRepo(tt.in)
		if err != nil || got.URL() != tt.want || got.String() != tt.want {
			t.Errorf("ParseRepo(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if again, err := ParseRepo(got.URL()); err != nil || again != got {
			t.Errorf("ParseRepo(%q) = %q, %v; the canonical form must parse to itself", got, again, err)
		}
	}
	for _, bad := range []string{
		"https://user:s3cret@example.com/org/repo",
		"https://s3cret@example.com/org/repo",
		"ssh://git@example.com/org/repo",
		"git@example.com:org/repo.git",
		"user:s3cret@example.com/org/repo",
		"example.com/org/repo",
		"https://example.com",
		"https://example.com/",
		"https:///org/repo",
		"https://example.com/org/repo?token=s3cret",
		"https://example.com/org/repo#s3cret",
		"https://example.com/org/repo?",
		"file://otherhost/x",
		"ftp://example.com/x",
		"://",
		"https://us%zzer:s3cret@example.com/x",
		"",
	} {
		r, err := ParseRepo(bad)
		if !errors.Is(err, ErrInvalidRepo) || !r.IsZero() {
			t.Errorf("ParseRepo(%q) = %q, %v; want ErrInvalidRepo", bad, r, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseRepo(%q) error leaks the secret: %v", bad, err)
		}
	}
}

func TestRepoParts(t *testing.T) {
	tests := []struct {
		url, scheme, host, key string
		owner, name            string
		ok                     bool
	}{
		{url: "https://GitHub.com/Codertocat/Hello-World.git", scheme: "https", host: "github.com", key: "github.com/codertocat/hello-world", owner: "Codertocat", name: "Hello-World", ok: true},
		{url: "http://ghe.example.com:8080/a/b/", scheme: "http", host: "ghe.example.com", key: "ghe.example.com/a/b", owner: "a", name: "b", ok: true},
		{url: "https://gitlab.example.com/group/sub/repo", scheme: "https", host: "gitlab.example.com", key: "gitlab.example.com/group/sub/repo"},
		{url: "https://example.com/solo", scheme: "https", host: "example.com", key: "example.com/solo"},
		{url: "file:///srv/git/skills.git", scheme: "file", host: "", key: "/srv/git/skills", owner: "git", name: "skills"},
	}
	for _, tt := range tests {
		r, err := ParseRepo(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		owner, name, ok := r.OwnerName()
		if r.Scheme() != tt.scheme || r.Host() != tt.host || r.Key() != tt.key {
			t.Errorf("%s: scheme %q host %q key %q", tt.url, r.Scheme(), r.Host(), r.Key())
		}
		if tt.scheme != "file" && (ok != tt.ok || owner != tt.owner || name != tt.name) {
			t.Errorf("%s: OwnerName = %q, %q, %v", tt.url, owner, name, ok)
		}
	}
	var zero Repo
	if !zero.IsZero() || zero.Key() != "" || zero.Host() != "" || zero.Match("") || zero.Match("https://github.com/a/b") {
		t.Error("the zero Repo names or matches something")
	}
}

// TestRepoMatch: the one test of whether a webhook's repository is a
// source's, whatever spelling GitHub sends.
func TestRepoMatch(t *testing.T) {
	r, err := ParseRepo("https://github.com/Codertocat/Hello-World.git")
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		"https://github.com/codertocat/hello-world",
		"git@github.com:Codertocat/Hello-World.git",
		"ssh://git@github.com:22/codertocat/hello-world",
		"git://github.com/Codertocat/Hello-World.git",
		"github.com/Codertocat/Hello-World",
	} {
		if !r.Match(raw) {
			t.Errorf("%s does not match %s", raw, r)
		}
	}
	for _, raw := range []string{"", "https://github.com/Codertocat/Hello-World-2", "https://ghe.example.com/Codertocat/Hello-World", "https://github.com"} {
		if r.Match(raw) {
			t.Errorf("%q matches %s", raw, r)
		}
	}
}

// Moved from webhook's repoKey test.
func TestKey(t *testing.T) {
	want := "github.com/codertocat/hello-world"
	for _, raw := range []string{
		"https://github.com/Codertocat/Hello-World.git",
		"https://github.com/Codertocat/Hello-World",
		"https://github.com/Codertocat/Hello-World/",
		"https://github.com/Codertocat/Hello-World.git/",
		"http://github.com/codertocat/hello-world",
		"https://x-access-token:s3cr3t@github.com/Codertocat/Hello-World.git",
		"https://github.com:443/Codertocat/Hello-World.git",
		"ssh://git@github.com/Codertocat/Hello-World.git",
		"ssh://git@github.com:22/codertocat/hello-world",
		"git@github.com:Codertocat/Hello-World.git",
		"git@GitHub.com:codertocat/hello-world",
		"github.com:Codertocat/Hello-World.git",
		"git://github.com/Codertocat/Hello-World.git",
		"  https://GITHUB.COM/CODERTOCAT/HELLO-WORLD.GIT  ",
		"github.com/Codertocat/Hello-World",
	} {
		if got := Key(raw); got != want {
			t.Errorf("Key(%q) = %q, want %q", raw, got, want)
		}
	}
	for raw, want := range map[string]string{
		"":                                     "",
		"https://github.com":                   "",
		"https://github.com/":                  "",
		"https://github.com/.git":              "",
		"::::":                                 "",
		"https://ghe.example.com:8443/a/b":     "ghe.example.com/a/b",
		"file:///srv/git/skills.git":           "/srv/git/skills",
		"https://api.github.com/repos/a/b":     "api.github.com/repos/a/b",
		"https://github.com/other/Hello-World": "github.com/other/hello-world",
	} {
		if got := Key(raw); got != want {
			t.Errorf("Key(%q) = %q, want %q", raw, got, want)
		}
	}
}

// Moved from webhook's hostOf test.
func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"github.com":                  "github.com",
		"GitHub.com":                  "github.com",
		"ghe.example.com:8443":        "ghe.example.com",
		"https://ghe.example.com/":    "ghe.example.com",
		"https://GHE.example.com:443": "ghe.example.com",
		"https://api.github.com/":     "api.github.com",
		"ghe.example.com/api/v3":      "ghe.example.com",
	} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com/a":              "https://example.com/a",
		"https://u:s3cret@example.com/a":     "https://example.com/a",
		"https://s3cret@example.com/a":       "https://example.com/a",
		"https://u:s3%zzret@example.com/a/b": "example.com/a/b",
		"not a url":                          "not a url",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
