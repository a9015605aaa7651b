package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/internal/corpus"
)

var benchCorpus struct {
	sync.Once
	dir  string
	uris []string
}

// benchServe starts a daemon over a generated 10,000-skill corpus (written
// once per process). make bench measures the same against a net/http
// peer; these benchmarks are for profiling (-cpuprofile).
func benchServe(b *testing.B) *testDaemon {
	benchCorpus.Do(func() {
		dir, err := os.MkdirTemp("", "skillreg-bench-serve-")
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := corpus.Write(dir, corpus.Options{Skills: 10000}); err != nil {
			b.Fatal(err)
		}
		benchCorpus.dir = dir
		for i := range 1000 {
			benchCorpus.uris = append(benchCorpus.uris, fmt.Sprintf("skill://bench/%s/SKILL.md", corpus.SkillDir(i, 0)))
		}
	})
	d := startDaemon(b, "sources:\n  - name: bench\n    dir: "+benchCorpus.dir+"\n    poll: 0\n", "")
	b.ResetTimer()
	return d
}

func post(b *testing.B, c *http.Client, url, method, name, body string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

func BenchmarkResourcesRead(b *testing.B) {
	d := benchServe(b)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		i := 0
		for pb.Next() {
			u := benchCorpus.uris[i%len(benchCorpus.uris)]
			post(b, c, d.URL+"/mcp", "resources/read", u, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{`+meta2026+`,"uri":"`+u+`"}}`)
			i++
		}
	})
}

func BenchmarkSkillsListPage(b *testing.B) {
	d := benchServe(b)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		for pb.Next() {
			post(b, c, d.URL+"/mcp", "skills/list", "", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta2026+`}}`)
		}
	})
}
