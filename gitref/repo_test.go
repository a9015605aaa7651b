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
		{in: "ssh://git@GitHub.com/Org/Repo.git", want: "ssh://github.com/Org/Repo.git"},
		{in: "SSH://git@example.com:22/org//repo/", want: "ssh://example.com/org/repo"},
		{in: "ssh://git@127.0.0.1:2222/org/repo.git", want: "ssh://127.0.0.1:2222/org/repo.git"},
		{in: "ssh://deploy@example.com/srv/git/repo.git", want: "ssh://deploy@example.com/srv/git/repo.git"},
		{in: "ssh://example.com/srv/git/repo.git", want: "ssh://example.com/srv/git/repo.git"},
		{in: "ssh://git@[::1]:2222/a/b", want: "ssh://[::1]:2222/a/b"},
		{in: "git@GitHub.com:Org/Repo.git", want: "git@github.com:Org/Repo.git"},
		{in: "git@example.com:org//x/../repo/", want: "git@example.com:org/repo"},
		{in: "example.com:repos/skills.git", want: "example.com:repos/skills.git"},
		{in: "git@example.com:/srv/git/repo.git", want: "ssh://example.com/srv/git/repo.git"},
		{in: "deploy@example.com:/srv/git/repo.git", want: "ssh://deploy@example.com/srv/git/repo.git"},
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
		"ssh://git:s3cret@example.com/org/repo",
		"ssh://-oProxyCommand=s3cret@example.com/org/repo",
		"ssh://git@-oProxyCommand=x/org/repo",
		"ssh://git@example.com",
		"ssh://git@example.com/",
		"ssh://git@example.com/-u/x",
		"ssh://git@example.com/org/repo?s3cret",
		"git@example.com:",
		"git@example.com:..",
		"git@example.com:../up/repo.git",
		"git@example.com:-u/x",
		"git@-oProxyCommand=x:org/repo",
		"git@example.com:2222:org/repo.git",
		"git@example.com:org/repo?s3cret",
		"git@ex ample.com:org/repo",
		"user:s3cret@example.com/org/repo",
		"git+ssh://git@example.com/org/repo",
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

// TestSSHRepo: ssh URLs and the scp-like form, their parts, and that a
// repository on the GitHub host over SSH matches the webhook's
// repository.full_name spelling (host/owner/name) as its https URL does.
func TestSSHRepo(t *testing.T) {
	tests := []struct {
		in, scheme, host, user, key, owner, name string
	}{
		{in: "ssh://git@github.com/Codertocat/Hello-World.git", scheme: "ssh", host: "github.com", user: "git", key: "github.com/codertocat/hello-world", owner: "Codertocat", name: "Hello-World"},
		{in: "git@github.com:Codertocat/Hello-World.git", scheme: "ssh", host: "github.com", user: "git", key: "github.com/codertocat/hello-world", owner: "Codertocat", name: "Hello-World"},
		{in: "ssh://git@127.0.0.1:2222/team/skills.git", scheme: "ssh", host: "127.0.0.1", user: "git", key: "127.0.0.1/team/skills", owner: "team", name: "skills"},
		{in: "deploy@git.example.com:skills", scheme: "ssh", host: "git.example.com", user: "deploy", key: "git.example.com/skills"},
		{in: "git.example.com:/srv/skills.git", scheme: "ssh", host: "git.example.com", user: "git", key: "git.example.com/srv/skills", owner: "srv", name: "skills"},
	}
	for _, tt := range tests {
		r, err := ParseRepo(tt.in)
		if err != nil {
			t.Fatalf("ParseRepo(%q): %v", tt.in, err)
		}
		owner, name, _ := r.OwnerName()
		if r.Scheme() != tt.scheme || !r.IsSSH() || r.Host() != tt.host || r.SSHUser() != tt.user || r.Key() != tt.key || owner != tt.owner || name != tt.name {
			t.Errorf("%s: scheme %q host %q user %q key %q owner/name %q/%q", tt.in, r.Scheme(), r.Host(), r.SSHUser(), r.Key(), owner, name)
		}
		if !r.Match(tt.key) {
			t.Errorf("%s does not match its key %s", r, tt.key)
		}
	}
	for _, spelling := range []string{"git@github.com:Codertocat/Hello-World.git", "ssh://git@github.com/Codertocat/Hello-World.git"} {
		r, err := ParseRepo(spelling)
		if err != nil {
			t.Fatal(err)
		}
		// What webhook.sameRepo offers for a delivery on the GitHub host.
		for _, sent := range []string{"github.com/Codertocat/Hello-World", "https://github.com/Codertocat/Hello-World.git", "git@github.com:Codertocat/Hello-World.git"} {
			if !r.Match(sent) {
				t.Errorf("%s does not match the delivery's %s", r, sent)
			}
		}
	}
	https, _ := ParseRepo("https://github.com/a/b")
	if https.IsSSH() || https.SSHUser() != "" {
		t.Errorf("%s reads as ssh", https)
	}
}

// TestSCPFormCarriesNoPort: git reads host:2222:path as the path
// "2222:path", go-git as port 2222; the address is refused with the ssh
// URL that says what is meant, and a port-like path segment further on
// is an ordinary path.
func TestSCPFormCarriesNoPort(t *testing.T) {
	_, err := ParseRepo("git@example.com:2222:org/repo.git")
	if !errors.Is(err, ErrInvalidRepo) || !strings.Contains(err.Error(), "ssh://git@example.com:PORT/path") {
		t.Fatalf("err = %v; want ErrInvalidRepo naming the ssh URL form", err)
	}
	r, err := ParseRepo("git@example.com:org/2222:x")
	if err != nil || r.URL() != "git@example.com:org/2222:x" || r.Host() != "example.com" {
		t.Fatalf("ParseRepo = %q, %v; host %q", r, err, r.Host())
	}
	r, err = ParseRepo("ssh://git@example.com:2222/org/repo.git")
	if err != nil || r.Host() != "example.com" || r.URL() != "ssh://example.com:2222/org/repo.git" {
		t.Fatalf("ParseRepo = %q, %v", r, err)
	}
}
