package publish

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/regtest"
	"github.com/skillreg/skillreg/proof"
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

// TestIndexesNameOnlyServedProofs: an entry's provenance names its skill's
// proof, in both discovery indexes and in the marketplace, only when MCP
// serves that proof (Options.Proofs: the registry MCP asks too), so that
// a client following it is never refused. A git source's skill whose
// proof would pass proof.MaxBytes (its directory sits in a root tree of
// 900 entries with 4,000-byte names) names none; a skill of a narrow
// tree names its own; without Proofs no entry names one.
func TestIndexesNameOnlyServedProofs(t *testing.T) {
	f := &fixture{t: t, reg: regtest.WideAndNarrow(t)}
	if _, err := f.reg.Proof(context.Background(), "wide", "x"); !errors.Is(err, proof.ErrTooLarge) {
		t.Fatalf("proof of x: %v, want it too large to serve", err)
	}

	for _, served := range []bool{true, false} {
		f.serve(func(o *Options) {
			o.BaseURL = func(r *http.Request) string { return RequestBaseURL(r, "https://skills.example.com", nil) }
			if served {
				o.Proofs = f.reg
			}
		})
		want := map[string]string{"x": "", "near": ""}
		if served {
			want["near"] = proof.URI("narrow", "near")
		}
		check := func(where string, got map[string]string) {
			t.Helper()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("proofs served %v: %s names proofs %v, want %v", served, where, got, want)
			}
		}
		for _, idx := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json"} {
			var doc struct {
				Skills []struct {
					Name       string             `json:"name"`
					Provenance catalog.Provenance `json:"dev.skillreg/provenance"`
				} `json:"skills"`
			}
			f.json(idx, &doc)
			got := map[string]string{}
			for _, e := range doc.Skills {
				got[e.Name] = e.Provenance.Proof
			}
			check(idx, got)
		}
		var mp struct {
			Plugins []struct {
				Name     string                        `json:"name"`
				Metadata map[string]catalog.Provenance `json:"metadata"`
			} `json:"plugins"`
		}
		f.json("/marketplace.json", &mp)
		got := map[string]string{}
		for _, p := range mp.Plugins {
			if !strings.HasSuffix(p.Name, "-all") {
				got[p.Name] = p.Metadata["dev.skillreg/provenance"].Proof
			}
		}
		check("the marketplace", got)
	}
}
