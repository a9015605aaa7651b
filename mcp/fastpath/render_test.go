package fastpath

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// oddSnapshot holds skills whose every string needs some care on the
// wire: quotes, backslashes, control characters, HTML characters,
// U+2028, non-ASCII, percent-encoded paths, frontmatter that is not
// compact or is empty.
func oddSnapshot(t testing.TB, repo, ref, commit string) *catalog.Snapshot {
	t.Helper()
	var skills []*skill.Skill
	for i, desc := range []string{`plain`, `"quoted" and \back\slashed`, "tab\tnew\nline\x01", `<b>&amp;</b>`, "line\u2028sep\u2029para", `café ✓ 日本`} {
		fm, _, err := skill.ParseSkillMD([]byte(fmt.Sprintf("---\nname: s%d\ndescription: %q\nmetadata:\n  num: \"%d\"\nx-list: [a, \"b c\", 3]\n---\nbody\n", i, desc, i)))
		if err != nil {
			t.Fatal(err)
		}
		skills = append(skills, &skill.Skill{Path: fmt.Sprintf("g/s%d", i), Frontmatter: fm, Files: []skill.File{
			{Path: "SKILL.md", Size: 10, Digest: skill.Sum{0x10}},
			{Path: "references/a b%.md", Size: 1 << 40, Digest: skill.Sum{0x11}},
			{Path: "scripts/é.sh", Size: 0, Digest: skill.Sum{0x12}, Exec: true},
		}})
	}
	loose, _, err := skill.ParseSkillMD([]byte("---\nname: loose\ndescription: d\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	loose.JSON = json.RawMessage("{ \"name\" : \"loose\",\n \"description\":\"a b\" }")
	skills = append(skills, &skill.Skill{Path: "g/loose", Frontmatter: loose, Files: []skill.File{{Path: "SKILL.md", Size: 1, Digest: skill.Sum{0x13}}}})
	skills = append(skills, &skill.Skill{Path: "g/empty \"q\"", Frontmatter: &skill.Frontmatter{}, Files: []skill.File{{Path: "SKILL.md", Size: 1, Digest: skill.Sum{0x14}}}})
	return catalog.NewSnapshot(&catalog.Snapshot{Source: "odd", Kind: catalog.KindGit, Repository: repo, Ref: ref, Commit: commit, Skills: skills, IndexedAt: time.Now()}, nil)
}

// TestAppendEntryMatchesWire holds the fast path's entry bytes to what
// encoding/json writes for the SDK's path (the mcp package holds that to
// its Entry), with and without the optional provenance members.
func TestAppendEntryMatchesWire(t *testing.T) {
	signed := oddSnapshot(t, "https://example.com/r.git", "refs/tags/v1", "abc")
	signed.Signature = &sigverify.Signature{Verified: true, Type: "ssh", Key: "SHA256:k+/=", Signer: "dev@example.com \"q\""}
	unsigned := oddSnapshot(t, "https://example.com/r.git", "refs/tags/v1", "abc")
	unsigned.Signature = &sigverify.Signature{}
	for _, snap := range []*catalog.Snapshot{
		oddSnapshot(t, "https://example.com/r.git", "refs/heads/main", "abc"),
		oddSnapshot(t, "", "", ""),
		signed, unsigned,
	} {
		for _, r := range catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{snap}).All(catalog.Filter{}) {
			for _, provable := range []bool{true, false} {
				got, err := entryBytes(r, provable)
				if err != nil {
					t.Fatal(err)
				}
				want, err := encodeJSON(Wire(r, provable))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s (provable %v): entry\n%s\nwant\n%s", r.URI(), provable, got, want)
				}
				raw := Wire(r, provable)
				raw.Frontmatter = json.RawMessage(r.Skill.Frontmatter.JSON)
				if rawWant, _ := encodeJSON(raw); !bytes.Equal(got, rawWant) {
					t.Errorf("%s (provable %v): entry\n%s\nwant (raw frontmatter)\n%s", r.URI(), provable, got, rawWant)
				}
				if named := bytes.Contains(got, []byte(`"proof":`)); named != (provable && snap.Commit != "") {
					t.Errorf("%s (provable %v): entry names a proof: %v\n%s", r.URI(), provable, named, got)
				}
			}
		}
	}
}

// FuzzAppendEntry checks appendEntry against encoding/json for any
// frontmatter JSON and path.
func FuzzAppendEntry(f *testing.F) {
	f.Add(`{"name":"a","description":"b"}`, "g/a", "main")
	f.Add("{ \"a\" :\n[1, 2] }", `p"q\r`, "\u2028")
	f.Add(`{"a":"\u003c\\\""}`, "é/ü", "")
	f.Fuzz(func(t *testing.T, fm, p, ref string) {
		if !json.Valid([]byte(fm)) {
			return
		}
		sk := &skill.Skill{Path: p, Frontmatter: &skill.Frontmatter{JSON: json.RawMessage(fm)}, Files: []skill.File{{Path: "SKILL.md", Size: 1, Digest: skill.SumOf([]byte(ref))}, {Path: p, Size: 2, Digest: skill.SumOf([]byte(p))}}}
		snap := catalog.NewSnapshot(&catalog.Snapshot{Source: "f", Kind: catalog.KindGit, Ref: ref, Skills: []*skill.Skill{sk}}, nil)
		r := catalog.Ref{Snap: snap, Skill: sk}
		got, err := entryBytes(r, true)
		if err != nil {
			t.Fatal(err)
		}
		e := Wire(r, true)
		e.Frontmatter = json.RawMessage(fm)
		want, err := encodeJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("entry\n%s\nwant\n%s", got, want)
		}
	})
}

// TestListingKeepsNothingPerSkill: a complete listing of a catalog
// larger than the page cache leaves no more than the page cache behind;
// once that is cleared (as after a swap), nothing per skill stays. A
// render cache keyed by skill used to keep each entry's URIs, resources,
// native frontmatter and bytes for as long as the skill was served.
func TestListingKeepsNothingPerSkill(t *testing.T) {
	const n = 4000
	cat := catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{testSnapshot(t, "mem", n)})
	h := New(pagedCatalog{oneCatalog{cat}}, Options{PageSize: 200})
	before := liveHeap()
	var out bytes.Buffer
	listed, cursor := 0, ""
	for {
		out.Reset()
		if !h.list(context.Background(), &out, cursor, true) {
			t.Fatal("page not rendered")
		}
		var page struct {
			Skills     []json.RawMessage `json:"skills"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(out.Bytes(), &page); err != nil {
			t.Fatalf("%v: %.200s", err, out.Bytes())
		}
		listed += len(page.Skills)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if listed != n {
		t.Fatalf("listed %d of %d skills", listed, n)
	}
	withPages := liveHeap() - before
	h.Clear()
	after := liveHeap() - before
	t.Logf("%d skills: %d bytes kept with the pages, %d after Clear", n, withPages, after)
	if withPages > maxPageBytes+64<<10 {
		t.Errorf("a listing kept %d bytes, more than the page cache's %d", withPages, maxPageBytes)
	}
	if per := after / n; per > 64 {
		t.Errorf("after Clear a listing still keeps %d bytes a skill", per)
	}
	runtime.KeepAlive(cat)
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// pagedCatalog is oneCatalog whose cursors continue a listing.
type pagedCatalog struct{ oneCatalog }

func (p pagedCatalog) Page(cursor string) (*catalog.Catalog, int, error) {
	if cursor == "" {
		return p.cat, 0, nil
	}
	c, err := catalog.DecodeCursor(cursor)
	return p.cat, c.Offset, err
}

// BenchmarkRenderPage renders a page of 200 entries from nothing cached,
// as every page past the page cache is.
func BenchmarkRenderPage(b *testing.B) {
	cat := catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{testSnapshot(b, "bench", 200)})
	h := New(oneCatalog{cat}, Options{PageSize: 200})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.renderPage(context.Background(), cat, catalog.Filter{}, 0); err != nil {
			b.Fatal(err)
		}
	}
}
