package registry_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
)

// TestShutdownStopsSyncWithoutRecord is the daemon's case end to end, over
// a real store file and a real remote that accepted the connection and has
// not answered yet: the shutdown stops the sync, and the restart finds no
// failure for it in the store.
func TestShutdownStopsSyncWithoutRecord(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, store.FileName)
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := gitstore.NewPool(filepath.Join(dir, "git"), gitstore.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	hung := gittest.NewHungServer(t)
	reg := registry.New(registry.Options{Store: st, Git: pool})
	repo, err := gitref.ParseRepo(hung.URL())
	if err != nil {
		t.Fatal(err)
	}
	reg.SetSources([]catalog.Source{{Name: "team", Kind: catalog.KindGit, Timeout: time.Hour, Git: &catalog.GitSource{Repo: repo}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- reg.Run(ctx) }()
	select {
	case <-hung.Accepted():
	case <-time.After(time.Minute): // a guard against hanging, not a measurement
		t.Fatal("the remote was never asked")
	}
	cancel()
	<-done
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ps, err := st2.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.State.LastResult != "" || p.State.LastError != "" || strings.Contains(p.State.LastError, "context canceled") {
			t.Errorf("the restart finds an outcome of a sync the shutdown stopped: %+v", p.State)
		}
	}
}
