package store

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/discovery"
)

// TestDiscovered: group records and names survive a reopen, a deleted
// group's names stay, and a damaged record is reported by Load and Check.
func TestDiscovered(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g, n, err := s.LoadDiscovery(); err != nil || g != nil || n != nil {
		t.Fatalf("before any save: %v %v %v", g, n, err)
	}
	rec := discovery.GroupRecord{
		Group: "acme", Owner: "acme", ListedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		Pages: []discovery.Page{{URL: "https://api.github.com/orgs/acme/repos?per_page=100", ETag: `"abc"`,
			Repos: []discovery.Repo{{ID: 7, FullName: "acme/skills", CloneURL: "https://github.com/acme/skills.git", DefaultBranch: "main", Topics: []string{"agent-skills"}}}}},
		Trees: []discovery.TreeCheck{{ID: 7, Ref: "main", Path: "skills", ETag: `"t"`, HasSkill: true}},
		Found: []discovery.Found{{Group: "acme", Source: "acme-skills", Included: true,
			Repo: discovery.Repo{ID: 7, FullName: "acme/skills", CloneURL: "https://github.com/acme/skills.git"}}},
	}
	names := []discovery.Name{{ID: 7, Name: "acme-skills", Group: "acme"}}
	if err := s.SaveDiscovery(rec, names); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDiscovery(discovery.GroupRecord{Group: "beta", Owner: "beta"}, names); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	groups, gotNames, err := s.LoadDiscovery()
	if err != nil || len(groups) != 2 || !reflect.DeepEqual(groups[0], rec) || !reflect.DeepEqual(gotNames, names) {
		t.Fatalf("after a reopen: %v\n%+v\n%+v", err, groups, gotNames)
	}
	if err := s.DeleteDiscoveryGroup("acme"); err != nil {
		t.Fatal(err)
	}
	groups, gotNames, err = s.LoadDiscovery()
	if err != nil || len(groups) != 1 || groups[0].Group != "beta" || !reflect.DeepEqual(gotNames, names) {
		t.Fatalf("after deleting acme: %v %+v %+v", err, groups, gotNames)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDiscovered)
		k := []byte("names/7")
		v := append([]byte(nil), b.Get(k)...)
		v[3] ^= 1
		return b.Put(k, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.LoadDiscovery(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged record loaded: %v", err)
	}
	if err := s.Check(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check missed a damaged discovered record: %v", err)
	}
}
