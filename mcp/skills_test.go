package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/mcp/fastpath"
	"github.com/skillreg/skillreg/skill"
)

// frontmatters are the shapes the wire encoding must render exactly as an
// Entry does.
var frontmatters = []string{
	"name: %s\ndescription: Plain.\n",
	"name: %s\ndescription: \"<b>&amp;</b> \\u2028 line \\u2029 sep\"\nlicense: MIT\n",
	"name: %s\ndescription: d\nmetadata:\n  version: \"1.0\"\n  tags: a, b\n",
	"name: %s\ndescription: d\nx-extra: [1, 2.5, true, null, \"yes\", -0, 9007199254740991, 1.0, 0.1]\n",
	"name: %s\ndescription: d\nnested: {a: {b: [x, {c: 1}]}, e: [], f: {}}\n",
	"name: %s\ndescription: d\n\"key with spaces\": v\n\"-\": dash\n\"a,b\": comma\n\"é\": accent\n",
	"name: %s\ndescription: d\n\"\": empty key\n\"q\\\"uote\": q\n\"back\\\\slash\": b\n",
	"name: %s\ndescription: Ünïcödé — “quotes” 😀\nallowed-tools: Bash(git:*) Read\n",
	"name: %s\ndescription: d\nopt: ~\nflag: false\nbig: 123456789012\nneg: -42\nf: 3.14159\n",
	"name: %s\ndescription: |\n  line one\n  line two\n",
}

func testSnapshot(t testing.TB, source, prefix string) *catalog.Snapshot {
	t.Helper()
	var skills []*skill.Skill
	for i, f := range frontmatters {
		name := fmt.Sprintf("skill-%d", i)
		fm, _, err := skill.ParseSkillMD([]byte("---\n" + fmt.Sprintf(f, name) + "---\nbody\n"))
		if err != nil {
			t.Fatalf("frontmatter %d: %v", i, err)
		}
		dir := "group/" + name
		if i%3 == 0 {
			dir = "odd dir/" + name // needs escaping
		}
		skills = append(skills, &skill.Skill{Path: dir, Frontmatter: fm, Files: []skill.File{
			{Path: "SKILL.md", Size: 10, Digest: skill.Sum{0x10}},
			{Path: "scripts/run me.sh", Size: 3, Digest: skill.Sum{0x11}},
			{Path: "x.md", Size: 1, Digest: skill.Sum{0x12}},
		}})
	}
	return catalog.NewSnapshot(&catalog.Snapshot{Source: source, Kind: catalog.KindGit, Repository: "https://example.com/r.git", Commit: "abc", Path: prefix, Skills: skills, IndexedAt: time.Now()}, nil)
}

func encode(t testing.TB, v any, escapeHTML bool) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWireEntriesMatchEntries holds the result types the server writes to
// the exported ones clients decode: the same bytes, escaped or not.
func TestWireEntriesMatchEntries(t *testing.T) {
	for _, prefix := range []string{"", "skills/sub"} {
		snap := testSnapshot(t, "acme", prefix)
		cat := catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{snap})
		refs := cat.All(catalog.Filter{})
		ttl := int64(30000)
		hints := CacheHints{ResultType: "complete", TTLMs: &ttl, CacheScope: "public"}
		for round := range 2 { // the second round reads the render cache
			want := &ListSkillsResult{CacheHints: hints, NextCursor: "c"}
			got := &listSkillsWire{CacheHints: hints, NextCursor: "c"}
			var wire []fastpath.WireEntry
			for _, r := range refs {
				want.Skills = append(want.Skills, NewEntry(r, true))
				wire = append(wire, fastpath.Wire(r, true))
				if _, raw := wire[len(wire)-1].Frontmatter.(json.RawMessage); raw && round == 0 {
					t.Logf("%s: frontmatter kept as raw JSON: %s", r.URI(), r.Skill.Frontmatter.JSON)
				}
			}
			got.Skills = wire
			want.Meta = map[string]any{"k": "v"}
			got.Meta = map[string]any{"k": "v"}
			for _, esc := range []bool{false, true} {
				if w, g := encode(t, want, esc), encode(t, got, esc); !bytes.Equal(w, g) {
					t.Fatalf("prefix %q, escapeHTML %v: wire encoding differs\nwant %s\ngot  %s", prefix, esc, w, g)
				}
			}
			one := encode(t, &GetSkillResult{CacheHints: hints, Skill: NewEntry(refs[1], true)}, false)
			if g := encode(t, &getSkillWire{CacheHints: hints, Skill: fastpath.Wire(refs[1], true)}, false); !bytes.Equal(one, g) {
				t.Fatalf("skills/get differs\nwant %s\ngot  %s", one, g)
			}
		}
	}
}

// TestNewEntryOwnsResources checks that an Entry can be changed without
// changing what later answers serve.
func TestNewEntryOwnsResources(t *testing.T) {
	snap := testSnapshot(t, "acme", "")
	ref := catalog.Ref{Snap: snap, Skill: snap.Skills[0]}
	e := NewEntry(ref, true)
	e.Resources[0].URI = "changed"
	if NewEntry(ref, true).Resources[0].URI == "changed" || fastpath.Wire(ref, true).Resources[0].URI == "changed" {
		t.Fatal("changing an entry changed the render cache")
	}
}

// TestRenderCacheFollowsSource checks that a skill served under another
// source name gets URIs of that name.
func TestRenderCacheFollowsSource(t *testing.T) {
	a := testSnapshot(t, "one", "")
	b := catalog.NewSnapshot(&catalog.Snapshot{Source: "two", Skills: a.Skills}, nil)
	sk := a.Skills[0]
	for _, s := range []*catalog.Snapshot{a, b, a} {
		want := catalog.FileURI(s.Source, sk.Path+"/SKILL.md")
		if u := fastpath.Wire(catalog.Ref{Snap: s, Skill: sk}, true).URI; u != want {
			t.Fatalf("uri = %s, want %s", u, want)
		}
	}
}

func BenchmarkListPageEncode(b *testing.B) {
	var skills []*skill.Skill
	for i := range 200 {
		name := fmt.Sprintf("skill-%05d", i)
		fm, _, err := skill.ParseSkillMD([]byte("---\nname: " + name + "\ndescription: Use when you need test commit webhook error backup golang restore api.\ntags: [merge, security]\nmetadata:\n  version: \"1.0.0\"\n---\nbody\n"))
		if err != nil {
			b.Fatal(err)
		}
		skills = append(skills, &skill.Skill{Path: "group-000/" + name, Frontmatter: fm, Files: []skill.File{
			{Path: "SKILL.md", Digest: mustSum("sha256:31340504debd1cc021b33eaad1637a4b25ca99bdc0b2e01281d06d6fed90c13e"), Size: 1300},
			{Path: "references/file-1.md", Digest: mustSum("sha256:276dcd08c075c04595186edc585c6675483310e895de8853619b06a36b0d77f0"), Size: 1608},
			{Path: "scripts/file-2.sh", Digest: mustSum("sha256:c16cf4c6d40d46ab6931b3c4b03648f7acb8c988b86b28b8902b6090c1889826"), Size: 1678},
		}})
	}
	snap := catalog.NewSnapshot(&catalog.Snapshot{Source: "bench", Kind: catalog.KindDir, Skills: skills}, nil)
	refs := catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{snap}).All(catalog.Filter{})
	ttl := int64(30000)
	hints := CacheHints{ResultType: "complete", TTLMs: &ttl, CacheScope: "public"}
	b.Run("entries", func(b *testing.B) {
		for b.Loop() {
			res := &ListSkillsResult{CacheHints: hints, Skills: make([]Entry, len(refs))}
			for i, r := range refs {
				res.Skills[i] = NewEntry(r, true)
			}
			b.SetBytes(int64(len(encode(b, res, false))))
		}
	})
	b.Run("wire", func(b *testing.B) {
		for b.Loop() {
			skills := make([]fastpath.WireEntry, len(refs))
			for i, r := range refs {
				skills[i] = fastpath.Wire(r, true)
			}
			res := &listSkillsWire{CacheHints: hints, Skills: skills}
			b.SetBytes(int64(len(encode(b, res, false))))
		}
	})
}

func mustSum(d string) skill.Sum {
	s, err := skill.ParseSum(d)
	if err != nil {
		panic(err)
	}
	return s
}
