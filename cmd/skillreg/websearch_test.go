package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/mcp"
)

// skillCardHref is the link of a skill card on a catalog page.
var skillCardHref = regexp.MustCompile(`<a class="name" href="/skills/([^"]+)"`)

// TestWebSearchRanksAsSearchSkills: the web catalog's search box answers
// from the ranked index behind search_skills: the same skills in the same
// order, typos forgiven (a substring match finds nothing for "comit
// mesage").
func TestWebSearchRanksAsSearchSkills(t *testing.T) {
	d := startDaemon(t, "", "")
	cs := connect(t, d.URL, "2026-07-28")
	for _, q := range []string{
		"how do I write a commit message",
		"comit mesage",
		"review code",
		"release",
	} {
		var out mcp.SearchSkillsOutput
		if e := callTool(t, cs, "search_skills", map[string]any{"query": q, "limit": 50}, &out); e != "" {
			t.Fatalf("%q: %s", q, e)
		}
		var want []string
		for _, h := range out.Hits {
			want = append(want, strings.TrimSuffix(strings.TrimPrefix(h.URI, "skill://"), "/SKILL.md"))
		}
		if len(want) == 0 {
			t.Fatalf("%q: search_skills found nothing", q)
		}

		resp, err := http.Get(d.URL + "/?q=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: web search status %d", q, resp.StatusCode)
		}
		var got []string
		for _, m := range skillCardHref.FindAllStringSubmatch(string(page), -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: web search shows %q, search_skills ranks %q", q, got, want)
		}
	}
}
