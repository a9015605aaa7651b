package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/fastmcp"
	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

func init() { register("search", runSearch) }

const (
	searchSources = 10   // segments the corpus is split into, as sources would be
	searchQueries = 1000 // distinct queries per round
	searchRounds  = 3    // rounds, alternating ours and the peer
	searchBuilds  = 5    // builds measured, median reported
)

// runSearch measures search_skills over a realistic generated corpus of
// env.Skills skills split into searchSources segments: the answer time of
// search.Search against the FastMCP server's scoring reimplemented in Go
// (a scan of every skill per query, the way that server answers), on the
// same 1,000 varied queries, in alternating rounds so that noise on this
// shared machine falls on both; and the time to build the segments.
func runSearch(env *Env) ([]Row, error) {
	skills := corpus.Realistic(corpus.RealisticOptions{Skills: env.Skills, Seed: 1})
	tree := skill.FSTree{FS: corpus.SkillsFS(skills)}
	res, err := skill.Index(context.Background(), tree, skill.Options{})
	if err != nil {
		return nil, err
	}
	if len(res.Excluded) > 0 {
		return nil, fmt.Errorf("search bench: %d generated skills excluded: %+v", len(res.Excluded), res.Excluded[0])
	}
	parts := make([][]search.Doc, searchSources)
	var all []search.Doc
	for i, sk := range res.Skills {
		src := fmt.Sprintf("source-%02d", i%searchSources)
		body, err := skill.ReadBody(tree, sk)
		if err != nil {
			return nil, err
		}
		d := search.FromSkill("skill://"+src+"/"+sk.Path+"/SKILL.md", src, sk, string(body))
		parts[i%searchSources] = append(parts[i%searchSources], d)
		all = append(all, d)
	}
	n := len(all)

	// Build times: every source, one source (what a sync rebuilds), the
	// merged dictionary (once per catalog swap), and the whole corpus as
	// one segment.
	build := func() []*search.Segment {
		segs := make([]*search.Segment, 0, len(parts))
		for _, p := range parts {
			segs = append(segs, search.BuildSegment(p))
		}
		return segs
	}
	buildAll, buildAllCPU := searchMedianCPU(searchBuilds, func() { build() })
	buildOne, buildOneCPU := searchMedianCPU(searchBuilds, func() { search.BuildSegment(parts[0]) })
	buildWhole := searchMedian(searchBuilds, func() { search.BuildSegment(all) })
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	segs := build()
	ix := search.NewIndex(segs)
	held := int64(heap()) - int64(before)
	mergeTime := searchMedian(searchBuilds, func() { search.NewIndex(segs) })
	one := search.BuildSegment(all)
	env.Log("search: %d skills; build %d segments %v, one source %v, one segment of all %v; index of %d words in %v; segments and index hold %d MiB",
		n, len(segs), buildAll, buildOne, buildWhole, ix.Len(), mergeTime, held>>20)

	queries := searchBenchQueries(skills, searchQueries)
	peer := fastmcp.New(all)
	for _, q := range queries[:100] { // warm up both
		if _, err := search.Search(segs, q, search.Options{Index: ix}); err != nil {
			return nil, fmt.Errorf("search %q: %w", q, err)
		}
		peer.Search(q, search.DefaultLimit)
	}
	var ours, peers, whole, noIndex []time.Duration
	for round := range searchRounds {
		// Each round starts from a collected heap, so that one side's
		// garbage is not collected on the other's time.
		runOurs := func() {
			runtime.GC()
			for _, q := range queries {
				t := time.Now()
				search.Search(segs, q, search.Options{Index: ix})
				ours = append(ours, time.Since(t))
			}
		}
		runPeer := func() {
			runtime.GC()
			for _, q := range queries {
				t := time.Now()
				peer.Search(q, search.DefaultLimit)
				peers = append(peers, time.Since(t))
			}
		}
		if round%2 == 0 {
			runOurs()
			runPeer()
		} else {
			runPeer()
			runOurs()
		}
	}
	runtime.GC()
	for _, q := range queries {
		t := time.Now()
		search.Search([]*search.Segment{one}, q, search.Options{})
		whole = append(whole, time.Since(t))
		t = time.Now()
		search.Search(segs, q, search.Options{})
		noIndex = append(noIndex, time.Since(t))
	}
	oP50, oP99 := searchPercentile(ours, 50), searchPercentile(ours, 99)
	pP50, pP99 := searchPercentile(peers, 50), searchPercentile(peers, 99)
	env.Log("search: one segment of all skills: p50 %v p99 %v; %d segments without the index: p50 %v p99 %v; slowest query with the index %v",
		searchPercentile(whole, 50), searchPercentile(whole, 99), len(segs), searchPercentile(noIndex, 50), searchPercentile(noIndex, 99), slices.Max(ours))

	return []Row{
		{
			Name:  fmt.Sprintf("search_skills p50, %d skills in %d segments, %d queries x %d", n, len(segs), len(queries), searchRounds),
			Ours:  searchMillis(oP50),
			Peer:  searchMillis(pP50),
			Ratio: fmt.Sprintf("%.3fx", float64(oP50)/float64(pP50)),
			Goal:  "info",
			OK:    true,
		},
		{
			Name:  fmt.Sprintf("search_skills p99, %d skills (peer: FastMCP scoring, scan per query)", n),
			Ours:  searchMillis(oP99),
			Peer:  searchMillis(pP99),
			Ratio: fmt.Sprintf("%.3fx", float64(oP99)/float64(pP99)),
			Goal:  "< 10 ms",
			OK:    oP99 < 10*time.Millisecond,
		},
		{
			Name:  fmt.Sprintf("search: build all %d segments (%d skills; ratio column: CPU time)", len(segs), n),
			Ours:  searchMillis(buildAll),
			Ratio: "cpu " + searchMillis(buildAllCPU),
			Goal:  "< 1 s",
			OK:    buildAll < time.Second,
		},
		{
			Name:  fmt.Sprintf("search: rebuild one source's segment (%d skills; one segment of all: %s)", len(parts[0]), searchMillis(buildWhole)),
			Ours:  searchMillis(buildOne),
			Ratio: "cpu " + searchMillis(buildOneCPU),
			Goal:  "info",
			OK:    true,
		},
		{
			Name: fmt.Sprintf("search: merge the dictionaries (NewIndex, per catalog swap, %d words)", ix.Len()),
			Ours: searchMillis(mergeTime),
			Goal: "info",
			OK:   true,
		},
		{
			Name: "search: heap held by the segments and the index",
			Ours: fmt.Sprintf("%d MiB", held>>20),
			Goal: "info",
			OK:   true,
		},
	}, nil
}

// searchBenchQueries makes n varied queries from the corpus, deterministic:
// a task, a technology and a subject (some words dropped, cut to a prefix
// or given a typo); a run of words from a description; a question ("how do
// I ..."); one short word or prefix; and long pastes from a body.
func searchBenchQueries(skills []corpus.RealisticSkill, n int) []string {
	r := rand.New(rand.NewPCG(42, 7))
	words := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
		})
	}
	run := func(ws []string, k int) []string {
		if len(ws) <= k {
			return ws
		}
		i := r.IntN(len(ws) - k)
		return ws[i : i+k]
	}
	mangle := func(w string) string {
		switch {
		case len(w) >= 6 && r.IntN(6) == 0: // a typo
			i := 1 + r.IntN(len(w)-2)
			return w[:i] + w[i+1:]
		case len(w) >= 6 && r.IntN(6) == 0: // a prefix
			return w[:3+r.IntN(len(w)-4)]
		}
		return w
	}
	out := make([]string, 0, n)
	for len(out) < n {
		s := skills[r.IntN(len(skills))]
		md := string(s.Files[0].Data)
		_, body, _ := strings.Cut(md[3:], "\n---\n")
		desc := ""
		if _, after, ok := strings.Cut(md, "description: "); ok {
			desc, _, _ = strings.Cut(after, "\n")
		}
		var q []string
		switch k := r.IntN(10); {
		case k < 4:
			q = append(q, strings.Split(s.Task, "-")[0], s.Tech)
			for _, w := range strings.Fields(s.Aspect) {
				if r.IntN(4) > 0 {
					q = append(q, w)
				}
			}
		case k < 6:
			q = run(words(desc), 3+r.IntN(4))
		case k < 8:
			q = append([]string{"how", "do", "i"}, run(words(desc), 2+r.IntN(3))...)
		case k < 9:
			w := s.Tech
			if len(w) > 4 && r.IntN(2) == 0 {
				w = w[:3+r.IntN(len(w)-3)]
			}
			q = []string{w}
		default:
			q = run(words(body), 15+r.IntN(30))
		}
		for i := range q {
			q[i] = mangle(q[i])
		}
		query := strings.Join(q, " ")
		if len(query) > search.MaxQueryBytes {
			query = query[:search.MaxQueryBytes]
		}
		if strings.TrimSpace(query) != "" {
			out = append(out, query)
		}
	}
	return out
}

// searchMedian runs f k times and returns the median duration.
func searchMedian(k int, f func()) time.Duration {
	wall, _ := searchMedianCPU(k, f)
	return wall
}

// searchMedianCPU runs f k times and returns the median wall time and the
// median process CPU time (user and system, all threads): on a shared,
// oversubscribed machine the CPU time is the steadier figure.
func searchMedianCPU(k int, f func()) (wall, cpu time.Duration) {
	w := make([]time.Duration, k)
	c := make([]time.Duration, k)
	for i := range w {
		t, c0 := time.Now(), searchCPU()
		f()
		w[i], c[i] = time.Since(t), searchCPU()-c0
	}
	slices.Sort(w)
	slices.Sort(c)
	return w[k/2], c[k/2]
}

func searchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// searchPercentile returns the p-th percentile (nearest rank) of d.
func searchPercentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(i, len(s))-1)]
}

func searchMillis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
