package search_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/examples"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

var (
	corpusOnce   sync.Once
	corpusSkills []corpus.RealisticSkill
	corpusDocs   []search.Doc
)

// generated returns the quality corpus and its documents, built once.
func generated(t testing.TB) ([]corpus.RealisticSkill, []search.Doc) {
	corpusOnce.Do(func() {
		corpusSkills = corpus.Realistic(corpus.RealisticOptions{Skills: qualityCorpusSkills, Seed: qualityCorpusSeed})
		corpusDocs = docsFromFS(t, "generated", corpus.SkillsFS(corpusSkills))
	})
	return corpusSkills, corpusDocs
}

func top(t *testing.T, segs []*search.Segment, q string, o search.Options) []search.Hit {
	t.Helper()
	hits, err := search.Search(segs, q, o)
	if err != nil {
		t.Fatalf("Search(%q): %v", q, err)
	}
	return hits
}

func TestHyphenatedNames(t *testing.T) {
	segs := split(docsFromFS(t, "examples", examples.Skills), 1)
	for _, q := range []string{"go review", "code-review go", "gocodereview", "go-code-review", "GO Code Review"} {
		if hits := top(t, segs, q, search.Options{}); len(hits) == 0 || hits[0].Name != "go-code-review" {
			t.Errorf("Search(%q) = %v, want go-code-review first", q, names(hits))
		}
	}
}

func TestPrefixAndTypos(t *testing.T) {
	segs := []*search.Segment{search.BuildSegment([]search.Doc{
		{ID: "a", Name: "dbt-models", Description: "Incremental models in dbt."},
		{ID: "b", Name: "git-commits", Description: "Write a commit message."},
		{ID: "c", Name: "kubernetes-upgrade", Description: "Upgrade a cluster."},
	})}
	for q, want := range map[string]string{
		"increm":          "a", // prefix
		"comit":           "b", // deletion
		"mesage":          "b",
		"kuberentes":      "c", // transposition
		"kubrenetse":      "c", // two edits, long word
		"upgarde cluster": "c",
	} {
		hits := top(t, segs, q, search.Options{})
		if len(hits) == 0 || hits[0].ID != want {
			t.Errorf("Search(%q) = %v, want %s first", q, hits, want)
		}
	}
	// Short words get no typo tolerance: "gti" is not "git".
	if hits := top(t, segs, "gti", search.Options{}); len(hits) != 0 {
		t.Errorf("Search(gti) = %v, want nothing", hits)
	}
}

// TestSplitDoesNotChangeScores: the same documents in one segment or spread
// unevenly over several give exactly the same hits and scores.
func TestSplitDoesNotChangeScores(t *testing.T) {
	_, docs := generated(t)
	one := []*search.Segment{search.BuildSegment(docs)}
	// Uneven: by category directory, as sources would be.
	bySource := map[string][]search.Doc{}
	for _, d := range docs {
		cat := strings.Split(strings.TrimPrefix(d.ID, "skill://generated/"), "/")[0]
		bySource[cat] = append(bySource[cat], d)
	}
	var many []*search.Segment
	for _, cat := range slices.Sorted(func(yield func(string) bool) {
		for k := range bySource {
			if !yield(k) {
				return
			}
		}
	}) {
		many = append(many, search.BuildSegment(bySource[cat]))
	}
	if len(many) < 10 {
		t.Fatalf("only %d segments", len(many))
	}
	slices.Reverse(many) // order must not matter either
	queries := append([]string{"kafka", "terrafrom drift", "increm", "review", "the"}, func() []string {
		var q []string
		for _, c := range corpusQueries {
			q = append(q, c.query)
		}
		return q
	}()...)
	for _, q := range queries {
		o := search.Options{Limit: 50, IncludeDeprecated: true}
		a, b := top(t, one, q, o), top(t, many, q, o)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Search(%q): one segment and %d segments differ:\n%v\n%v", q, len(many), a, b)
		}
	}
}

func TestQueryLimits(t *testing.T) {
	segs := split(docsFromFS(t, "examples", examples.Skills), 2)
	long := strings.Repeat("commit ", search.MaxQueryBytes/7+1)
	if _, err := search.Search(segs, long, search.Options{}); !errors.Is(err, search.ErrQueryTooLong) {
		t.Errorf("query of %d bytes: err = %v, want ErrQueryTooLong", len(long), err)
	}
	if !strings.Contains(search.ErrQueryTooLong.Error(), "1024") {
		t.Errorf("error %q does not name the limit", search.ErrQueryTooLong)
	}
	exact := strings.Repeat("x", search.MaxQueryBytes-len("commit ")) + " commit"
	if hits, err := search.Search(segs, exact, search.Options{}); err != nil || len(hits) == 0 {
		t.Errorf("query of exactly %d bytes: %v, %v", len(exact), hits, err)
	}
	if _, err := search.Search(segs, "commit \xff", search.Options{}); !errors.Is(err, search.ErrQueryInvalid) {
		t.Errorf("invalid UTF-8: err = %v", err)
	}
	for _, q := range []string{"", "   ", "how do I", "?!"} {
		hits, err := search.Search(segs, q, search.Options{})
		if err != nil || hits == nil || len(hits) != 0 {
			t.Errorf("Search(%q) = %v, %v; want no hits (non-nil) and no error", q, hits, err)
		}
	}
	// Hundreds of distinct words: answered, bounded.
	var b strings.Builder
	for i := 0; b.Len() < search.MaxQueryBytes-10; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	if _, err := search.Search(segs, b.String()+"commit", search.Options{}); err != nil {
		t.Error(err)
	}
}

func TestFiltersAndLimit(t *testing.T) {
	var docs []search.Doc
	for i := range 150 {
		docs = append(docs, search.Doc{
			ID: fmt.Sprintf("skill://s/%03d/SKILL.md", i), Name: fmt.Sprintf("deploy-%03d", i),
			Description: "Deploy the service.", Tags: []string{"Ops", fmt.Sprintf("t%d", i%3)}, Deprecated: i%10 == 0,
		})
	}
	segs := split(docs, 3)
	if got := len(top(t, segs, "deploy", search.Options{})); got != search.DefaultLimit {
		t.Errorf("default limit: %d hits", got)
	}
	if got := len(top(t, segs, "deploy", search.Options{Limit: 1000})); got != search.MaxLimit {
		t.Errorf("limit 1000: %d hits, want %d", got, search.MaxLimit)
	}
	hits := top(t, segs, "deploy", search.Options{Limit: 100, Tag: " T1 "})
	if len(hits) != 45 { // 50 with tag t1, minus 5 deprecated
		t.Errorf("tag t1: %d hits, want 45", len(hits))
	}
	for _, h := range hits {
		var i int
		fmt.Sscanf(h.Name, "deploy-%d", &i)
		if i%3 != 1 || i%10 == 0 {
			t.Errorf("tag t1 returned %s", h.Name)
		}
	}
	all := top(t, segs, "deploy", search.Options{Limit: 100, IncludeDeprecated: true, Tag: "t0"})
	if len(all) != 50 {
		t.Errorf("tag t0 with deprecated: %d hits, want 50", len(all))
	}
	// Equal documents tie; ties go by ID.
	for i := 1; i < len(all); i++ {
		if all[i-1].Score != all[i].Score || all[i-1].ID >= all[i].ID {
			t.Fatalf("hits %d and %d: %v, %v: want equal scores in ID order", i-1, i, all[i-1], all[i])
		}
	}
}

func TestFieldsAndWeights(t *testing.T) {
	segs := []*search.Segment{search.BuildSegment([]search.Doc{
		{ID: "1", Name: "rotation", Body: "nothing else"},
		{ID: "2", Name: "x", Tags: []string{"rotation"}},
		{ID: "3", Name: "y", Description: "Key rotation."},
		{ID: "4", Name: "z", Body: "Rotation of keys, rotation of secrets."},
		{ID: "5", Name: "w", Metadata: map[string]string{"owner": "rotation team"}},
	})}
	hits := top(t, segs, "rotation", search.Options{})
	var order []string
	for _, h := range hits {
		order = append(order, h.ID)
	}
	if !slices.Equal(order, []string{"1", "2", "3", "4", "5"}) {
		t.Errorf("order %v, want name, tags, description, body, metadata", hits)
	}
	want := map[string][]string{"1": {"name"}, "2": {"tags"}, "3": {"description"}, "4": {"body"}, "5": {"metadata"}}
	for _, h := range hits {
		if !slices.Equal(h.Fields, want[h.ID]) {
			t.Errorf("hit %s fields %q, want %q", h.ID, h.Fields, want[h.ID])
		}
		if h.Score <= 0 {
			t.Errorf("hit %s score %v", h.ID, h.Score)
		}
	}
	segs = []*search.Segment{search.BuildSegment([]search.Doc{{ID: "a", Source: "src", Name: "webhook-rotation", Description: "Rotate the webhook secret.", Body: "Rotate it."}})}
	h := top(t, segs, "webhook secret rotation", search.Options{})
	if len(h) != 1 || h[0].Source != "src" || h[0].Name != "webhook-rotation" || !slices.Equal(h[0].Fields, []string{"name", "description", "body"}) {
		t.Errorf("hit %+v", h)
	}
}

func TestEmptyAndNilSegments(t *testing.T) {
	seg := search.BuildSegment([]search.Doc{{ID: "a", Name: "commit"}})
	for _, segs := range [][]*search.Segment{nil, {nil}, {search.BuildSegment(nil)}, {nil, seg, search.BuildSegment(nil)}} {
		hits, err := search.Search(segs, "commit", search.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want := slices.Contains(segs, seg); (len(hits) == 1) != want {
			t.Errorf("%d segments: %v", len(segs), hits)
		}
	}
	if seg.Len() != 1 || (*search.Segment)(nil).Len() != 0 {
		t.Error("Len")
	}
}

func TestConcurrentSearch(t *testing.T) {
	_, docs := generated(t)
	segs := split(docs, 5)
	queries := []string{"kafka consumer lag", "terrafrom drift", "increm", "review pull request", "pytorch gpu"}
	want := map[string][]search.Hit{}
	for _, q := range queries {
		want[q] = top(t, segs, q, search.Options{})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				q := queries[(g+i)%len(queries)]
				got, err := search.Search(segs, q, search.Options{})
				if err != nil || !reflect.DeepEqual(got, want[q]) {
					t.Errorf("concurrent Search(%q) differs: %v", q, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestFromSkill(t *testing.T) {
	fm, body, err := skill.ParseSkillMD([]byte("---\nname: demo\ndescription: A demo.\ncompatibility: needs bash\nmetadata:\n  author: team\n  version: \"1.0\"\n  tags: \"a, b\"\n  deprecated: \"true\"\n---\n# Body\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := search.FromSkill("skill://s/demo/SKILL.md", "s", &skill.Skill{Path: "demo", Frontmatter: fm}, string(body))
	if d.Name != "demo" || d.Description != "A demo." || !slices.Equal(d.Tags, []string{"a", "b"}) || !d.Deprecated || d.Body != "# Body\n" || d.Source != "s" {
		t.Errorf("doc %+v", d)
	}
	if !reflect.DeepEqual(d.Metadata, map[string]string{"author": "team", "compatibility": "needs bash"}) {
		t.Errorf("metadata %v", d.Metadata)
	}
}

func FuzzSearch(f *testing.F) {
	segs := split(docsFromFS(f, "examples", examples.Skills), 2)
	for _, q := range exampleQueries {
		f.Add(q.query, 3)
	}
	f.Add("ａｂｃ 日本語 ü-ß_x", 0)
	f.Fuzz(func(t *testing.T, q string, limit int) {
		hits, err := search.Search(segs, q, search.Options{Limit: limit})
		if err != nil {
			return
		}
		if len(hits) > search.MaxLimit || limit > 0 && len(hits) > limit {
			t.Fatalf("%d hits for limit %d", len(hits), limit)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i-1].Score < hits[i].Score || hits[i-1].Score == hits[i].Score && hits[i-1].ID >= hits[i].ID {
				t.Fatalf("hits out of order: %v", hits)
			}
		}
	})
}

// TestIndexGivesSameResults: the merged dictionary changes the cost of
// prefix and typo matching, never the results, whether it covers exactly
// the searched segments, more of them (a few more: the catalog's index of
// an older generation; many more: a caller who sees few sources), or
// fewer.
func TestIndexGivesSameResults(t *testing.T) {
	_, docs := generated(t)
	segs := split(docs, 12)
	all := search.NewIndex(segs)
	partial := search.NewIndex(segs[3:9])
	one := search.NewIndex(segs[:1])
	if all.Len() == 0 || partial.Len() >= all.Len() {
		t.Fatalf("index sizes: all %d, partial %d", all.Len(), partial.Len())
	}
	visible := []*search.Segment{segs[0], segs[4], segs[5], segs[11]}
	queries := []string{"kafka", "terrafrom drift", "increm", "kuberentes migraton", "gocodereview", "elasticsearh shard"}
	for _, q := range corpusQueries {
		queries = append(queries, q.query)
	}
	for _, q := range queries {
		o := search.Options{Limit: 30, IncludeDeprecated: true}
		for _, c := range []struct {
			name string
			segs []*search.Segment
			ix   *search.Index
		}{
			{"all segments, full index", segs, all},
			{"all segments, index of some", segs, partial},
			{"some segments, full index", visible, all},
			{"some segments twice, full index", append(slices.Clone(visible), visible...), all},
			{"some segments, index of others", visible, partial},
			{"most segments, index of them and a few more", segs[:10], all},
			{"one segment, its index", segs[:1], one},
		} {
			want := top(t, c.segs, q, o)
			o.Index = c.ix
			if got := top(t, c.segs, q, o); !reflect.DeepEqual(got, want) {
				t.Fatalf("Search(%q), %s: with the index\n%v\nwithout\n%v", q, c.name, got, want)
			}
			o.Index = nil
		}
	}
}

// TestLongQueryCommonWords: in a long query, words most skills contain only
// re-rank the skills its rarer words found; a long query of common words
// alone still answers.
func TestLongQueryCommonWords(t *testing.T) {
	common := "alpha bravo charlie delta echo foxtrot golf hotel india"
	var docs []search.Doc
	for i := range 20 {
		docs = append(docs, search.Doc{ID: fmt.Sprintf("d%02d", i), Name: fmt.Sprintf("doc-%02d", i), Body: common})
	}
	docs[7].Body += " zebra"
	segs := split(docs, 3)
	hits := top(t, segs, "zebra "+common, search.Options{Limit: 100})
	if len(hits) != 1 || hits[0].ID != "d07" {
		t.Errorf("long query with one rare word: %v, want only d07", hits)
	}
	if hits := top(t, segs, common, search.Options{Limit: 100}); len(hits) != 20 {
		t.Errorf("long query of common words: %d hits, want 20", len(hits))
	}
	// Short queries are not affected: common words alone still match.
	if hits := top(t, segs, "zebra alpha", search.Options{Limit: 100}); len(hits) != 20 || hits[0].ID != "d07" {
		t.Errorf("short query: %d hits, first %v", len(hits), hits[0])
	}
}
