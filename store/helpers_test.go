package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/skill"
)

// openTemp opens a fresh store in a temporary directory.
func openTemp(t testing.TB, o Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// reopen closes s and opens its file again.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(s.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

var when = time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)

// skillMD is a SKILL.md with frontmatter lines after name and description.
func skillMD(name string, extra ...string) *fstest.MapFile {
	fm := "---\nname: " + name + "\ndescription: Use " + name + " for <b>tests</b> & more.\n"
	for _, e := range extra {
		fm += e + "\n"
	}
	return &fstest.MapFile{Data: []byte(fm + "---\n# " + name + "\n\nBody of " + name + " ✓\n")}
}

// edgeSnapshot indexes, with the real indexer, a source with a root skill,
// nested skills, an executable, every frontmatter field and an excluded
// skill, then varies file keys the way other trees set them.
func edgeSnapshot(t testing.TB, source, commit string, extra fstest.MapFS) *catalog.Snapshot {
	t.Helper()
	fsys := fstest.MapFS{
		"SKILL.md":                 skillMD(source),
		"README.md":                {Data: []byte("not a skill")},
		"alpha/SKILL.md":           skillMD("alpha", "license: MIT", "compatibility: any agent", "allowed-tools: Bash(git:*)", "metadata:\n  version: \"2.1.0\"\n  owner: team", "tags: [git, review]"),
		"alpha/scripts/run.sh":     {Data: []byte("#!/bin/sh\necho run\n"), Mode: 0o755},
		"alpha/references/a/b.md":  {Data: []byte("deep reference")},
		"alpha/beta/SKILL.md":      skillMD("beta", "deprecated: true", "tags: []"),
		"alpha/beta/notes.txt":     {Data: []byte("nested")},
		"gamma/SKILL.md":           skillMD("gamma", "metadata: {}"),
		"mismatch/SKILL.md":        skillMD("other"),
		"mismatch/references/x.md": {Data: []byte("x")},
	}
	for k, v := range extra {
		fsys[k] = v
	}
	res, err := skill.Index(context.Background(), skill.FSTree{FS: fsys}, skill.Options{RootName: source})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Excluded) == 0 || len(res.Skills) < 4 {
		t.Fatalf("edge corpus: %d skills, %d excluded", len(res.Skills), len(res.Excluded))
	}
	for _, sk := range res.Skills {
		switch sk.Path {
		case "gamma":
			sk.Files[0].Key = "" // a file never cached
		case "":
			sk.Files[0].Key = sk.Files[0].ID // git trees key blobs by their id
		}
	}
	return &catalog.Snapshot{
		Source: source, Kind: catalog.KindGit, Repository: "https://example.test/" + source + ".git",
		Ref: "branch:main", Commit: commit, Path: "skills",
		Skills: res.Skills, Excluded: res.Excluded, Stats: res.Stats, IndexedAt: when,
	}
}

// corpusSnapshot indexes n generated skills in a directory.
func corpusSnapshot(t testing.TB, source string, n int) *catalog.Snapshot {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := corpus.Write(dir, corpus.Options{Skills: n}); err != nil {
		t.Fatal(err)
	}
	res, err := skill.Index(context.Background(), skill.DirTree{Root: dir}, skill.Options{RootName: source})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skills) != n {
		t.Fatalf("corpus: %d skills, want %d (excluded %v)", len(res.Skills), n, res.Excluded)
	}
	return &catalog.Snapshot{Source: source, Kind: catalog.KindDir, Skills: res.Skills, Stats: res.Stats, IndexedAt: when}
}

func stateOf(snap *catalog.Snapshot) catalog.State {
	return catalog.State{
		Source: snap.Source, Kind: snap.Kind, Repository: snap.Repository, Ref: snap.Ref, Commit: snap.Commit,
		Skills: len(snap.Skills), Excluded: len(snap.Excluded), LastStart: when.Add(-time.Second), LastEnd: when,
		LastResult: "updated", LastSuccess: when, Attempted: true,
	}
}

// exported copies a snapshot's exported fields (a sealed snapshot also
// holds its tree and lookups).
func exported(s *catalog.Snapshot) catalog.Snapshot {
	return catalog.Snapshot{
		Source: s.Source, Kind: s.Kind, Repository: s.Repository, Ref: s.Ref, Commit: s.Commit, Path: s.Path,
		Tag: s.Tag, Signature: s.Signature,
		Skills: s.Skills, Excluded: s.Excluded, Stats: s.Stats, IndexedAt: s.IndexedAt,
	}
}

func load(t testing.TB, s *Store) map[string]catalog.Persisted {
	t.Helper()
	ps, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]catalog.Persisted{}
	for _, p := range ps {
		out[p.State.Source] = p
	}
	return out
}

func sameSnapshot(t testing.TB, got, want *catalog.Snapshot) {
	t.Helper()
	if got == nil || want == nil {
		if got != want {
			t.Fatalf("snapshot: got %v, want %v", got, want)
		}
		return
	}
	g, w := exported(got), exported(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("snapshot differs after a round trip:\n got %+v\nwant %+v", g, w)
	}
	for i := range w.Skills {
		if string(g.Skills[i].Frontmatter.JSON) != string(w.Skills[i].Frontmatter.JSON) {
			t.Fatalf("frontmatter JSON of %q: got %s, want %s", w.Skills[i].Path, g.Skills[i].Frontmatter.JSON, w.Skills[i].Frontmatter.JSON)
		}
	}
}

// wantDigests is the digest map a set of stored snapshots implies: the
// file keys of its git snapshots.
func wantDigests(snaps ...*catalog.Snapshot) map[string]skill.Digest {
	out := map[string]skill.Digest{}
	for _, s := range snaps {
		if s.Kind != catalog.KindGit {
			continue
		}
		for _, sk := range s.Skills {
			for _, f := range sk.Files {
				if f.Key != "" {
					out[f.Key] = skill.Digest{Digest: f.Digest, Size: f.Size}
				}
			}
		}
	}
	return out
}

func mustCorrupt(t testing.TB, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want an error wrapping ErrCorrupt", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, path) || !strings.Contains(msg, "skillreg store rebuild") {
		t.Fatalf("error %q should name %s and say to run `skillreg store rebuild`", msg, path)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func digestOf(d skill.Sum, size int64) skill.Digest { return skill.Digest{Digest: d, Size: size} }
