package search_test

import (
	"context"
	"io/fs"
	"path"
	"slices"
	"testing"

	"github.com/skillreg/skillreg/examples"
	"github.com/skillreg/skillreg/internal/fastmcp"
	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

// docsFromFS indexes a skills tree the way the registry does and returns
// its documents, with URIs like the registry's.
func docsFromFS(t testing.TB, source string, fsys fs.FS) []search.Doc {
	t.Helper()
	tree := skill.FSTree{FS: fsys}
	res, err := skill.Index(context.Background(), tree, skill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Excluded) > 0 {
		t.Fatalf("%d skills excluded: %+v", len(res.Excluded), res.Excluded[0])
	}
	docs := make([]search.Doc, 0, len(res.Skills))
	for _, sk := range res.Skills {
		body, err := skill.ReadBody(tree, sk)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, search.FromSkill("skill://"+source+"/"+path.Join(sk.Path, "SKILL.md"), source, sk, string(body)))
	}
	return docs
}

// split spreads docs over n segments, round robin.
func split(docs []search.Doc, n int) []*search.Segment {
	parts := make([][]search.Doc, n)
	for i, d := range docs {
		parts[i%n] = append(parts[i%n], d)
	}
	segs := make([]*search.Segment, n)
	for i, p := range parts {
		segs[i] = search.BuildSegment(p)
	}
	return segs
}

// quality runs queries and reports precision at 1 and the share with the
// wanted skill in the top 5.
func quality(t *testing.T, segs []*search.Segment, queries []qualityQuery, verbose bool) (p1, in5 float64) {
	t.Helper()
	var at1, top5 int
	for _, q := range queries {
		hits, err := search.Search(segs, q.query, search.Options{Limit: 5})
		if err != nil {
			t.Fatalf("Search(%q): %v", q.query, err)
		}
		rank := -1
		for i, h := range hits {
			if h.Name == q.want {
				rank = i
				break
			}
		}
		switch {
		case rank == 0:
			at1++
		case !verbose:
		case rank > 0:
			t.Logf("%-50q want %s at 1, got it at %d behind %s", q.query, q.want, rank+1, names(hits[:rank]))
		default:
			t.Logf("%-50q want %s, not in top 5: %s", q.query, q.want, names(hits))
		}
		if rank >= 0 {
			top5++
		}
	}
	return float64(at1) / float64(len(queries)), float64(top5) / float64(len(queries))
}

// peerQuality is quality for the FastMCP scoring.
func peerQuality(docs []search.Doc, queries []qualityQuery) (p1, in5 float64) {
	var at1, top5 int
	peer := fastmcp.New(docs)
	for _, q := range queries {
		got := peer.Search(q.query, 5)
		if i := slices.Index(got, q.want); i == 0 {
			at1++
			top5++
		} else if i > 0 {
			top5++
		}
	}
	return float64(at1) / float64(len(queries)), float64(top5) / float64(len(queries))
}

func names(hits []search.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Name)
	}
	return out
}

// TestQuality is the search quality test: every query names the skill a
// user wants first. Precision at 1 must be at least 0.8 and the wanted skill
// must be in the top 5 for at least 0.95 of the queries, over the example
// skills and the generated corpus together.
func TestQuality(t *testing.T) {
	ex := docsFromFS(t, "examples", examples.Skills)
	_, gen := generated(t)

	exP1, exIn5 := quality(t, split(ex, 1), exampleQueries, true)
	genP1, genIn5 := quality(t, split(gen, 4), corpusQueries, true)
	n1, n2 := float64(len(exampleQueries)), float64(len(corpusQueries))
	p1 := (exP1*n1 + genP1*n2) / (n1 + n2)
	in5 := (exIn5*n1 + genIn5*n2) / (n1 + n2)
	t.Logf("example skills (%d queries): P@1 %.3f, in top 5 %.3f", len(exampleQueries), exP1, exIn5)
	t.Logf("generated corpus of %d skills (%d queries): P@1 %.3f, in top 5 %.3f", len(gen), len(corpusQueries), genP1, genIn5)
	t.Logf("all %d queries: P@1 %.3f, in top 5 %.3f", len(exampleQueries)+len(corpusQueries), p1, in5)
	peerExP1, peerExIn5 := peerQuality(ex, exampleQueries)
	peerGenP1, peerGenIn5 := peerQuality(gen, corpusQueries)
	t.Logf("FastMCP scoring on the same queries: examples P@1 %.3f, in top 5 %.3f; generated P@1 %.3f, in top 5 %.3f; all P@1 %.3f, in top 5 %.3f",
		peerExP1, peerExIn5, peerGenP1, peerGenIn5, (peerExP1*n1+peerGenP1*n2)/(n1+n2), (peerExIn5*n1+peerGenIn5*n2)/(n1+n2))
	if p1 < 0.8 {
		t.Errorf("precision at 1 is %.3f, want at least 0.8", p1)
	}
	if in5 < 0.95 {
		t.Errorf("wanted skill in the top 5 for %.3f of the queries, want at least 0.95", in5)
	}
}
