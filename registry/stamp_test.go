package registry_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/skill"
	"github.com/skillreg/skillreg/store"
)

// TestRestoreStampsWhatItJudged: a stored catalog under other rules than
// today's (an older version's) is judged by the restore, and the store
// then records that it passed today's rules, so the next restart serves
// it without judging it again.
func TestRestoreStampsWhatItJudged(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{"a/SKILL.md": testkit.SkillMD("a"), "b/SKILL.md": testkit.SkillMD("b")})
	src := catalog.Source{Name: "local", Kind: catalog.KindDir, Dir: root}
	dbPath := filepath.Join(t.TempDir(), store.FileName)
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := registry.New(registry.Options{Store: st})
	r.SetSources([]catalog.Source{src})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	if err := st.StampRules("local", "paths-0"); err != nil { // as an older version stored it
		t.Fatal(err)
	}
	loaded := func() catalog.Persisted {
		ps, err := st.Load()
		if err != nil || len(ps) != 1 {
			t.Fatalf("load: %v, %d sources", err, len(ps))
		}
		return ps[0]
	}
	p := loaded()
	if p.Rules != "paths-0" {
		t.Fatalf("stored under rules %q, want paths-0", p.Rules)
	}
	r2 := registry.New(registry.Options{Store: st})
	r2.SetSources([]catalog.Source{src})
	rep, err := r2.Restore(context.Background(), []catalog.Persisted{p})
	if err != nil || len(rep.Restored) != 1 {
		t.Fatalf("restore: %+v, %v", rep, err)
	}
	if got := loaded().Rules; got != skill.StoredRules {
		t.Fatalf("after the restore judged it, the catalog is stored under rules %q, want %q", got, skill.StoredRules)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
