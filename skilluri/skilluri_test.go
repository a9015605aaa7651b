package skilluri

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]string{
		"skill://acme/pdf/SKILL.md":      "pdf/SKILL.md",
		"skill://acme":                   "",
		"skill://acme/a/My%20File.md":    "a/My File.md",
		"skill://acme/a/%C3%A9.md":       "a/é.md",
		"skill://a.b-c/x:y@z!$&'()*+,;=": "x:y@z!$&'()*+,;=",
	}
	for in, p := range good {
		u, err := Parse(in, 1024)
		if err != nil || u.Path() != p || u.String() != in {
			t.Errorf("Parse(%q) = %+v, %v", in, u, err)
		}
	}
	for _, in := range []string{
		"", "http://acme/x", "skill://", "skill://Acme/x", "skill://acme/../x", "skill://acme/%2e%2e/x",
		"skill://acme//x", "skill://acme/x/", "skill://acme/a%2Fb", "skill://acme/a%5Cb", "skill://acme/a\\b",
		"skill://acme/a%00b", "skill://acme/a%0Ab", "skill://acme/a%7Fb", "skill://acme/%ff", "skill://acme/x?y",
		"skill://acme/x#y", "skill://acme/%41", "skill://acme/a b", "skill://acme/%c3%a9", "skill://-acme/x",
		"skill://acme/" + strings.Repeat("a", 1024),
	} {
		if _, err := Parse(in, 1024); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

// FuzzParse: nothing that parses can name a path outside its authority's
// tree, and every accepted URI is its own canonical form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"skill://acme/pdf/SKILL.md", "skill://acme/../x", "skill://a/%2e%2e", "skill://a/b%2Fc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(s, 4096)
		if err != nil {
			return
		}
		if u.String() != s {
			t.Fatalf("accepted %q, canonical form %q", s, u.String())
		}
		p := u.Path()
		if p != "" && (path.Clean(p) != p || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || p == "..") {
			t.Fatalf("accepted %q resolving to %q", s, p)
		}
	})
}
