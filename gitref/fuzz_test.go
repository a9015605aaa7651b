package gitref

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// FuzzParsePin: whatever a configuration file holds, ParsePin either
// refuses it with ErrInvalidPin or returns a pin that validates, parses
// back to itself from its own kind and value, and cannot put a refspec, a
// revision expression or an option into a git command line.
func FuzzParsePin(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""}, {"default", ""}, {"branch", "main"}, {"branch", "refs/heads/main"}, {"branch", "feature..x"},
		{"branch", "main:refs/heads/evil"}, {"branch", "-rf"}, {"tag", "v1.2.0"}, {"tag", "v1^{}"},
		{"commit", strings.Repeat("AB", 20)}, {"semver", ">=1.2.0 <2.0.0"}, {"semver", "^1"},
		{"release", "latest"}, {"release", "v1"}, {"bogus", "x"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, kind, value string) {
		p, err := ParsePin(kind, value)
		if err != nil {
			if !errors.Is(err, ErrInvalidPin) {
				t.Fatalf("ParsePin(%q, %q) error %v is not ErrInvalidPin", kind, value, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParsePin(%q, %q) = %+v, which does not validate: %v", kind, value, p, err)
		}
		again, err := ParsePin(p.Kind.String(), p.Value)
		if err != nil || again != p {
			t.Fatalf("ParsePin(%q, %q) = %+v, but its own kind and value parse to %+v, %v", kind, value, p, again, err)
		}
		_ = p.String()
		switch p.Kind {
		case Branch, Tag:
			if strings.ContainsAny(p.Value, ": ~^?*[\\") || strings.HasPrefix(p.Value, "-") || strings.Contains(p.Value, "..") {
				t.Fatalf("ref name %q passed", p.Value)
			}
		case Commit:
			if !IsCommitID(p.Value) {
				t.Fatalf("commit %q passed", p.Value)
			}
		}
	})
}

// FuzzParseRepo: a repository URL is refused with ErrInvalidRepo, in a
// message that never holds the URL's password, or made canonical: a
// URL that parses to itself, holds no credentials, query or fragment,
// and has a key.
func FuzzParseRepo(f *testing.F) {
	for _, seed := range []string{
		"https://github.com/Codertocat/Hello-World.git", "https://Example.COM:443/org//x/../repo/",
		"http://127.0.0.1:8080/a/b.git", "https://[::1]:8443/a", "file:///srv/git/repo.git",
		"file://localhost/srv/x", "https://user:s3cret@example.com/x", "https://example.com/x?token=s3cret",
		"ssh://git@github.com/a/b", "git@github.com:a/b.git", "ssh://git@127.0.0.1:2222/a/b.git",
		"git@host:2222:a/b", "git@host:/srv/a.git", "ssh://git:s3cret@host/a", "user:s3cret@example.com/org/repo", "://", "", "https://example.com",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := ParseRepo(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidRepo) || !r.IsZero() {
				t.Fatalf("ParseRepo(%q) = %q, %v; want the zero Repo and ErrInvalidRepo", raw, r, err)
			}
			if u, perr := url.Parse(strings.TrimSpace(raw)); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && !strings.Contains(strings.Replace(raw, u.User.String(), "", 1), pw) && strings.Contains(err.Error(), pw) {
					t.Fatalf("ParseRepo(%q) error shows the password: %v", raw, err)
				}
			}
			return
		}
		again, err := ParseRepo(r.URL())
		if err != nil || again != r {
			t.Fatalf("ParseRepo(%q) = %q, which parses to %q, %v", raw, r, again, err)
		}
		if r.IsSSH() && !strings.Contains(r.URL(), "://") {
			// user@host:path: no password, query or fragment in it.
			if strings.ContainsAny(r.URL(), "?#") || strings.Count(r.URL(), "@") > 1 || r.Host() == "" {
				t.Fatalf("ParseRepo(%q) = %q carries credentials, a query or a fragment", raw, r)
			}
		} else {
			u, err := url.Parse(r.URL())
			_, hasPassword := u.User.Password()
			if err != nil || (u.User != nil && (u.Scheme != "ssh" || hasPassword)) || u.RawQuery != "" || u.Fragment != "" {
				t.Fatalf("ParseRepo(%q) = %q carries credentials, a query or a fragment", raw, r)
			}
		}
		if r.Key() == "" {
			t.Fatalf("ParseRepo(%q) = %q has no key", raw, r)
		}
		if !r.Match(r.URL()) {
			t.Fatalf("%q does not match itself", r)
		}
	})
}

// FuzzKey: Key is total (no panic on any input), its answer is lower
// case and a fixed point (the key of a key is itself), so comparing keys
// is comparing repositories however each side spelt its URL.
func FuzzKey(f *testing.F) {
	for _, seed := range []string{
		"https://github.com/Codertocat/Hello-World.git", "git@github.com:Codertocat/Hello-World.git",
		"ssh://git@github.com:22/codertocat/hello-world", "git://github.com/a/b", "github.com/a/b",
		"file:///srv/git/skills.git", "::::", "", "https://github.com/.git", "[::1]:x", "a@b@c:d/e",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k := Key(raw)
		if k == "" {
			return
		}
		if k != strings.ToLower(k) {
			t.Fatalf("Key(%q) = %q is not lower case", raw, k)
		}
		if again := Key(k); again != k {
			t.Fatalf("Key(%q) = %q, but Key(%q) = %q", raw, k, k, again)
		}
	})
}
