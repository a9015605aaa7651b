package store

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/skill"
)

var update = flag.Bool("update", false, "write testdata/schema-v<SchemaVersion>.db from fixtureData")

// fixture is what every testdata/schema-v*.db holds, written through the
// API of the schema version it is named after.
type fixture struct {
	persisted  []catalog.Persisted
	releases   map[string]releases.Cached
	deliveries []Delivery // oldest first
}

// fixtureData describes the content of the schema fixtures. It is written
// out by hand, not produced by the indexer, so that it does not drift when
// the indexer changes. When a schema version changes what is stored,
// leave the old fixtures alone and change this to what they load as after
// migration.
func fixtureData() fixture {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	file := func(path, hex string, size int64, id, key string, exec bool) skill.File {
		sum, err := skill.ParseSum("sha256:" + hex)
		if err != nil {
			panic(err)
		}
		return skill.File{Path: path, Size: size, Digest: sum, Exec: exec, ID: id, Key: key}
	}
	h := func(c byte) string { return string(slices.Repeat([]byte{c}, 64)) }
	root := &skill.Skill{
		Path: "",
		Frontmatter: &skill.Frontmatter{
			JSON: json.RawMessage(`{"name":"team","description":"The team's <root> skill & more."}`),
			Name: "team", Description: "The team's <root> skill & more.",
		},
		Files: []skill.File{file("SKILL.md", h('a'), 90, "b1", "b1", false)},
		Size:  90,
	}
	review := &skill.Skill{
		Path: "tools/review",
		Frontmatter: &skill.Frontmatter{
			JSON:          json.RawMessage(`{"name":"review","description":"Review code.","license":"MIT","compatibility":"any","allowed-tools":"Bash(git:*)","metadata":{"version":"1.2.0","owner":"me"},"tags":["git","review"]}`),
			Name:          "review",
			Description:   "Review code.",
			Compatibility: "any",
			Metadata:      skill.Metadata{{Key: "owner", Value: "me"}, {Key: "version", Value: "1.2.0"}},
			Version:       "1.2.0",
			Tags:          []string{"git", "review"},
		},
		Files: []skill.File{
			file("SKILL.md", h('b'), 200, "b2", "b2", false),
			file("lint/SKILL.md", h('c'), 80, "b3", "b3", false),
			file("scripts/run.sh", h('d'), 30, "b4", "b4", true),
		},
		Dirs: []string{"lint", "scripts"},
		Size: 310,
	}
	lint := &skill.Skill{
		Path: "tools/review/lint",
		Frontmatter: &skill.Frontmatter{
			JSON: json.RawMessage(`{"name":"lint","description":"Lint.","deprecated":true,"tags":[],"metadata":{}}`),
			Name: "lint", Description: "Lint.", Deprecated: true, Tags: []string{}, Metadata: skill.Metadata{},
		},
		Files: []skill.File{file("SKILL.md", h('c'), 80, "b3", "b3", false)},
		Size:  80,
	}
	local := &skill.Skill{
		Path: "notes",
		Frontmatter: &skill.Frontmatter{
			JSON: json.RawMessage(`{"name":"notes","description":"Notes."}`),
			Name: "notes", Description: "Notes.",
		},
		Files: []skill.File{file("SKILL.md", h('e'), 50, "notes/SKILL.md", "", false)},
		Size:  50,
	}
	git := &catalog.Snapshot{
		Source: "team", Kind: catalog.KindGit, Repository: "https://example.test/team/skills.git",
		Ref: "branch:main", Commit: "0123456789abcdef0123456789abcdef01234567", Path: "skills",
		Skills: []*skill.Skill{root, review, lint},
		Excluded: []skill.Exclusion{{Path: "broken", File: "broken/SKILL.md", Problem: skill.Problem{
			Rule: skill.RuleNameMismatch, Detail: `name "x" differs from the skill's directory name "broken"`,
		}}},
		Stats:     skill.Stats{Skills: 3, Excluded: 1, Files: 4, Bytes: 400, Hashed: 4, Duration: 1500 * time.Microsecond},
		IndexedAt: at,
	}
	dir := &catalog.Snapshot{
		Source: "local", Kind: catalog.KindDir, Skills: []*skill.Skill{local},
		Stats: skill.Stats{Skills: 1, Files: 1, Bytes: 50, Hashed: 1}, IndexedAt: at.Add(time.Minute),
	}
	return fixture{
		persisted: []catalog.Persisted{
			{Snapshot: dir, State: catalog.State{Source: "local", Kind: catalog.KindDir, Skills: 1, LastStart: at, LastEnd: at, LastResult: "updated", LastSuccess: at, Attempted: true}},
			{State: catalog.State{Source: "pending", Kind: catalog.KindGit, Repository: "https://example.test/p.git", Ref: "tag:v1", LastResult: "failed", LastError: "fetch: refused", LastErrorAt: at, Failures: 4, NextRetry: at.Add(time.Minute)}},
			{Snapshot: git, State: catalog.State{Source: "team", Kind: catalog.KindGit, Repository: git.Repository, Ref: git.Ref, Commit: git.Commit, Skills: 3, Excluded: 1, LastStart: at, LastEnd: at, LastResult: "updated", LastSuccess: at, Attempted: true}},
		},
		releases: map[string]releases.Cached{
			"team/skills": {Tag: "v1.2.0", HTMLURL: "https://github.com/team/skills/releases/tag/v1.2.0", PublishedAt: at, ETag: `"e1"`, FetchedAt: at},
			"team/none":   {FetchedAt: at},
		},
		deliveries: []Delivery{
			{ID: "d1", Event: "push", Repo: "team/skills", At: at, Outcome: "accepted", Sources: []string{"team"}},
			{ID: "d2", Event: "release", Action: "published", Repo: "team/skills", At: at.Add(time.Second), Outcome: "accepted", Sources: []string{"team"}},
			{ID: "d1", Event: "push", Repo: "team/skills", At: at.Add(2 * time.Second), Outcome: "accepted", Redelivery: true, Sources: []string{"team"}},
		},
	}
}

func writeFixture(t *testing.T, path string) {
	t.Helper()
	// Written beside, then copied by Backup: only the pages in use, not
	// the room bbolt grows the file by ahead of them.
	full := filepath.Join(t.TempDir(), FileName)
	defer func() {
		b, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		s, err := Open(full, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Backup(b); err != nil {
			t.Fatal(err)
		}
	}()
	s, err := Open(full, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := fixtureData()
	for _, p := range f.persisted {
		if p.Snapshot != nil {
			err = s.SaveSnapshot(p.Snapshot, p.State)
		} else {
			err = s.SaveState(p.State)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for repo, c := range f.releases {
		if err := s.SaveRelease(repo, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range f.deliveries {
		if err := s.RecordDelivery(d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSchemaFixtures opens a copy of the fixture of every released schema
// version: each must migrate to the current one and load what it holds.
func TestSchemaFixtures(t *testing.T) {
	current := filepath.Join("testdata", fmt.Sprintf("schema-v%d.db", SchemaVersion))
	if *update {
		writeFixture(t, current)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "schema-v*.db"))
	if err != nil {
		t.Fatal(err)
	}
	versions := map[int]string{}
	for _, f := range files {
		m := regexp.MustCompile(`schema-v(\d+)\.db$`).FindStringSubmatch(f)
		v, _ := strconv.Atoi(m[1])
		versions[v] = f
	}
	for v := 1; v <= SchemaVersion; v++ {
		if versions[v] == "" {
			t.Errorf("no fixture of schema version %d: run go test -run TestSchemaFixtures -update with that version", v)
		}
	}
	want := fixtureData()
	for v, f := range versions {
		t.Run(filepath.Base(f), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			copyFile(t, f, path)
			if v < SchemaVersion {
				if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, ErrSchemaTooOld) {
					t.Fatalf("read-only open of an old schema: %v", err)
				}
			}
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var ver int
			err = s.db.View(func(tx *bolt.Tx) error {
				ver, _, err = readVersion(tx)
				return err
			})
			if err != nil || ver != SchemaVersion {
				t.Fatalf("schema version after open: %d (%v), want %d", ver, err, SchemaVersion)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want.persisted) {
				t.Fatalf("loaded %d sources, want %d", len(got), len(want.persisted))
			}
			for i, p := range want.persisted {
				sameSnapshot(t, got[i].Snapshot, p.Snapshot)
				if !reflect.DeepEqual(got[i].State, p.State) {
					t.Fatalf("state of %s:\n got %+v\nwant %+v", p.State.Source, got[i].State, p.State)
				}
			}
			var snaps []*catalog.Snapshot
			for _, p := range want.persisted {
				if p.Snapshot != nil {
					snaps = append(snaps, p.Snapshot)
				}
			}
			if d, err := s.Digests(); err != nil || !reflect.DeepEqual(d, wantDigests(snaps...)) {
				t.Fatalf("digests: %v (%v), want %v", d, err, wantDigests(snaps...))
			}
			for repo, c := range want.releases {
				if got, ok, err := s.LoadRelease(repo); err != nil || !ok || !reflect.DeepEqual(got, c) {
					t.Fatalf("release of %s: %+v ok=%v err=%v", repo, got, ok, err)
				}
			}
			ds, err := s.RecentDeliveries(0)
			if err != nil {
				t.Fatal(err)
			}
			slices.Reverse(ds)
			if !reflect.DeepEqual(ds, want.deliveries) {
				t.Fatalf("deliveries:\n got %+v\nwant %+v", ds, want.deliveries)
			}
		})
	}
}
