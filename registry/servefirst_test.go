package registry_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
)

// heldStore is a real store whose snapshot writes wait, each, until the
// test lets them through: entered says one is waiting.
type heldStore struct {
	*store.Store
	entered chan struct{}
	release chan struct{}
}

func (h *heldStore) SaveSnapshot(snap *catalog.Snapshot, st catalog.State) error {
	select {
	case h.entered <- struct{}{}:
	case <-h.release: // closed: the test is over
	}
	<-h.release
	return h.Store.SaveSnapshot(snap, st)
}

// TestDirFirstCatalogServedBeforeStored: a directory source's first
// catalog (an empty data dir) is served, and the registry ready, while
// its snapshot is still being stored; the state says it is saving until
// it is stored, and a restart then finds it. A later sync of the same
// source still stores before it serves: while its write is held, the
// catalog served is the one before.
func TestDirFirstCatalogServedBeforeStored(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), store.FileName)
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := &heldStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	root := t.TempDir()
	writeSkills := func(from, to int) {
		for i := from; i < to; i++ {
			name := fmt.Sprintf("s%02d", i)
			if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, name, "SKILL.md"), []byte(testkit.SkillMD(name)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeSkills(0, 3)
	src := catalog.Source{Name: "local", Kind: catalog.KindDir, Dir: root}
	reg := registry.New(registry.Options{Store: held, Logger: testkit.Logger(t, slog.LevelWarn)})
	reg.SetSources([]catalog.Source{src})
	if _, err := reg.Restore(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(func() {
		close(held.release) // a write still waiting goes through
		stop()
		st.Close()
	})
	stateOf := func() catalog.State {
		for _, s := range reg.States() {
			if s.Source == "local" {
				return s
			}
		}
		return catalog.State{}
	}

	// The first snapshot's write is waiting: it is served already.
	<-held.entered
	if !reg.Ready() {
		t.Fatal("not ready while the first catalog is being stored")
	}
	if n := reg.Current().Len(catalog.Filter{}); n != 3 {
		t.Fatalf("served %d skills while the first catalog is being stored, want 3", n)
	}
	if s := stateOf(); !s.Saving || s.LastResult != catalog.ResultUpdated || s.Skills != 3 || s.PersistError != "" {
		t.Fatalf("state while the first catalog is being stored: %+v, want updated, 3 skills, saving", s)
	}
	held.release <- struct{}{}
	testkit.WaitUntil(t, "the first catalog stored", func() bool { return !stateOf().Saving })

	// A later sync stores first: while its write waits, the catalog
	// served is still the first one.
	writeSkills(3, 4)
	reg.RequestSync("local", catalog.TriggerManual)
	<-held.entered
	if n := reg.Current().Len(catalog.Filter{}); n != 3 {
		t.Fatalf("served %d skills while a resync's catalog is being stored, want the 3 stored before", n)
	}
	if s := stateOf(); s.Saving || s.Skills != 3 {
		t.Fatalf("state while a resync's catalog is being stored: %+v, want the 3 skills served, not saving", s)
	}
	held.release <- struct{}{}
	testkit.WaitUntil(t, "the resync served", func() bool { return reg.Current().Len(catalog.Filter{}) == 4 })
	stop()

	// Both were stored: a restart finds the last.
	ps, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Snapshot == nil || len(ps[0].Snapshot.Skills) != 4 || ps[0].State.Saving {
		t.Fatalf("stored %+v, want the 4-skill catalog", ps)
	}
}
