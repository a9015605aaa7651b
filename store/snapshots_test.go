package store

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/skill"
)

// The store is a registry.Store.
var _ registry.Store = (*Store)(nil)

func TestSnapshotRoundTrip(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := edgeSnapshot(t, "edge", "c1", nil)
	st := stateOf(snap)
	st.LastError, st.LastErrorAt, st.Failures = "earlier failure", when.Add(-time.Hour), 2
	// A sealed snapshot, as the registry hands it over.
	sealed := catalog.NewSnapshot(snap, nil)
	if err := s.SaveSnapshot(sealed, st); err != nil {
		t.Fatal(err)
	}
	empty := &catalog.Snapshot{Source: "empty", Kind: catalog.KindDir, IndexedAt: when.In(time.FixedZone("X", 3600))}
	if err := s.SaveSnapshot(empty, catalog.State{Source: "empty", Kind: catalog.KindDir}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"same process", "after reopening"} {
		if name == "after reopening" {
			s = reopen(t, s)
		}
		t.Run(name, func(t *testing.T) {
			ps, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 2 || ps[0].State.Source != "edge" || ps[1].State.Source != "empty" {
				t.Fatalf("loaded %d sources, want edge then empty: %+v", len(ps), ps)
			}
			sameSnapshot(t, ps[0].Snapshot, snap)
			if !reflect.DeepEqual(ps[0].State, st) {
				t.Fatalf("state: got %+v, want %+v", ps[0].State, st)
			}
			if got := ps[1].Snapshot; got == nil || got.Skills != nil || !got.IndexedAt.Equal(empty.IndexedAt) {
				t.Fatalf("empty snapshot came back as %+v", got)
			}
			// The registry can seal what Load returns.
			resealed := catalog.NewSnapshot(ps[0].Snapshot, nil)
			cat := catalog.NewCatalog(1, when, []*catalog.Snapshot{resealed})
			if _, err := cat.Skill(catalog.Filter{}, "skill://edge/alpha/beta/SKILL.md"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadCopiesOutOfTheTransaction(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := edgeSnapshot(t, "edge", "c1", nil)
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	got := load(t, s)["edge"].Snapshot
	// Rewrite every page the snapshot lived on, then close the file: the
	// loaded values must not change (or fault).
	if err := s.DeleteSource("edge"); err != nil {
		t.Fatal(err)
	}
	other := edgeSnapshot(t, "edge", "c2", fstest.MapFS{"zeta/SKILL.md": skillMD("zeta")})
	if err := s.SaveSnapshot(other, stateOf(other)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, got, snap)
}

func TestSaveStateKeepsSnapshot(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := edgeSnapshot(t, "edge", "c1", nil)
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	failed := stateOf(snap)
	failed.LastResult, failed.LastError, failed.LastErrorAt, failed.Failures = "failed", "fetch: connection refused", when.Add(time.Minute), 1
	if err := s.SaveState(failed); err != nil {
		t.Fatal(err)
	}
	// A source that never indexed has a state and no snapshot.
	never := catalog.State{Source: "never", Kind: catalog.KindGit, Ref: "tag:v1", LastResult: "failed", Failures: 3}
	if err := s.SaveState(never); err != nil {
		t.Fatal(err)
	}
	got := load(t, reopen(t, s))
	sameSnapshot(t, got["edge"].Snapshot, snap)
	if !reflect.DeepEqual(got["edge"].State, failed) {
		t.Fatalf("state: got %+v, want %+v", got["edge"].State, failed)
	}
	if got["never"].Snapshot != nil || !reflect.DeepEqual(got["never"].State, never) {
		t.Fatalf("never-synced source came back as %+v", got["never"])
	}
}

func TestSaveSnapshotReplaces(t *testing.T) {
	s, _ := openTemp(t, Options{})
	v1 := edgeSnapshot(t, "edge", "c1", fstest.MapFS{"zeta/SKILL.md": skillMD("zeta")})
	if err := s.SaveSnapshot(v1, stateOf(v1)); err != nil {
		t.Fatal(err)
	}
	// v2 drops zeta, changes alpha and adds omega.
	v2 := edgeSnapshot(t, "edge", "c2", fstest.MapFS{
		"alpha/scripts/run.sh": {Data: []byte("#!/bin/sh\necho changed\n"), Mode: 0o755},
		"omega/SKILL.md":       skillMD("omega"),
	})
	if err := s.SaveSnapshot(v2, stateOf(v2)); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, load(t, reopen(t, s))["edge"].Snapshot, v2)
}

// A save knows which skills it stored last (the same values come back in
// the next snapshot of a source) or, after a restart or a failure, compares
// records; both ways must leave the same file.
func TestSaveSnapshotSequence(t *testing.T) {
	versions := []*catalog.Snapshot{
		edgeSnapshot(t, "edge", "c1", nil),
		edgeSnapshot(t, "edge", "c2", fstest.MapFS{"zeta/SKILL.md": skillMD("zeta")}),
		edgeSnapshot(t, "edge", "c3", fstest.MapFS{"alpha/beta/notes.txt": {Data: []byte("changed nested file")}}),
		{Source: "edge", Kind: catalog.KindGit, Commit: "c4", IndexedAt: when},
	}
	// Later versions reuse the values of earlier ones where unchanged, as
	// the indexer does.
	reuse := func(prev, next *catalog.Snapshot) {
		byPath := map[string]*skill.Skill{}
		for _, sk := range prev.Skills {
			byPath[sk.Path] = sk
		}
		for i, sk := range next.Skills {
			if old := byPath[sk.Path]; old != nil && reflect.DeepEqual(old, sk) {
				next.Skills[i] = old
			}
		}
	}
	for i := 1; i < len(versions); i++ {
		reuse(versions[i-1], versions[i])
	}
	for _, restartEvery := range []int{1, 2, 100} {
		s, _ := openTemp(t, Options{})
		for round := range 3 {
			for i, v := range append(versions, versions[0], versions[2]) {
				if (round*10+i)%restartEvery == 0 {
					s = reopen(t, s)
				}
				if err := s.SaveSnapshot(v, stateOf(v)); err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, load(t, s)["edge"].Snapshot, v)
				if got, want := digests(t, s), wantDigests(v); !reflect.DeepEqual(got, want) {
					t.Fatalf("restart every %d, version %s: digests\n got %v\nwant %v", restartEvery, v.Commit, got, want)
				}
			}
		}
	}
}

func TestSaveSnapshotRefusesMismatch(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := edgeSnapshot(t, "edge", "c1", nil)
	if err := s.SaveSnapshot(snap, catalog.State{Source: "other"}); err == nil {
		t.Fatal("saved a snapshot with another source's state")
	}
	dup := *snap
	dup.Skills = append(slices.Clone(snap.Skills), snap.Skills[0])
	if err := s.SaveSnapshot(&dup, stateOf(snap)); err == nil {
		t.Fatal("saved a snapshot with two skills at one path")
	}
	if got := load(t, s); len(got) != 0 {
		t.Fatalf("refused saves left %v", got)
	}
}

func TestDeleteSource(t *testing.T) {
	s, _ := openTemp(t, Options{})
	a, b := edgeSnapshot(t, "a", "c1", nil), edgeSnapshot(t, "b", "c1", nil)
	for _, snap := range []*catalog.Snapshot{a, b} {
		if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSource("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSource("unknown"); err != nil {
		t.Fatal(err)
	}
	got := load(t, reopen(t, s))
	if _, ok := got["a"]; ok || len(got) != 1 {
		t.Fatalf("after deleting a: %v", got)
	}
	sameSnapshot(t, got["b"].Snapshot, b)
}

// digests returns the store's digest map, checking it against a recount.
func digests(t *testing.T, s *Store) map[string]skill.Digest {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Digests()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDigestsFollowStoredSnapshots(t *testing.T) {
	s, _ := openTemp(t, Options{})
	if d := digests(t, s); len(d) != 0 {
		t.Fatalf("fresh store has digests %v", d)
	}
	// Two sources of the same files share keys (FSTree keys are paths and
	// sizes, so the root skills' names differ in length); nested skills
	// share files within one snapshot.
	a1 := edgeSnapshot(t, "a", "c1", fstest.MapFS{"zeta/SKILL.md": skillMD("zeta")})
	b := edgeSnapshot(t, "bb", "c1", nil)
	for _, snap := range []*catalog.Snapshot{a1, b} {
		if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := digests(t, s), wantDigests(a1, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("digests:\n got %v\nwant %v", got, want)
	}
	// a drops zeta and changes a file: the old keys only a referenced go.
	a2 := edgeSnapshot(t, "a", "c2", fstest.MapFS{"alpha/scripts/run.sh": {Data: []byte("#!/bin/sh\necho a longer script\n"), Mode: 0o755}})
	if err := s.SaveSnapshot(a2, stateOf(a2)); err != nil {
		t.Fatal(err)
	}
	got, want := digests(t, s), wantDigests(a2, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("digests after a changed:\n got %v\nwant %v", got, want)
	}
	for _, sk := range a1.Skills {
		if _, ok := got[sk.Files[0].Key]; sk.Path == "zeta" && ok {
			t.Fatal("zeta's key outlived every snapshot referencing it")
		}
	}
	// Saving the same snapshot again changes nothing.
	if err := s.SaveSnapshot(a2, stateOf(a2)); err != nil {
		t.Fatal(err)
	}
	if got := digests(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("digests after an unchanged save: %v", got)
	}
	if err := s.DeleteSource("bb"); err != nil {
		t.Fatal(err)
	}
	if got, want := digests(t, s), wantDigests(a2); !reflect.DeepEqual(got, want) {
		t.Fatalf("digests after deleting bb:\n got %v\nwant %v", got, want)
	}
	if err := s.DeleteSource("a"); err != nil {
		t.Fatal(err)
	}
	if got := digests(t, reopen(t, s)); len(got) != 0 {
		t.Fatalf("digests after deleting every source: %v", got)
	}
}

func TestConcurrentReadersWhileWriting(t *testing.T) {
	s, _ := openTemp(t, Options{})
	v := []*catalog.Snapshot{
		edgeSnapshot(t, "edge", "c0", nil),
		edgeSnapshot(t, "edge", "c1", fstest.MapFS{"zeta/SKILL.md": skillMD("zeta")}),
	}
	if err := s.SaveSnapshot(v[0], stateOf(v[0])); err != nil {
		t.Fatal(err)
	}
	const writes = 40
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done) // stops the readers
		for i := range writes {
			snap := v[i%2]
			if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
				errs <- err
				return
			}
			if err := s.RecordDelivery(Delivery{ID: "d", At: when}); err != nil {
				errs <- err
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ps, err := s.Load()
				if err != nil {
					errs <- err
					return
				}
				// Every read sees one whole snapshot, never a mix.
				got := exported(ps[0].Snapshot)
				w := v[0]
				if got.Commit == "c1" {
					w = v[1]
				}
				if !reflect.DeepEqual(got, exported(w)) {
					errs <- fmt.Errorf("read a snapshot that is neither version: commit %s", got.Commit)
					return
				}
				if _, err := s.Digests(); err != nil {
					errs <- err
					return
				}
				if _, err := s.RecentDeliveries(5); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A snapshot is stored with the skill rules it was judged by, which a
// restart compares with its own to skip judging it again; a snapshot
// stored before they were recorded (every schema fixture) has none, so
// a restart judges it.
func TestSnapshotsRecordTheirRules(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := corpusSnapshot(t, "src", 3)
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	if got := load(t, s)["src"].Rules; got != skill.StoredRules {
		t.Fatalf("a saved snapshot loads with rules %q, want %q", got, skill.StoredRules)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "schema-v*.db"))
	if err != nil || len(files) == 0 {
		t.Fatal("no schema fixtures", err)
	}
	for _, f := range files {
		path := filepath.Join(t.TempDir(), FileName)
		copyFile(t, f, path)
		old, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ps, err := old.Load()
		old.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Snapshot != nil && p.Rules != "" {
				t.Fatalf("%s: source %s loads with rules %q, recorded before there were any", f, p.State.Source, p.Rules)
			}
		}
		// Judged again by a restart, a snapshot is stamped: the next one
		// loads it, the same, under today's rules.
		old, err = Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if err := old.StampRules(p.State.Source, skill.StoredRules); err != nil {
				t.Fatal(err)
			}
		}
		again := load(t, old)
		old.Close()
		for _, p := range ps {
			got := again[p.State.Source]
			if p.Snapshot == nil {
				if got.Snapshot != nil {
					t.Fatalf("%s: stamping %s made a snapshot", f, p.State.Source)
				}
				continue
			}
			if got.Rules != skill.StoredRules {
				t.Fatalf("%s: source %s loads with rules %q after the stamp", f, p.State.Source, got.Rules)
			}
			sameSnapshot(t, got.Snapshot, p.Snapshot)
		}
	}
}
