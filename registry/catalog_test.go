package registry

import (
	"context"
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

// TestResyncKeepsWhatItHashed checks that a file changed again right after
// a resync read it is still served as the generation states it, from the
// bytes the resync hashed, and never under the wrong digest.
func TestResyncKeepsWhatItHashed(t *testing.T) {
	r, root := newDirRegistry(t, Options{})
	writeFiles(t, root, map[string]string{"a/ref.md": "alpha two"})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	f, err := r.Current().File(Filter{}, "skill://local/a/ref.md")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"a/ref.md": "ALPHA TWO"}) // not resynced yet
	data, err := r.ReadFile(context.Background(), f)
	if err != nil || string(data) != "alpha two" {
		t.Fatalf("ReadFile = %q, %v; want the resync's bytes", data, err)
	}
}
