package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// TestResyncKeepsWhatItHashed checks that a file changed again right after
// a resync read it is still served as the generation states it, from the
// bytes the resync hashed, and never under the wrong digest.
func TestResyncKeepsWhatItHashed(t *testing.T) {
	r, root := newDirRegistry(t, Options{})
	testkit.WriteFiles(t, root, map[string]string{"a/ref.md": "alpha two"})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	f, err := r.Current().File(catalog.Filter{}, "skill://local/a/ref.md")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFiles(t, root, map[string]string{"a/ref.md": "ALPHA TWO"}) // not resynced yet
	data, err := r.ReadFile(context.Background(), f)
	if err != nil || string(data) != "alpha two" {
		t.Fatalf("ReadFile = %q, %v; want the resync's bytes", data, err)
	}
}

func TestLazyDigests(t *testing.T) {
	loads := 0
	l := NewLazyDigests(func() (map[string]skill.Digest, error) {
		loads++
		return map[string]skill.Digest{"k": {Digest: skill.Sum{1}, Size: 1}}, nil
	}, func(err error) { t.Errorf("unexpected error %v", err) })
	if loads != 0 {
		t.Fatal("loaded before first use")
	}
	if d, ok := l.Get("k"); !ok || d.Size != 1 {
		t.Fatalf("Get(k) = %v, %v", d, ok)
	}
	l.Put("j", skill.Digest{Digest: skill.Sum{2}, Size: 2})
	if d, ok := l.Get("j"); !ok || d.Size != 2 || loads != 1 {
		t.Fatalf("Get(j) = %v, %v after %d loads", d, ok, loads)
	}

	var reported error
	bad := NewLazyDigests(func() (map[string]skill.Digest, error) {
		return nil, errors.New("bucket unreadable")
	}, func(err error) { reported = err })
	if _, ok := bad.Get("k"); ok || reported == nil {
		t.Fatalf("a failed load must start empty and be reported (%v)", reported)
	}
	bad.Put("k", skill.Digest{Size: 3})
	if d, ok := bad.Get("k"); !ok || d.Size != 3 {
		t.Fatal("a failed load must still cache what syncs put")
	}
}
