package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/skill"
)

// This file measures the choice of typo matching: the trie walk over the
// sorted dictionary (what the package uses) against a deletion
// neighbourhood (symmetric delete: every word indexed under each string
// made by deleting up to two of its bytes, a query looked up under its own
// deletions, candidates verified). Run with
//
//	go test -run TestTypoStrategiesAgree -bench Typo ./search

var (
	typoOnce    sync.Once
	typoWords   []string // the plain words of the corpus
	typoQueries []string // words of it with one or two edits
)

// typoSetup builds the words and queries once, from a corpus of n skills
// (10,000 for the benchmarks; the first caller decides).
func typoSetup(tb testing.TB, n int) {
	typoOnce.Do(func() {
		skills := corpus.Realistic(corpus.RealisticOptions{Skills: n, Seed: 1})
		tree := skill.FSTree{FS: corpus.SkillsFS(skills)}
		res, err := skill.Index(context.Background(), tree, skill.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		var docs []Doc
		for i, sk := range res.Skills {
			body, err := skill.ReadBody(tree, sk)
			if err != nil {
				tb.Fatal(err)
			}
			docs = append(docs, FromSkill(fmt.Sprint(i), "s", sk, string(body)))
		}
		d := BuildSegment(docs).dict
		for i, w := range d.words {
			if d.plain[i] {
				typoWords = append(typoWords, w)
			}
		}
		r := rand.New(rand.NewPCG(5, 5))
		for len(typoQueries) < 1000 {
			w := typoWords[r.IntN(len(typoWords))]
			if len(w) < typo1Len {
				continue
			}
			edits := 1 + r.IntN(typoDistance(w))
			for range edits {
				i := r.IntN(len(w))
				switch r.IntN(3) {
				case 0:
					w = w[:i] + w[i+1:]
				case 1:
					w = w[:i] + "x" + w[i:]
				default:
					if i+1 < len(w) {
						w = w[:i] + string(w[i+1]) + string(w[i]) + w[i+2:]
					}
				}
			}
			typoQueries = append(typoQueries, w)
		}
	})
}

// deletes is a symmetric-delete index of words, up to two deletions.
type deletes struct {
	words []string
	index map[string][]int32
}

func newDeletes(words []string) *deletes {
	d := &deletes{words: words, index: map[string][]int32{}}
	for i, w := range words {
		for _, v := range deletions(w, 2) {
			d.index[v] = append(d.index[v], int32(i))
		}
	}
	return d
}

// deletions returns w and the distinct strings made by deleting up to k
// bytes of it.
func deletions(w string, k int) []string {
	seen := map[string]bool{w: true}
	out := []string{w}
	level := []string{w}
	for range k {
		var next []string
		for _, s := range level {
			for i := range len(s) {
				v := s[:i] + s[i+1:]
				if !seen[v] {
					seen[v] = true
					out = append(out, v)
					next = append(next, v)
				}
			}
		}
		level = next
	}
	return out
}

func (d *deletes) fuzzy(q string, k int, fn func(i, dist int)) {
	seen := map[int32]bool{}
	for _, v := range deletions(q, k) {
		for _, i := range d.index[v] {
			if seen[i] {
				continue
			}
			seen[i] = true
			if dist := osa(q, d.words[i]); dist <= k {
				fn(int(i), dist)
			}
		}
	}
}

func TestTypoStrategiesAgree(t *testing.T) {
	typoSetup(t, 1000)
	tr := newDictionary(typoWords, nil)
	del := newDeletes(typoWords)
	for _, q := range typoQueries[:200] {
		k := typoDistance(q)
		if k == 0 {
			continue
		}
		a, b := map[string]int{}, map[string]int{}
		tr.fuzzy(q, k, func(i, dist int) { a[typoWords[i]] = dist })
		del.fuzzy(q, k, func(i, dist int) { b[typoWords[i]] = dist })
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%q: trie %v, deletions %v", q, a, b)
		}
	}
}

func heapAfter(build func() any) (any, uint64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return v, m1.HeapAlloc - m0.HeapAlloc
}

func BenchmarkTypoBuildTrie(b *testing.B) {
	typoSetup(b, 10000)
	_, mem := heapAfter(func() any { d := newDictionary(typoWords, nil); return &d })
	for b.Loop() {
		newDictionary(typoWords, nil)
	}
	b.ReportMetric(float64(mem)/(1<<20), "MiB")
	b.ReportMetric(float64(len(typoWords)), "words")
}

func BenchmarkTypoBuildDeletions(b *testing.B) {
	typoSetup(b, 10000)
	_, mem := heapAfter(func() any { return newDeletes(typoWords) })
	for b.Loop() {
		newDeletes(typoWords)
	}
	b.ReportMetric(float64(mem)/(1<<20), "MiB")
}

func BenchmarkTypoQueryTrie(b *testing.B) {
	typoSetup(b, 10000)
	d := newDictionary(typoWords, nil)
	i := 0
	for b.Loop() {
		q := typoQueries[i%len(typoQueries)]
		d.fuzzy(q, typoDistance(q), func(int, int) {})
		i++
	}
}

func BenchmarkTypoQueryDeletions(b *testing.B) {
	typoSetup(b, 10000)
	d := newDeletes(typoWords)
	i := 0
	for b.Loop() {
		q := typoQueries[i%len(typoQueries)]
		d.fuzzy(q, typoDistance(q), func(int, int) {})
		i++
	}
}
