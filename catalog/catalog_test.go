package catalog

import (
	"testing"
)

// FuzzFileURI checks that the one-allocation URI builder renders exactly
// what the general one does, escaping or not.
func FuzzFileURI(f *testing.F) {
	for _, s := range [][2]string{
		{"", "SKILL.md"}, {"pdf", "SKILL.md"}, {"a/b", "scripts/run.sh"}, {"my skill", "a b.md"},
		{"x", "é.md"}, {"x", "a%b"}, {"x", "a:b@c!$&'()*+,;=~.md"}, {"x", "a?b#c"}, {"x", "a\\b"}, {"x", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, dir, p string) {
		if got, want := fileURI("acme", dir, p), FileURI("acme", joinRel(dir, p)); got != want {
			t.Fatalf("fileURI(%q, %q) = %q, want %q", dir, p, got, want)
		}
	})
}
