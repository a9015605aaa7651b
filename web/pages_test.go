package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/skill"
)

// mustContain fails for every want missing from body.
func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

func mustNotContain(t *testing.T, what, body string, bad ...string) {
	t.Helper()
	lower := strings.ToLower(body)
	for _, b := range bad {
		if strings.Contains(lower, strings.ToLower(b)) {
			t.Errorf("%s: contains %q", what, b)
		}
	}
}

// noActiveContent is raw markup no page may ever hold, whatever the
// skills say (activeContent checks the parsed page more thoroughly).
var noActiveContent = []string{"<script", "<img", "<iframe", "<object", "<embed", "<svg", "<style"}

func TestCatalogPage(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	res, body := f.get(t, "/")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=UTF-8" {
		t.Errorf("Content-Type %q", ct)
	}
	mustContain(t, "catalog", body,
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		`<a href="/sources/team">team</a>`, `<a href="/sources/secret">secret</a>`,
		`<a class="name" href="/skills/team/deploy-checklist">deploy-checklist</a>`,
		`<a class="name" href="/skills/team/deploy-checklist/rollback">rollback</a>`,
		`<span class="version">2.0.0</span>`,
		`<li class="skill deprecated">`, `<span class="badge warn">deprecated</span>`,
		`<a href="/?q=deploy">deploy</a>`,
		`<a href="/?q=finance">finance</a>`,
		// Hostile frontmatter arrives as text.
		`Sneaky &lt;script&gt;window.pwnedDesc=1&lt;/script&gt; &amp; &#34;quotes&#34;`,
		`&lt;b&gt;bold&lt;/b&gt;`,
		`<form class="search" role="search" method="get" action="/">`,
	)
	mustNotContain(t, "catalog", body, noActiveContent...)
	assertInert(t, "catalog", body)
	// The excluded skill is not listed.
	mustNotContain(t, "catalog", body, "other-name", "/skills/team/mismatch")
	// Groups in source order.
	if strings.Index(body, `href="/sources/secret"`) > strings.Index(body, `href="/sources/team"`) {
		t.Error("sources not in name order")
	}
}

func TestCatalogPagination(t *testing.T) {
	files := map[string]string{}
	for i := range pageSize + 1 {
		name := fmt.Sprintf("s%04d", i)
		files[name+"/SKILL.md"] = "---\nname: " + name + "\ndescription: Skill number " + name + ".\n---\n"
	}
	f := newFixture(t, map[string]map[string]string{"many": files}, nil)
	_, body := f.get(t, "/")
	if n := strings.Count(body, `<li class="skill">`); n != pageSize {
		t.Errorf("page 1 lists %d skills, want %d", n, pageSize)
	}
	mustContain(t, "page 1", body, "Page 1 of 2", `<a href="/?page=2" rel="next">`)
	_, body = f.get(t, "/?page=2")
	if n := strings.Count(body, `<li class="skill">`); n != 1 {
		t.Errorf("page 2 lists %d skills, want 1", n)
	}
	mustContain(t, "page 2", body, "s0500", `<a href="/?page=1" rel="prev">`)
	if res, _ := f.get(t, "/?page=3"); res.StatusCode != http.StatusNotFound {
		t.Errorf("page 3: status %d", res.StatusCode)
	}
}

func TestSearchFallback(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	tests := []struct {
		q         string
		want, not []string
	}{
		{"deploy", []string{`href="/skills/team/deploy-checklist"><mark>deploy</mark>-checklist</a>`, `<a href="/?q=deploy"><mark>deploy</mark></a>`, "matched name, tags, description"}, []string{"payroll-export"}},
		{"PAYROLL finance", []string{`<mark>payroll</mark>-export`, `in secret`}, []string{"deploy-checklist"}},
		// Escape first, then mark: the mark sits inside the escaped text.
		{"script", []string{`Sneaky &lt;<mark>script</mark>&gt;window.pwnedDesc=1&lt;/<mark>script</mark>&gt;`}, []string{"deploy-checklist"}},
		{"<script>pwnedDesc</script>", []string{`value="&lt;script&gt;pwnedDesc&lt;/script&gt;"`, "Sneaky &lt;<mark>script</mark>&gt;window.<mark>pwnedDesc</mark>"}, []string{"deploy-checklist"}},
		{"nothing-matches-this", []string{"No skill matches “nothing-matches-this”"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			res, body := f.get(t, "/?q="+urlQueryEscape(tt.q))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			mustContain(t, "results", body, tt.want...)
			mustNotContain(t, "results", body, append(tt.not, noActiveContent...)...)
			assertInert(t, "results", body)
		})
	}
	res, body := f.get(t, "/?q="+strings.Repeat("x", maxQueryBytes+1))
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "longer than 1024 bytes") {
		t.Errorf("long query: status %d", res.StatusCode)
	}
}

func TestSearchUsesRankedSearch(t *testing.T) {
	var gotFilter catalog.Filter
	var gotQuery string
	var gotLimit int
	f := newFixture(t, defaultSources(), func(o *Options) {
		authOptions(o)
		o.Search = func(f catalog.Filter, q string, limit int) ([]Hit, error) {
			gotFilter, gotQuery, gotLimit = f, q, limit
			if q == "boom" {
				return nil, errors.New("index unavailable")
			}
			// A backend that ignores the filter, and a stale hit: the page
			// must drop both.
			return []Hit{
				{URI: "skill://team/old-tool/SKILL.md", Source: "team", Name: "old-tool", Score: 9.5, Fields: []string{"body"}},
				{URI: "skill://secret/payroll-export/SKILL.md", Source: "secret", Name: "payroll-export", Score: 8},
				{URI: "skill://team/gone/SKILL.md", Source: "team", Name: "gone", Score: 7},
				{URI: "skill://team/deploy-checklist/SKILL.md", Source: "team", Name: "deploy-checklist", Score: 1.25, Fields: []string{"name"}},
			}, nil
		}
	})
	ck := f.login(t, "tok-team")
	res, body := f.get(t, "/?q=tool", ck)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	if gotQuery != "tool" || gotLimit != searchLimit || !gotFilter.Allows("team") || gotFilter.Allows("secret") {
		t.Errorf("Search called with %v %q %d", gotFilter, gotQuery, gotLimit)
	}
	mustContain(t, "ranked", body, `old-<mark>tool</mark>`, "matched body", "2 skills match")
	mustNotContain(t, "ranked", body, "payroll", "gone")
	if strings.Index(body, "old-<mark>tool") > strings.Index(body, "deploy-checklist</a>") {
		t.Error("results not in the backend's rank order")
	}
	if res, body := f.get(t, "/?q=boom", ck); res.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "Search failed") {
		t.Errorf("failing search: status %d", res.StatusCode)
	}
}

func TestSkillPage(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	res, body := f.get(t, "/skills/team/hostile")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	mustNotContain(t, "skill page", body, noActiveContent...)
	assertInert(t, "skill page", body)
	mustNotContain(t, "skill page", body, `href="/etc/passwd"`, "outside.md\"", `href="javascript`, `href="data`, `href="vbscript`)
	mustContain(t, "skill page", body,
		// Raw HTML is omitted, not passed through.
		"<!-- raw HTML omitted -->",
		`<h1 id="hostile-emheadingem">Hostile <!-- raw HTML omitted -->heading<!-- raw HTML omitted --></h1>`,
		// Dangerous links lose their link and keep their text.
		"Click me or data or vb or enc or caps.",
		// Images never load: a link or a text names them.
		`<a href="http://evil.invalid/track.png" rel="nofollow noopener noreferrer" class="md-image">image: tracker</a>`,
		`<a href="/skills/team/hostile/-/files/assets/pic.png" class="md-image">image: local picture</a>`,
		`<a href="https://example.com/x" rel="nofollow noopener noreferrer">[image: nested]</a>`,
		// Relative links point at the catalog's own pages.
		`<a href="/skills/team/hostile/-/files/references/notes.md">the notes</a>`,
		`<a href="/skills/team/deploy-checklist">a sibling</a>`,
		`<a href="https://example.com/docs" rel="nofollow noopener noreferrer">upstream</a>`,
		`<a href="mailto:sec@example.com" rel="nofollow noopener noreferrer">mail</a>`,
		`<a href="#hostile-heading">top</a>`,
		`<a href="https://example.org/auto" rel="nofollow noopener noreferrer">https://example.org/auto</a>`,
		`<a href="http://www.example.net" rel="nofollow noopener noreferrer">www.example.net</a>`,
		"root, escape,",
		// Frontmatter as a table, nested values as JSON, all escaped.
		`<th scope="row"><code>description</code></th><td>Sneaky &lt;script&gt;window.pwnedDesc=1&lt;/script&gt; &amp; &#34;quotes&#34; in the description</td>`,
		`<th scope="row"><code>version</code></th><td>6.6.6</td>`,
		"&lt;b&gt;bold&lt;/b&gt;",
		`&#34;author&#34;: &#34;&lt;img src=x onerror=alert(1)&gt;&#34;`,
		// Provenance of a directory source.
		`<a href="/sources/team">team</a> <span class="muted">(dir)</span>`,
		`<code>hostile</code>`,
		// Connect box, derived from the request's host.
		"claude mcp add --transport http skillreg http://example.com/mcp",
		"<code>skill://team/hostile/SKILL.md</code>",
	)
	// The autolink to javascript: keeps only its text.
	if strings.Contains(body, `href="javascript`) || !strings.Contains(body, "and javascript:alert(2).") && !strings.Contains(body, "and &lt;javascript:alert(2)&gt;.") {
		t.Errorf("javascript autolink not made inert")
	}
	plain := html.UnescapeString(body)
	mustContain(t, "cursor", plain, "{\n  \"mcpServers\": {\n    \"skillreg\": {\n      \"url\": \"http://example.com/mcp\"\n    }\n  }\n}")
	// The manifest: every file with its size and digest, linked to its view.
	for _, p := range []string{"SKILL.md", "references/notes.md", "assets/pic.png"} {
		data := teamSkills["hostile/"+p]
		sum := sha256.Sum256([]byte(data))
		mustContain(t, "manifest", body,
			`<a href="/skills/team/hostile/-/files/`+p+`"><code>`+p+`</code></a>`,
			fmt.Sprintf(`title="%d bytes"`, len(data)),
			"sha256:"+hex.EncodeToString(sum[:]))
	}
}

func TestSkillPageNestedAndConnect(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) { o.MCPURL = "https://skills.example.com/mcp" })
	_, body := f.get(t, "/skills/team/deploy-checklist")
	mustContain(t, "parent", body,
		`<a href="/skills/team/deploy-checklist/rollback">rollback</a>`, // the body's link and the nested list
		`<a href="/skills/team/deploy-checklist/-/files/scripts/check.sh">the check</a>`,
		`<h2>Nested skills</h2>`,
		`<a href="/skills/team/deploy-checklist/-/files/rollback/SKILL.md"><code>rollback/SKILL.md</code></a>`,
		"claude mcp add --transport http skillreg https://skills.example.com/mcp",
	)
	_, body = f.get(t, "/skills/team/deploy-checklist/rollback")
	mustContain(t, "child", body, `› <a href="/skills/team/deploy-checklist">deploy-checklist</a>`, "<code>deploy-checklist/rollback</code>")
	// A trailing slash names the same skill.
	if res, _ := f.get(t, "/skills/team/deploy-checklist/"); res.StatusCode != http.StatusOK {
		t.Errorf("trailing slash: status %d", res.StatusCode)
	}
}

func TestConnectSnippetsQuoteAndAuth(t *testing.T) {
	claude, cursor := connectSnippets("http://[::1]:8080/mcp", true)
	if claude != `claude mcp add --transport http skillreg 'http://[::1]:8080/mcp' --header "Authorization: Bearer $SKILLREG_TOKEN"` {
		t.Errorf("claude = %s", claude)
	}
	if !strings.Contains(cursor, `"url": "http://[::1]:8080/mcp"`) || !strings.Contains(cursor, `"Authorization": "Bearer <your token>"`) {
		t.Errorf("cursor = %s", cursor)
	}
}

// staticCatalog serves one fixed generation, for provenance a directory
// source cannot have (a git repository and commit).
type staticCatalog struct{ cat *catalog.Catalog }

func (s staticCatalog) Current() *catalog.Catalog { return s.cat }

func (s staticCatalog) ReadFile(_ context.Context, f catalog.FileRef) ([]byte, error) {
	rc, err := f.Snap.Tree().Open(f.File.ID)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestGitHubProvenance(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{"skills/deploy-checklist/SKILL.md": teamSkills["deploy-checklist/SKILL.md"]})
	tree := skill.DirTree{Root: dir}
	res, err := skill.Index(context.Background(), tree, skill.Options{RootName: "acme"})
	if err != nil || len(res.Skills) != 1 {
		t.Fatalf("index: %v %+v", err, res)
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	snap := catalog.NewSnapshot(&catalog.Snapshot{Source: "acme", Kind: catalog.KindGit, Repository: "https://github.com/acme/skills.git",
		Ref: "branch:main", Commit: sha, Skills: res.Skills, IndexedAt: time.Now()}, tree)
	h, err := New(Options{Catalog: staticCatalog{catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{snap})}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: h, e: newEcho(h)}
	_, body := f.get(t, "/skills/acme/skills/deploy-checklist")
	mustContain(t, "provenance", body,
		`<a href="https://github.com/acme/skills" rel="nofollow noopener noreferrer">https://github.com/acme/skills.git</a>`,
		`<a href="https://github.com/acme/skills/commit/`+sha+`" rel="nofollow noopener noreferrer"><code title="`+sha+`">0123456789ab</code></a>`,
		`<a href="https://github.com/acme/skills/tree/`+sha+`/skills/deploy-checklist" rel="nofollow noopener noreferrer">`,
		`<code>branch:main</code>`)
	_, body = f.get(t, "/sources/acme")
	mustContain(t, "sources", body, `<a href="https://github.com/acme/skills/commit/`+sha+`"`)

	for repo, want := range map[string]string{
		"https://github.com/acme/skills":         "https://github.com/acme/skills",
		"git@github.com:acme/skills.git":         "https://github.com/acme/skills",
		"ssh://git@github.com/acme/skills.git":   "https://github.com/acme/skills",
		"https://GitHub.com/acme/skills/":        "https://github.com/acme/skills",
		"https://gitlab.com/acme/skills":         "",
		"https://github.com.evil.io/acme/skills": "",
		"https://github.com/acme":                "",
		"https://github.com/acme/sk\"ills":       "",
		"https://github.com/../skills":           "",
		"javascript:alert(1)//github.com/a/b":    "",
	} {
		got, ok := githubRepo(repo)
		if got != want || ok != (want != "") {
			t.Errorf("githubRepo(%q) = %q, %v; want %q", repo, got, ok, want)
		}
	}
}

func TestFileView(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	tests := []struct {
		path, body, disposition string
	}{
		{"/skills/team/hostile/-/files/references/notes.md", teamSkills["hostile/references/notes.md"], `inline; filename=notes.md`},
		{"/skills/team/hostile/-/files/SKILL.md", hostileSkillMD, `inline; filename=SKILL.md`},
		{"/skills/team/hostile/-/files/assets/pic.png", teamSkills["hostile/assets/pic.png"], `attachment; filename=pic.png`},
		// A nested skill's file, through its parent and through itself.
		{"/skills/team/deploy-checklist/-/files/rollback/SKILL.md", teamSkills["deploy-checklist/rollback/SKILL.md"], `inline; filename=SKILL.md`},
		{"/skills/team/deploy-checklist/rollback/-/files/SKILL.md", teamSkills["deploy-checklist/rollback/SKILL.md"], `inline; filename=SKILL.md`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, body := f.get(t, tt.path)
			if res.StatusCode != http.StatusOK || body != tt.body {
				t.Fatalf("status %d, body %q", res.StatusCode, body)
			}
			sum := sha256.Sum256([]byte(tt.body))
			for k, want := range map[string]string{
				"Content-Type":            "text/plain; charset=utf-8",
				"X-Content-Type-Options":  "nosniff",
				"Content-Disposition":     tt.disposition,
				"Content-Security-Policy": fileCSP,
				"Referrer-Policy":         "no-referrer",
				"ETag":                    `"sha256:` + hex.EncodeToString(sum[:]) + `"`,
			} {
				if got := res.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
	// Anything that is not a file of that skill is the same 404.
	for _, p := range []string{
		"/skills/team/hostile/-/files/",
		"/skills/team/hostile/-/files/nope.md",
		"/skills/team/hostile/-/files/../../deploy-checklist/SKILL.md",
		"/skills/team/hostile/-/files/%2e%2e/deploy-checklist/SKILL.md",
		"/skills/team/hostile/-/files/references%2Fnotes.md",
		"/skills/team/hostile/-/files/references",
		"/skills/team/nope/-/files/SKILL.md",
		"/skills/team/mismatch/-/files/SKILL.md",
		"/skills/team/deploy-checklist/-/files/../../secret/payroll-export/SKILL.md",
	} {
		if res, _ := f.get(t, p); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, res.StatusCode)
		}
	}
	// Bytes that no longer match the manifest are refused, never served.
	testkit.WriteFiles(t, f.dirs["team"], map[string]string{"hostile/references/notes.md": strings.ToUpper(teamSkills["hostile/references/notes.md"])})
	res, body := f.get(t, "/skills/team/hostile/-/files/references/notes.md")
	if res.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "NOTES") {
		t.Errorf("changed file: status %d", res.StatusCode)
	}
}

func TestNotFoundPages(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	for _, p := range []string{"/skills/nosuch/x", "/skills/team/nosuch", "/skills/team/mismatch", "/skills/team", "/skills/", "/skills/Team/hostile",
		"/skills/team/hostile/SKILL.md", "/skills/team/../secret/payroll-export", "/sources/nosuch", "/sources/Bad_Name", "/static/nope.css"} {
		res, body := f.get(t, p)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, res.StatusCode)
			continue
		}
		mustContain(t, p, body, "<h1>Not found</h1>", `<p class="code">404</p>`)
		if res.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
			t.Errorf("%s: no CSP on the 404 page", p)
		}
	}
}

func TestSourcesPage(t *testing.T) {
	srcs := defaultSources()
	deliveries := []Delivery{
		{ID: "d-3", Event: "push", Repo: "acme/team-skills", Outcome: "accepted", At: newClock().Now().Add(-2 * time.Minute), Sources: []string{"team"}},
		{ID: "d-2", Event: "release", Action: "published", Repo: "acme/payroll", Outcome: "accepted", At: newClock().Now().Add(-time.Hour), Sources: []string{"secret"}, Redelivery: true},
		{ID: "d-1", Event: "ping", Repo: "acme/<script>", Outcome: "ignored", At: newClock().Now().Add(-3 * time.Hour)},
	}
	var asked int
	f := newFixture(t, srcs, func(o *Options) {
		o.Deliveries = func(n int) []Delivery { asked = n; return deliveries }
	})
	// A source whose directory is missing stalls.
	f.reg.SetSources(append(sourcesOf(f), catalog.Source{Name: "broken", Kind: catalog.KindDir, Dir: t.TempDir() + "/missing"}))
	if err := f.reg.SyncNow(context.Background(), "broken"); err == nil {
		t.Fatal("sync of a missing directory succeeded")
	}
	res, body := f.get(t, "/sources")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	if asked != maxDeliveries {
		t.Errorf("asked for %d deliveries", asked)
	}
	mustNotContain(t, "sources", body, noActiveContent...)
	assertInert(t, "sources", body)
	mustContain(t, "sources", body,
		`<section class="box source" id="src-team">`,
		`<a href="/sources/team">team</a>`, `<span class="badge ok">updated</span>`,
		`<dt>Kind</dt><dd>dir</dd>`,
		"4 served, 1 excluded",
		`<code>mismatch</code><br><span class="muted"><code>mismatch/SKILL.md</code></span></td><td><code class="rule">name-mismatch</code></td><td>name &#34;other-name&#34; differs from the skill&#39;s directory name &#34;mismatch&#34;</td>`,
		`<span class="badge bad">stalled</span>`,
		`<dt>Last error</dt>`, "missing",
		`<dt>Stalled</dt><dd class="error-text"><code>path_missing</code>: the source&#39;s directory`,
		// Deliveries: event, id, time, outcome, sources.
		`<code>push</code>`, `<code class="digest">d-3</code>`, `<time datetime="2026-12-01T09:28:00Z" title="2026-12-01T09:28:00Z">2m ago</time>`, "accepted",
		`<code>release.published</code>`, `<span class="badge">redelivery</span>`,
		`acme/&lt;script&gt;`, `<span class="muted">none</span>`,
	)
	_, body = f.get(t, "/sources/team")
	mustContain(t, "one source", body, `id="src-team"`, "d-3")
	mustNotContain(t, "one source", body, `id="src-secret"`, "d-2", "d-1")

	// Without a webhook the page says so.
	g := newFixture(t, srcs, nil)
	_, body = g.get(t, "/sources")
	mustContain(t, "no webhook", body, "No webhook is configured")
}

func sourcesOf(f *fixture) []catalog.Source {
	var out []catalog.Source
	for name, dir := range f.dirs {
		out = append(out, catalog.Source{Name: name, Kind: catalog.KindDir, Dir: dir})
	}
	return out
}

// Every answer carries the security headers; every HTML page the viewport.
func TestSecurityHeadersOnEveryPage(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			f := newFixture(t, defaultSources(), func(o *Options) {
				if auth {
					authOptions(o)
				}
				o.Deliveries = func(int) []Delivery { return nil }
			})
			var cookies []*http.Cookie
			if auth {
				cookies = append(cookies, f.login(t, "tok-all"))
			}
			paths := []string{"/", "/?q=deploy", "/?q=", "/skills/team/hostile", "/skills/team/hostile/-/files/SKILL.md", "/skills/nope/x",
				"/sources", "/sources/team", "/sources/nope", "/login", "/logout", "/static/style.css", "/static/nope"}
			for _, p := range paths {
				res := f.do(t, request{path: p, cookies: cookies})
				csp := res.Header.Get("Content-Security-Policy")
				if strings.Contains(p, "/-/files/") {
					if csp != fileCSP {
						t.Errorf("%s: CSP %q", p, csp)
					}
				} else if csp != ContentSecurityPolicy {
					t.Errorf("%s: CSP %q", p, csp)
				}
				if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
					t.Errorf("%s: headers %v", p, res.Header)
				}
				if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
					b, _ := io.ReadAll(res.Body)
					if !strings.Contains(string(b), `name="viewport"`) {
						t.Errorf("%s: no viewport meta", p)
					}
				}
			}
		})
	}
}

func TestStaticFiles(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	_, page := f.get(t, "/")
	m := regexp.MustCompile(`href="(/static/style\.css\?v=[0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no versioned style sheet link")
	}
	res, body := f.get(t, m[1])
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") || !strings.Contains(body, ".skill") {
		t.Fatalf("style.css: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("versioned style sheet Cache-Control %q", cc)
	}
	res = f.do(t, request{path: m[1], header: map[string]string{"If-None-Match": res.Header.Get("ETag")}})
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET: %d", res.StatusCode)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a catalog succeeded")
	}
	if _, err := New(Options{Catalog: registry.New(registry.Options{}), AuthRequired: true}); err == nil {
		t.Error("New with AuthRequired and no Authenticate succeeded")
	}
}

func TestHighlight(t *testing.T) {
	tests := []struct {
		s     string
		terms []string
		want  string
	}{
		{"plain <b>", nil, "plain &lt;b&gt;"},
		{"a <b> tag & amp", []string{"amp"}, "a &lt;b&gt; tag &amp; <mark>amp</mark>"},
		{"<script>", []string{"script"}, "&lt;<mark>script</mark>&gt;"},
		{"Deploy the deployer", []string{"deploy"}, "<mark>Deploy</mark> the <mark>deploy</mark>er"},
		{"Größe GRÖSSE", []string{"größe"}, "<mark>Größe</mark> GRÖSSE"},
		{"overlap abcabc", []string{"abc", "bca"}, "overlap <mark>abcabc</mark>"},
		{`"quoted"`, []string{"quoted"}, "&#34;<mark>quoted</mark>&#34;"},
	}
	for _, tt := range tests {
		if got := string(highlight(tt.s, tt.terms)); got != tt.want {
			t.Errorf("highlight(%q, %q) = %q, want %q", tt.s, tt.terms, got, tt.want)
		}
	}
	if got := queryTerms("Deploy, a deploy!  <script> x y"); !slices.Equal(got, []string{"deploy", "script"}) {
		t.Errorf("queryTerms = %q", got)
	}
}

// TestSkillPageReadsTheBody: skills hold no body; the page reads SKILL.md
// back, verified against its digest. A SKILL.md changed since indexing is
// not shown: the page answers 503 with Retry-After (and a resync is
// asked), never the new text under the old manifest.
func TestSkillPageReadsTheBody(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	res, page := f.get(t, "/skills/team/deploy-checklist")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "Roll back with") {
		t.Fatalf("skill page: %d, body shown: %v", res.StatusCode, strings.Contains(page, "Roll back with"))
	}
	testkit.WriteFiles(t, f.dirs["team"], map[string]string{"deploy-checklist/SKILL.md": strings.Replace(teamSkills["deploy-checklist/SKILL.md"], "Roll back with", "Never roll back, use", 1)})
	res, page = f.get(t, "/skills/team/deploy-checklist")
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || strings.Contains(page, "Never roll back") || strings.Contains(page, "Roll back with") {
		t.Fatalf("after SKILL.md changed: %d, Retry-After %q, body shown: %v", res.StatusCode, res.Header.Get("Retry-After"), strings.Contains(page, "roll back"))
	}
}
