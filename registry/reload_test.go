package registry

import (
	"context"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
)

// gateStore holds the first snapshot write until released.
type gateStore struct {
	countStore
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *gateStore) SaveSnapshot(snap *catalog.Snapshot, st catalog.State) error {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return s.countStore.SaveSnapshot(snap, st)
}

// TestReloadDuringPersistKeepsNewConfig: a reload that changes a source's
// path while a sync of the old configuration is storing its snapshot
// wins: the old sync neither swaps its snapshot in nor leaves it stored,
// and the next sync serves the new path (not the old snapshot, which, at
// the same commit, it would take for unchanged).
func TestReloadDuringPersistKeepsNewConfig(t *testing.T) {
	git := &fakeGit{}
	repo := &fakeRepo{}
	repo.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
	src := git.add("team", repo)
	src.Git.Path = "old"
	st := &gateStore{entered: make(chan struct{}), release: make(chan struct{})}
	r := New(Options{gitRepos: git.Repo, Store: st})
	r.SetSources([]catalog.Source{src})

	synced := make(chan error)
	go func() { synced <- r.SyncNow(context.Background(), "team") }()
	<-st.entered

	moved := src
	g := *src.Git
	g.Path = "new"
	moved.Git = &g
	reloaded := make(chan struct{})
	go func() {
		r.SetSources([]catalog.Source{moved})
		close(reloaded)
	}()
	// The reload has marked the old run removed once the source's config
	// reads the new path.
	testkit.WaitUntil(t, "the reload", func() bool {
		s := r.source("team")
		return s != nil && s.Git.Path == "new"
	})
	close(st.release)
	<-synced
	<-reloaded

	if snap, ok := r.Current().Snapshot("team"); ok {
		t.Fatalf("the old configuration's snapshot (path %q) was swapped in after the reload", snap.Path)
	}
	if err := r.SyncNow(context.Background(), "team"); err != nil {
		t.Fatal(err)
	}
	snap, ok := r.Current().Snapshot("team")
	if !ok || snap.Path != "new" {
		t.Fatalf("after the reload's sync: %+v, want the new path", snap)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.deletes == 0 {
		t.Error("the old configuration's stored snapshot was not forgotten")
	}
}
