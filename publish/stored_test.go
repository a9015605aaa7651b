package publish

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"testing"

	"github.com/skillreg/skillreg/store"
)

// TestRestartTakesStoredArchiveDigests: a handler started over a store
// that an earlier one saved its digests in (a restart) reads no file to
// build its first view, states the same digests, and its archives still
// match them. Over an empty store it digests every archive and stores the
// digests; a digest the store lost is made again.
func TestRestartTakesStoredArchiveDigests(t *testing.T) {
	defer func(n int) { saveBatch = n }(saveBatch)
	saveBatch = 2 // several writes
	path := filepath.Join(t.TempDir(), "skillreg.db")
	open := func() *store.Store {
		st, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st := open()
	var cc *countingCatalog
	f := newFixture(t, defaultSources(), func(o *Options) {
		cc = &countingCatalog{Catalog: o.Catalog, reads: map[string]int{}}
		o.Catalog, o.Digests = cc, st
	})
	f.h.Warm()
	if len(cc.take()) == 0 {
		t.Fatal("the first view over an empty store read nothing")
	}
	zips := func(v *view) map[string]sum {
		m := map[string]sum{}
		for i := range v.entries {
			if e := &v.entries[i]; e.zipOK {
				m[e.source()+"/"+e.ref.Skill.Path] = e.zip
			}
		}
		return m
	}
	want := zips(f.h.view(context.Background()))
	if len(want) == 0 {
		t.Fatal("no archive digested")
	}
	st.Close()

	// The restart: the same catalog, a new handler, the store reopened.
	st = open()
	h, err := New(Options{Catalog: cc, Digests: st})
	if err != nil {
		t.Fatal(err)
	}
	h.Warm()
	if reads := cc.take(); len(reads) != 0 {
		t.Fatalf("the first view after a restart read %d files: %v", len(reads), reads)
	}
	v := h.view(context.Background())
	got := zips(v)
	if len(got) != len(want) {
		t.Fatalf("%d archives digested after the restart, %d before", len(got), len(want))
	}
	for k, d := range want {
		if got[k] != d {
			t.Errorf("%s: %s after the restart, %s before", k, got[k].digest(), d.digest())
		}
	}
	for i := range v.entries {
		e := &v.entries[i]
		if !e.zipOK {
			continue
		}
		s, err := h.digestLayout(context.Background(), skillLayout(e.ref, ""))
		if err != nil || s != e.zip {
			t.Errorf("%s: stored digest %s, the archive's %s (%v)", e.ref.Skill.Path, e.zip.digest(), s.digest(), err)
		}
	}

	// Digests no skill uses, more than a quarter of the entries: the next
	// start keeps only those in use, and still reads nothing.
	cc.take() // the archives built above
	var junk [][32]byte
	for i := range len(want) {
		junk = append(junk, sha256.Sum256([]byte{byte(i)}))
	}
	if err := st.PutArchiveDigests(junk, junk, false); err != nil {
		t.Fatal(err)
	}
	h, err = New(Options{Catalog: cc, Digests: st})
	if err != nil {
		t.Fatal(err)
	}
	h.Warm()
	if reads := cc.take(); len(reads) != 0 {
		t.Fatalf("the start that dropped unused digests read %d files", len(reads))
	}
	if _, found, stored, err := st.LookupArchiveDigests(junk); err != nil || stored != len(want) || found[0] {
		t.Fatalf("after the start: %d digests stored (want %d), an unused one found: %v (%v)", stored, len(want), found[0], err)
	}
}
