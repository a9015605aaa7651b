package catalog

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	good := []struct{ in, source, path string }{
		{"skill://acme/pdf/SKILL.md", "acme", "pdf/SKILL.md"},
		{"skill://acme", "acme", ""},
		{"skill://a.b-c/x/y", "a.b-c", "x/y"},
		{"skill://acme/pdf/My%20File.md", "acme", "pdf/My File.md"},
		{"skill://acme/pdf/%C3%A9.md", "acme", "pdf/é.md"},
		{"skill://acme/pdf/a:b@c!$&'()*+,;=~.md", "acme", "pdf/a:b@c!$&'()*+,;=~.md"},
	}
	for _, c := range good {
		u, err := ParseURI(c.in)
		if err != nil {
			t.Errorf("ParseURI(%q): %v", c.in, err)
			continue
		}
		if u.Source != c.source || u.Path != c.path {
			t.Errorf("ParseURI(%q) = %+v", c.in, u)
		}
		if u.String() != c.in {
			t.Errorf("round trip of %q gave %q", c.in, u.String())
		}
	}
	bad := []string{
		"", "skill:/acme/x", "file:///etc/passwd", "skill://", "skill:///x", "skill://ACME/x",
		"skill://acme/../etc/passwd", "skill://acme/pdf/../x", "skill://acme/./x", "skill://acme//x",
		"skill://acme/x/", "skill://acme/%2e%2e/x", "skill://acme/%2E/x", "skill://acme/a%2Fb",
		"skill://acme/a%5Cb", "skill://acme/a\\b", "skill://acme/a%00b", "skill://acme/a\x00b",
		"skill://acme/x?y", "skill://acme/x#y", "skill://acme/%41", "skill://acme/a%2", "skill://acme/a%zz",
		"skill://acme/a b", "skill://acme/%c3%a9", "skill://..acme/x", "skill://acme:80/x", "skill://user@acme/x",
		"skill://" + strings.Repeat("a", 2000),
	}
	for _, in := range bad {
		if u, err := ParseURI(in); err == nil {
			t.Errorf("ParseURI(%q) = %+v, want an error", in, u)
		} else if !errors.Is(err, ErrBadURI) {
			t.Errorf("ParseURI(%q): %v does not wrap ErrBadURI", in, err)
		}
	}
}

// FuzzParseURI checks that nothing that parses can name a path outside its
// source (no dot segments, no separators smuggled in a segment), and that
// every accepted URI is its own canonical form.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"skill://acme/pdf/SKILL.md", "skill://acme/../x", "skill://acme/%2e%2e/x", "skill://a/b%2Fc", "skill://a/%20", "skill://a/b/./c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURI(s)
		if err != nil {
			return
		}
		if u.String() != s {
			t.Fatalf("accepted %q but its canonical form is %q", s, u.String())
		}
		if u.Path == "" {
			return
		}
		if path.Clean(u.Path) != u.Path || strings.HasPrefix(u.Path, "/") || u.Path == ".." || strings.HasPrefix(u.Path, "../") {
			t.Fatalf("accepted %q resolving to %q outside its source", s, u.Path)
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
				t.Fatalf("accepted %q with segment %q", s, seg)
			}
		}
	})
}
