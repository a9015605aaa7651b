package publish

import (
	"net/http"

	"github.com/skillreg/skillreg/catalog"
	"testing"
)

// TestIndexesCarryProvenance: every entry of both discovery indexes and
// every one-skill plugin of the marketplace carries the skill's provenance
// as MCP's _meta states it (under "dev.skillreg/provenance", in metadata
// for plugins), and the per-source plugin, which is many skills, none.
func TestIndexesCarryProvenance(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) {
		o.BaseURL = func(r *http.Request) string { return RequestBaseURL(r, "https://skills.example.com", nil) }
	})
	want := map[string]string{} // name -> source/path, from the catalog
	for _, r := range f.reg.Current().All(catalog.Filter{}) {
		p := r.Snap.Provenance(r.Skill)
		want[r.Skill.Name()+"@"+r.Snap.Source] = p.Source + "/" + p.Path
	}
	check := func(where, name string, got map[string]any) {
		t.Helper()
		if got == nil {
			t.Errorf("%s %s: no provenance", where, name)
			return
		}
		key := name + "@" + got["source"].(string)
		path, _ := got["path"].(string)
		if w, ok := want[key]; !ok || w != got["source"].(string)+"/"+path {
			t.Errorf("%s %s: provenance %v, want %s", where, name, got, w)
		}
	}
	type entries struct {
		Skills []struct {
			Name       string         `json:"name"`
			Provenance map[string]any `json:"dev.skillreg/provenance"`
		} `json:"skills"`
	}
	for _, idx := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json"} {
		var doc entries
		f.json(idx, &doc)
		if len(doc.Skills) == 0 {
			t.Fatalf("%s: no skills", idx)
		}
		for _, e := range doc.Skills {
			check(idx, e.Name, e.Provenance)
		}
	}
	var mp struct {
		Plugins []struct {
			Name     string                    `json:"name"`
			Metadata map[string]map[string]any `json:"metadata"`
		} `json:"plugins"`
	}
	f.json("/marketplace.json", &mp)
	for _, p := range mp.Plugins {
		if p.Name == "team-all" || p.Name == "other-all" {
			if p.Metadata != nil {
				t.Errorf("%s: metadata %v on a plugin of many skills", p.Name, p.Metadata)
			}
			continue
		}
		check("marketplace", p.Name, p.Metadata["dev.skillreg/provenance"])
	}
}
