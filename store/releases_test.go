package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/releases"
)

// The store is a releases.Store.
var _ releases.Store = (*Store)(nil)

func TestReleases(t *testing.T) {
	s, _ := openTemp(t, Options{})
	if _, ok, err := s.LoadRelease("acme/skills"); ok || err != nil {
		t.Fatalf("empty store: ok=%v err=%v", ok, err)
	}
	rel := releases.Cached{
		Tag: "v1.2.3", HTMLURL: "https://github.com/acme/skills/releases/tag/v1.2.3",
		PublishedAt: when.Add(-time.Hour), ETag: `W/"abc"`, FetchedAt: when,
	}
	none := releases.Cached{FetchedAt: when, RetryNotBefore: when.Add(time.Minute)}
	if err := s.SaveRelease("acme/skills", rel); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRelease("acme/empty", none); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRelease("acme/bad", releases.Cached{Tag: "v1"}); err == nil {
		t.Fatal("saved an entry that does not validate")
	}
	s = reopen(t, s)
	for repo, want := range map[string]releases.Cached{"acme/skills": rel, "acme/empty": none} {
		got, ok, err := s.LoadRelease(repo)
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v ok=%v err=%v, want %+v", repo, got, ok, err, want)
		}
	}
	if err := s.DeleteRelease("acme/skills"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRelease("acme/unknown"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.LoadRelease("acme/skills"); ok {
		t.Fatal("deleted entry still loads")
	}
}

func TestCorruptReleaseEntry(t *testing.T) {
	s, _ := openTemp(t, Options{})
	for repo, raw := range map[string]string{
		"acme/garbage": "\x00\xff not json",
		"acme/future":  `{"v":2,"tag":"v1"}`,
		"acme/invalid": `{"v":1,"tag":"v1"}`,
	} {
		err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketReleases).Put([]byte(repo), []byte(raw)) })
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.LoadRelease(repo); ok || !errors.Is(err, releases.ErrCorruptCache) {
			t.Fatalf("%s: ok=%v err=%v, want ErrCorruptCache", repo, ok, err)
		}
		// The client then deletes it and stores a fresh one.
		if err := s.DeleteRelease(repo); err != nil {
			t.Fatal(err)
		}
	}
}

// The releases client, over the store, drops a corrupt entry, asks GitHub
// again, and after a restart answers from what the store kept.
func TestReleasesClientOverStore(t *testing.T) {
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()
	gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.2.3"})
	s, _ := openTemp(t, Options{})
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketReleases).Put([]byte("acme/skills"), []byte("garbage"))
	})
	if err != nil {
		t.Fatal(err)
	}
	latest := func(s *Store) releases.Release {
		t.Helper()
		c, err := releases.New(releases.Options{APIURL: gh.URL + "/", Store: s})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rel, err := c.Latest(context.Background(), "acme/skills")
		if err != nil {
			t.Fatal(err)
		}
		c.Wait()
		return rel
	}
	if rel := latest(s); rel.Tag != "v1.2.3" {
		t.Fatalf("latest: %+v", rel)
	}
	if c, ok, err := s.LoadRelease("acme/skills"); err != nil || !ok || c.Tag != "v1.2.3" {
		t.Fatalf("stored entry: %+v ok=%v err=%v", c, ok, err)
	}
	before := gh.Total()
	if rel := latest(reopen(t, s)); rel.Tag != "v1.2.3" {
		t.Fatalf("latest after restart: %+v", rel)
	}
	if gh.Total() != before {
		t.Fatalf("a fresh cached entry was fetched again (%d requests)", gh.Total()-before)
	}
}
