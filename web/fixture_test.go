package web

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/html"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
)

// hostileSkillMD is a skill written by an attacker: markup in every
// frontmatter field that reaches a page, and a body that tries every way
// Markdown has to run script or load something.
const hostileSkillMD = `---
name: hostile
description: 'Sneaky <script>window.pwnedDesc=1</script> & "quotes" in the description'
version: "6.6.6"
tags: ["<b>bold</b>", "xss"]
metadata:
  author: "<img src=x onerror=alert(1)>"
---
# Hostile <em>heading</em>

<script>document.title='pwned';window.pwned=1</script>

<img src=x onerror="window.pwnedImg=1">

Click [me](javascript:alert(1)) or [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) or [vb](vbscript:msgbox) or [enc](&#106;avascript:alert(3)) or [caps](JAVASCRIPT:alert(4)).

![tracker](http://evil.invalid/track.png)

![local picture](assets/pic.png)

See [the notes](references/notes.md), [a sibling](../deploy-checklist/SKILL.md), [upstream](https://example.com/docs), [root](/etc/passwd), [escape](../../outside.md), [mail](mailto:sec@example.com), [top](#hostile-heading), <https://example.org/auto>, www.example.net and <javascript:alert(2)>.

[![nested](assets/pic.png)](https://example.com/x)
`

// teamSkills is a source of ordinary skills, one nested, one deprecated,
// one excluded, plus the hostile one.
var teamSkills = map[string]string{
	"deploy-checklist/SKILL.md": `---
name: deploy-checklist
description: Check a service before and after a production deploy.
metadata:
  version: "2.0.0"
  tags: "deploy, release"
---
# Deploy checklist

Roll back with [rollback](rollback/SKILL.md). Run [the check](scripts/check.sh).
`,
	"deploy-checklist/scripts/check.sh": "#!/bin/sh\necho ok\n",
	"deploy-checklist/rollback/SKILL.md": `---
name: rollback
description: Roll a bad deploy back.
---
# Rollback
`,
	"old-tool/SKILL.md": `---
name: old-tool
description: The tool we used before.
deprecated: true
---
Use deploy-checklist instead.
`,
	"mismatch/SKILL.md": `---
name: other-name
description: Named unlike its directory.
---
`,
	"hostile/SKILL.md":            hostileSkillMD,
	"hostile/references/notes.md": "# Notes\n<script>alert('file')</script>\n",
	"hostile/assets/pic.png":      "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
}

// secretSkills is a source only some viewers may see.
var secretSkills = map[string]string{
	"payroll-export/SKILL.md": `---
name: payroll-export
description: Export the monthly payroll to the finance system.
tags: [finance, payroll]
---
# Payroll export
`,
	"payroll-export/notes.txt": "salaries\n",
}

// clock is a settable time source shared by the registry and the pages.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	reg   *registry.Registry
	h     *Handler
	e     *echo.Echo
	clock *clock
	dirs  map[string]string // source name -> directory
}

// newFixture builds a real registry over directory sources (synced before
// it returns) and the web handler over it, mounted on a fresh echo router.
func newFixture(t testing.TB, sources map[string]map[string]string, mod func(*Options)) *fixture {
	t.Helper()
	f := &fixture{clock: newClock(), dirs: map[string]string{}}
	f.reg = registry.New(registry.Options{Now: f.clock.Now, ContentCacheBytes: -1})
	var srcs []catalog.Source
	for name, files := range sources {
		dir := t.TempDir()
		testkit.WriteFiles(t, dir, files)
		f.dirs[name] = dir
		srcs = append(srcs, catalog.Source{Name: name, Kind: catalog.KindDir, Dir: dir})
	}
	f.reg.SetSources(srcs)
	for name := range sources {
		if err := f.reg.SyncNow(context.Background(), name); err != nil {
			t.Fatalf("sync %s: %v", name, err)
		}
	}
	o := Options{Catalog: f.reg, States: f.reg.States, Now: f.clock.Now}
	if mod != nil {
		mod(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	f.e = echo.New()
	h.Register(f.e)
	return f
}

func defaultSources() map[string]map[string]string {
	return map[string]map[string]string{"team": teamSkills, "secret": secretSkills}
}

// request is one request to the router, as a browser on example.com
// would send it.
type request struct {
	method  string
	path    string
	form    url.Values
	cookies []*http.Cookie
	header  map[string]string
	remote  string
	tls     bool
}

func (f *fixture) do(t testing.TB, r request) *http.Response {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	req := httptest.NewRequest(r.method, "http://example.com"+r.path, body)
	if r.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	for _, c := range r.cookies {
		req.AddCookie(c)
	}
	if r.remote != "" {
		req.RemoteAddr = r.remote
	}
	if r.tls {
		req.TLS = &tls.ConnectionState{}
	}
	rec := httptest.NewRecorder()
	f.e.ServeHTTP(rec, req)
	return rec.Result()
}

func (f *fixture) get(t testing.TB, path string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	res := f.do(t, request{path: path, cookies: cookies})
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// login signs in with token and returns the session cookie.
func (f *fixture) login(t testing.TB, token string) *http.Cookie {
	t.Helper()
	res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {token}, "next": {"/"}},
		header: map[string]string{"Origin": "http://example.com"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with %q: status %d", token, res.StatusCode)
	}
	for _, c := range res.Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

// authOptions turns on access control with two clients: one that sees
// only the team source, one that sees everything.
func authOptions(o *Options) {
	o.AuthRequired = true
	o.Authenticate = func(_ context.Context, token string) (Viewer, bool) {
		switch token {
		case "tok-team":
			return Viewer{Name: "team-bot", Filter: catalog.Filter{Only: map[string]bool{"team": true}}}, true
		case "tok-all":
			return Viewer{Name: "admin", Filter: catalog.Filter{}}, true
		}
		return Viewer{}, false
	}
}

func newEcho(h *Handler) *echo.Echo {
	e := echo.New()
	h.Register(e)
	return e
}

// activeContent tokenizes a page as a browser would and reports anything
// that could run or load: elements that execute or fetch, event handler and
// style attributes, and URLs in attributes that are not the catalog's own
// pages, #fragments, or plain http(s)/mailto links.
func activeContent(body string) []string {
	var found []string
	z := html.NewTokenizer(strings.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return found
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "img", "iframe", "frame", "object", "embed", "svg", "math", "style", "base", "video", "audio", "source", "picture", "track", "applet", "portal", "template":
			found = append(found, "<"+tok.Data+">")
		case "meta":
			for _, a := range tok.Attr {
				if strings.EqualFold(a.Key, "http-equiv") {
					found = append(found, "<meta http-equiv>")
				}
			}
		case "link":
			for _, a := range tok.Attr {
				if a.Key == "href" && !strings.HasPrefix(a.Val, "/static/") {
					found = append(found, "<link href="+a.Val+">")
				}
			}
		}
		for _, a := range tok.Attr {
			key := strings.ToLower(a.Key)
			switch {
			case strings.HasPrefix(key, "on"), key == "style", key == "srcset", key == "src", key == "formaction", key == "xlink:href":
				found = append(found, tok.Data+"["+key+"]")
			case key == "action":
				if !strings.HasPrefix(a.Val, "/") || strings.HasPrefix(a.Val, "//") {
					found = append(found, tok.Data+"["+key+"="+a.Val+"]")
				}
			case key == "href":
				v := strings.ToLower(strings.TrimSpace(a.Val))
				if !(strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//") || strings.HasPrefix(v, "#") ||
					strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "mailto:")) {
					found = append(found, tok.Data+"["+key+"="+a.Val+"]")
				}
			}
		}
	}
}

func assertInert(t testing.TB, what, body string) {
	t.Helper()
	if bad := activeContent(body); len(bad) > 0 {
		t.Errorf("%s: active content %q", what, bad)
	}
}
