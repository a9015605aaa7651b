package search_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/skillreg/skillreg/search"
)

// The benchmarks report CPU time per operation next to wall time: on a
// shared machine it is the steadier figure. The table for the issue comes
// from internal/bench (section search).

func BenchmarkBuildSegment(b *testing.B) {
	_, docs := generated(b)
	c0 := cpuTime()
	n := 0
	for b.Loop() {
		search.BuildSegment(docs)
		n++
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(n)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(len(docs)), "docs")
}

func BenchmarkSearch(b *testing.B) {
	skills, docs := generated(b)
	segs := split(docs, 10)
	ix := search.NewIndex(segs)
	queries := append(generatedQueries(skills, 400), corpusQueries...)
	c0 := cpuTime()
	i := 0
	for b.Loop() {
		search.Search(segs, queries[i%len(queries)].query, search.Options{Index: ix})
		i++
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(i)/1e6, "cpu-ms/op")
}

// cpuTime is the process's user and system CPU time: steadier than wall
// time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
