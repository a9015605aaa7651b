package registry_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/fulldisk"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
)

// TestPersistOnFullDisk runs the registry over a real store file on a
// real file system that fills up. A sync that cannot be stored is still
// served, and the failure is in the state; once space returns, the
// persist is retried until it is stored (nothing lost across a restart);
// a restart while the disk is still full serves the older stored catalog
// marked stale, and its resync replaces it.
func TestPersistOnFullDisk(t *testing.T) {
	mnt, ok := fulldisk.Mount(t, 32<<20)
	if !ok {
		return
	}
	dbPath := filepath.Join(mnt, store.FileName)
	root := t.TempDir()
	addSkills(t, root, 0, 5)
	src := catalog.Source{Name: "local", Kind: catalog.KindDir, Dir: root}

	// The first process stores 5 skills, then syncs 305 on a full disk.
	d1 := startRegistry(t, dbPath, src)
	// Stored once no longer saving: a directory source's first catalog is
	// served first, stored right after.
	testkit.WaitUntil(t, "first sync, stored", func() bool {
		st := d1.state()
		return !st.LastSuccess.IsZero() && st.Skills == 5 && !st.Saving
	})
	free := fulldisk.Fill(t, mnt)
	addSkills(t, root, 5, 300)
	d1.reg.RequestSync("local", catalog.TriggerManual)
	testkit.WaitUntil(t, "a sync of 305 skills whose persist fails", func() bool {
		st := d1.state()
		return st.Skills == 305 && st.PersistFailures > 0 && d1.reg.Current().Len(catalog.Filter{}) == 305
	})
	if st := d1.state(); !strings.Contains(st.PersistError, "no space left on device") || st.PersistErrorAt.IsZero() || st.NextPersist.IsZero() {
		t.Fatalf("state after a failed persist: %+v", st)
	}

	// A restart while the disk is still full: the stored catalog (5
	// skills, or a few more: the watcher's rescans of the first skills
	// written store only those, which may fit the file's free pages) is
	// served, marked stale, and the source resyncs.
	d1.stop()
	d2 := openRegistry(t, dbPath, src)
	if len(d2.report.Stale) != 1 || d2.report.Stale[0] != "local" {
		t.Fatalf("restore report %+v, want local restored stale", d2.report)
	}
	stored := d2.state().Skills
	if st := d2.state(); !st.Stale || st.Skills < 5 || st.Skills >= 305 || st.PersistError == "" {
		t.Fatalf("restored state %+v, want stale, fewer than 305 skills, and the persist error", st)
	}
	if n := d2.reg.Current().Len(catalog.Filter{}); n != stored {
		t.Fatalf("served %d skills after the restart, want the %d stored", n, stored)
	}
	free()
	d2.run(t)
	testkit.WaitUntil(t, "the resync after the restart", func() bool {
		st := d2.state()
		return !st.Stale && st.Skills == 305 && st.PersistError == "" && st.PersistFailures == 0
	})

	// Full again: a persist fails, and once space returns the retry
	// stores it without any sync.
	free = fulldisk.Fill(t, mnt)
	addSkills(t, root, 305, 600)
	d2.reg.RequestSync("local", catalog.TriggerManual)
	testkit.WaitUntil(t, "a sync of 905 skills whose persist fails", func() bool {
		st := d2.state()
		return st.Skills == 905 && st.PersistFailures > 0 && d2.reg.Current().Len(catalog.Filter{}) == 905
	})
	failed := d2.state()
	free()
	testkit.WaitUntil(t, "the persist retry", func() bool { return d2.state().PersistError == "" })
	// Only the retry can have stored it: a sync since (the directory
	// watcher's) found nothing new, and an unchanged sync stores nothing.
	if st := d2.state(); st.PersistFailures != 0 || !st.NextPersist.IsZero() || st.LastEnd != failed.LastEnd && st.LastResult != "unchanged" {
		t.Fatalf("after the retry: %+v (the failure is still shown, or a sync stored it)", st)
	}
	d2.stop()
	d3 := openRegistry(t, dbPath, src)
	if st := d3.state(); st.Stale || st.Skills != 905 || len(d3.report.Restored) != 1 {
		t.Fatalf("after the retried persist a restart restored %+v with state %+v, want 905 skills, not stale", d3.report, st)
	}
	if n := d3.reg.Current().Len(catalog.Filter{}); n != 905 {
		t.Fatalf("served %d after the restart, want 905", n)
	}
	if err := d3.st.Check(); err != nil {
		t.Fatal(err)
	}
	d3.stop()
}

type testDaemon struct {
	st     *store.Store
	reg    *registry.Registry
	report registry.RestoreReport
	cancel context.CancelFunc
	done   chan error
}

// openRegistry opens the store and restores its catalog, as a restart
// does, without running syncs yet.
func openRegistry(t *testing.T, dbPath string, src catalog.Source) *testDaemon {
	t.Helper()
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := registry.New(registry.Options{Store: st, Logger: log})
	reg.SetSources([]catalog.Source{src})
	d := &testDaemon{st: st, reg: reg}
	if d.report, err = reg.Restore(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

func startRegistry(t *testing.T, dbPath string, src catalog.Source) *testDaemon {
	d := openRegistry(t, dbPath, src)
	d.run(t)
	return d
}

func (d *testDaemon) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan error, 1)
	go func() { d.done <- d.reg.Run(ctx) }()
}

func (d *testDaemon) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
	if d.st != nil {
		d.st.Close()
		d.st = nil
	}
}

func (d *testDaemon) state() catalog.State {
	for _, st := range d.reg.States() {
		if st.Source == "local" {
			return st
		}
	}
	return catalog.State{}
}

// addSkills writes skills from..from+n-1 with records large enough that
// 300 of them do not fit in what is left of the file system: the store
// keeps no bodies, so the size is in the frontmatter (a long metadata
// value, which a record holds twice: as JSON and as the map).
func addSkills(t *testing.T, root string, from, n int) {
	t.Helper()
	// Written aside, then renamed in: the directory watcher sees n
	// renames within a few milliseconds (one or two rescans), not n
	// skills being written one by one (a rescan each 20 ms, each
	// persisting or failing on its own).
	stage := t.TempDir()
	notes := strings.Repeat("Words that take space in the store. ", 300)
	for i := from; i < from+n; i++ {
		name := fmt.Sprintf("skill-%04d", i)
		dir := filepath.Join(stage, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := "---\nname: " + name + "\ndescription: Skill " + name + ".\nmetadata:\n  notes: " + notes + "\n---\n# " + name + "\n"
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < from+n; i++ {
		name := fmt.Sprintf("skill-%04d", i)
		if err := os.Rename(filepath.Join(stage, name), filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
