package web

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/tools"
	"github.com/skillreg/skillreg/registry"
)

var update = flag.Bool("update", false, "rewrite the screenshots under docs/screenshots")

// screenshotDir is where -update writes the pages' screenshots.
var screenshotDir = filepath.Join("..", "docs", "screenshots")

// chromiumPath finds Debian's Chromium (SKILLREG_CHROMIUM overrides). It
// skips the test when there is none, except under CI=true, where a missing
// browser is a failure: CI installs it (scripts/install-debian-tools.sh).
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{"chromium", "chromium-browser", "/usr/bin/chromium"}
	if p := os.Getenv("SKILLREG_CHROMIUM"); p != "" {
		candidates = []string{p}
	}
	for _, name := range candidates {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("Chromium not found (looked for %s): the browser test needs Debian's chromium package; run scripts/install-debian-tools.sh", strings.Join(candidates, ", "))
	tools.Missing(t, msg)
	return ""
}

// newBrowser starts headless Chromium with a fresh profile and returns a
// context for one tab. The context's deadline only bounds a hung browser;
// no step waits for a fixed time.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return tab
}

// cspRecorder runs in every document before the page (DevTools scripts are
// exempt from the page's CSP) and records the violations the CSP reports.
const cspRecorder = `window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`

func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestBrowser drives the real handler in headless Chromium: browse, search,
// open the hostile skill, and check that nothing from it ran or loaded,
// and that the CSP blocks script even if markup ever got through.
func TestBrowser(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) {
		o.Deliveries = func(int) []Delivery {
			return []Delivery{{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Event: "push", Repo: "acme/team-skills", Outcome: "accepted", At: newClock().Now().Add(-time.Minute), Sources: []string{"team"}}}
		}
	})
	srv := httptest.NewServer(f.e)
	t.Cleanup(srv.Close)
	ctx := newBrowser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatalf("install CSP recorder: %v", err)
	}

	// The catalog.
	do(t, ctx, "open /", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	if title := run(t, ctx, "title", chromedp.Title()); title != "Skills · skillreg" {
		t.Errorf("catalog title %q", title)
	}
	if n := run(t, ctx, "skills", chromedp.Evaluate[int](`document.querySelectorAll('li.skill').length`)); n != 5 {
		t.Errorf("catalog lists %d skills, want 5", n)
	}
	desc := run(t, ctx, "hostile description", chromedp.Evaluate[string](`[...document.querySelectorAll('li.skill')].find(li => li.querySelector('a.name').textContent === 'hostile').querySelector('.desc').textContent`))
	if !strings.Contains(desc, `<script>window.pwnedDesc=1</script>`) {
		t.Errorf("hostile description not shown as text: %q", desc)
	}

	// Search, as a person would: type and submit the form.
	do(t, ctx, "search",
		chromedp.SendKeys(chromedp.CSS("#sr-q"), "sneaky"),
		chromedp.Submit(chromedp.CSS("#sr-q")),
		chromedp.WaitVisible(chromedp.CSS("ol.results")))
	if loc := run(t, ctx, "location", chromedp.Location()); loc != srv.URL+"/?q=sneaky" {
		t.Errorf("search went to %s", loc)
	}
	marks := run(t, ctx, "marks", chromedp.Evaluate[[]string](`[...document.querySelectorAll('ol.results mark')].map(m => m.textContent)`))
	if len(marks) == 0 || !strings.EqualFold(marks[0], "sneaky") {
		t.Errorf("highlighted %q", marks)
	}

	// Open the hostile skill from the results.
	do(t, ctx, "open skill",
		chromedp.Click(chromedp.CSS("ol.results a.name")),
		chromedp.WaitVisible(chromedp.CSS("article.markdown")))
	if loc := run(t, ctx, "location", chromedp.Location()); loc != srv.URL+"/skills/team/hostile" {
		t.Errorf("result opened %s", loc)
	}
	type pageState struct {
		Title     string   `json:"title"`
		Pwned     []bool   `json:"pwned"`
		Scripts   int      `json:"scripts"`
		Images    int      `json:"images"`
		Heading   string   `json:"heading"`
		Article   string   `json:"article"`
		Hrefs     []string `json:"hrefs"`
		Resources []string `json:"resources"`
		Connect   string   `json:"connect"`
	}
	st := run(t, ctx, "page state", chromedp.Evaluate[pageState](`({
		title: document.title,
		pwned: [!!window.pwned, !!window.pwnedImg, !!window.pwnedDesc],
		scripts: document.scripts.length,
		images: document.images.length,
		heading: document.querySelector('article.markdown h1').textContent,
		article: document.querySelector('article.markdown').innerText,
		hrefs: [...document.querySelectorAll('a[href]')].map(a => a.href),
		resources: performance.getEntriesByType('resource').map(e => e.name),
		connect: document.querySelector('#sr-connect').innerText,
	})`))
	if st.Title != "hostile · skillreg" || st.Pwned[0] || st.Pwned[1] || st.Pwned[2] {
		t.Errorf("a script from the skill ran: title %q, pwned %v", st.Title, st.Pwned)
	}
	if st.Scripts != 0 || st.Images != 0 {
		t.Errorf("the page holds %d scripts and %d images", st.Scripts, st.Images)
	}
	if st.Heading != "Hostile heading" || !strings.Contains(st.Article, "Click me or data or vb or enc or caps.") || !strings.Contains(st.Article, "image: tracker") {
		t.Errorf("rendered content: heading %q, article %q", st.Heading, st.Article)
	}
	for _, h := range st.Hrefs {
		if !strings.HasPrefix(h, srv.URL+"/") && !strings.HasPrefix(h, "https://") && !strings.HasPrefix(h, "http://") && !strings.HasPrefix(h, "mailto:") {
			t.Errorf("link to %q", h)
		}
	}
	for _, r := range st.Resources {
		if !strings.HasPrefix(r, srv.URL+"/static/") {
			t.Errorf("the page loaded %q", r)
		}
	}
	if !strings.Contains(st.Connect, "claude mcp add --transport http skillreg "+srv.URL+"/mcp") {
		t.Errorf("connect box: %q", st.Connect)
	}
	if v := run(t, ctx, "violations so far", chromedp.Evaluate[[]string](`window.__csp`)); len(v) != 0 {
		t.Errorf("the page itself broke its CSP: %q", v)
	}

	// Defence in depth: were the skill's markup ever to reach the DOM, the
	// CSP would still stop it. Insert it as an escaping bug would, then wait
	// until each piece has an outcome, blocked or run, whichever comes.
	do(t, ctx, "inject",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const s = document.createElement('script');
			s.textContent = "window.pwnedInline = 1; document.title = 'pwned'";
			document.body.appendChild(s);
			const e = document.createElement('script');
			e.onload = e.onerror = () => { window.__external = true; };
			e.src = 'http://evil.invalid/x.js';
			document.body.appendChild(e);
			document.body.insertAdjacentHTML('beforeend', '<img src="/static/none.png" onerror="window.pwnedImg = 1">');
		})()`))
	settled := `(() => {
		const saw = p => window.__csp.some(v => v.startsWith(p));
		return (saw('script-src-elem inline') || window.pwnedInline) &&
			(saw('script-src-elem http://evil.invalid/') || window.__external) &&
			(saw('script-src-attr inline') || window.pwnedImg);
	})()`
	do(t, ctx, "wait for the injected markup", chromedp.Poll[chromedp.Void](settled, chromedp.WithPollingTimeout(0)))
	v := run(t, ctx, "violations", chromedp.Evaluate[[]string](`window.__csp`))
	joined := strings.Join(v, "\n")
	for _, want := range []string{"script-src-elem inline", "script-src-elem http://evil.invalid/x.js", "script-src-attr inline"} {
		if !strings.Contains(joined, want) {
			t.Errorf("CSP did not report %q; reported %q", want, v)
		}
	}
	if pwned := run(t, ctx, "after injection", chromedp.Evaluate[[]any](`[document.title, !!window.pwnedInline, !!window.pwnedImg]`)); pwned[0] != "hostile · skillreg" || pwned[1] != false || pwned[2] != false {
		t.Errorf("injected script ran: %v", pwned)
	}

	// A file of the skill is shown as text, never as HTML.
	do(t, ctx, "open file", chromedp.Navigate(srv.URL+"/skills/team/hostile/-/files/references/notes.md"), chromedp.WaitReady(chromedp.CSS("body")))
	type fileState struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Scripts int    `json:"scripts"`
	}
	fs := run(t, ctx, "file", chromedp.Evaluate[fileState](`({type: document.contentType, text: document.body.innerText, scripts: document.scripts.length})`))
	if fs.Type != "text/plain" || !strings.Contains(fs.Text, "<script>alert('file')</script>") || fs.Scripts != 0 {
		t.Errorf("file view: %+v", fs)
	}

	// The sources page.
	do(t, ctx, "open sources", chromedp.Navigate(srv.URL+"/sources"), chromedp.WaitVisible(chromedp.CSS("#src-team")))
	src := run(t, ctx, "sources", chromedp.Text(chromedp.CSS("main")))
	for _, want := range []string{"team", "name-mismatch", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "accepted"} {
		if !strings.Contains(src, want) {
			t.Errorf("sources page lacks %q", want)
		}
	}

	// On a phone, no page is wider than the screen.
	do(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range []string{"/", "/?q=deploy", "/skills/team/hostile", "/skills/team/deploy-checklist", "/sources"} {
		do(t, ctx, "open "+p, chromedp.Navigate(srv.URL+p), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if w := run(t, ctx, "width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); w[0] > w[1] {
			t.Errorf("%s on a phone: %dpx wide in a %dpx viewport", p, w[0], w[1])
		}
	}

	if *update {
		do(t, ctx, "desktop viewport", chromedp.EmulateViewport(1280, 900))
		screenshots(t, ctx)
	}
}

// screenshots rewrites docs/screenshots from the example skills, the
// catalog as a new user sees it.
func screenshots(t *testing.T, ctx context.Context) {
	examples, err := filepath.Abs(filepath.Join("..", "examples", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	reg := registry.New(registry.Options{Now: c.Now})
	reg.SetSources([]catalog.Source{{Name: "examples", Kind: catalog.KindDir, Dir: examples}})
	if err := reg.SyncNow(context.Background(), "examples"); err != nil {
		t.Fatal(err)
	}
	c.Add(3 * time.Minute)
	h, err := New(Options{Catalog: reg, States: reg.States, Now: c.Now, MCPURL: "https://skills.example.com/mcp",
		Deliveries: func(int) []Delivery {
			return []Delivery{
				{ID: "9b1e7a40-cf0f-11f0-8a2b-6d3e1c0a4b21", Event: "push", Repo: "acme/skills", Outcome: "accepted", At: c.Now().Add(-3 * time.Minute), Sources: []string{"examples"}},
				{ID: "5f02c3d0-cf0e-11f0-9e55-0b1d2a3c4e5f", Event: "release", Action: "published", Repo: "acme/skills", Outcome: "accepted", At: c.Now().Add(-26 * time.Hour), Sources: []string{"examples"}},
				{ID: "0c4d8e12-cf0d-11f0-8f1a-2b3c4d5e6f70", Event: "ping", Repo: "acme/skills", Outcome: "ping", At: c.Now().Add(-50 * time.Hour)},
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newEcho(h))
	defer srv.Close()
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, shot := range []struct {
		name, path, ready string
		full              bool
	}{
		{"catalog.png", "/", "main h1", true},
		{"skill.png", "/skills/examples/incident-response", "article.markdown", false},
		{"sources.png", "/sources", "#src-examples", true},
	} {
		do(t, ctx, shot.name, chromedp.Navigate(srv.URL+shot.path), chromedp.WaitVisible(chromedp.CSS(shot.ready)))
		capture := chromedp.CaptureScreenshot()
		if shot.full {
			capture = chromedp.FullScreenshot(100) // 100: PNG
		}
		png := run(t, ctx, shot.name, capture)
		if err := os.WriteFile(filepath.Join(screenshotDir, shot.name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Join(screenshotDir, shot.name), len(png))
	}
}

// TestBrowserSignIn signs people in with the loopback provider in
// headless Chromium, end to end: the catalog on http://localhost, the
// provider on http://127.0.0.1, so every hop between them is cross-site
// as with a real provider. A page asks for a session, the browser lands
// on the provider's form, the person signs in and is back on that page
// with their sources; the session cookie is out of the page's reach;
// signing out goes through the provider's end_session and back; the next
// person sees only theirs.
func TestBrowserSignIn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	s := newSSO(t, base, nil)
	srv := httptest.NewUnstartedServer(s.e)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	provider, err := url.Parse(s.p.Issuer())
	if err != nil {
		t.Fatal(err)
	}

	ctx := newBrowser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatalf("install CSP recorder: %v", err)
	}
	// follow clicks sel and waits until the navigation it starts has
	// loaded, whatever redirects lead there.
	follow := func(what, sel string) {
		t.Helper()
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	here := func(what string) *url.URL {
		t.Helper()
		u, err := url.Parse(run(t, ctx, what, chromedp.Location()))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	signInAt := func(user, password string) {
		t.Helper()
		if u := here("at the provider"); u.Host != provider.Host {
			t.Fatalf("expected the provider's login form, at %s", u)
		}
		do(t, ctx, "fill the provider's form as "+user,
			chromedp.WaitVisible(chromedp.CSS("#username")),
			chromedp.SendKeys(chromedp.CSS("#username"), user),
			chromedp.SendKeys(chromedp.CSS("#password"), password))
		follow("sign in as "+user, "#submit")
	}

	// A page that needs a session sends the browser to the provider.
	do(t, ctx, "open a skill", chromedp.Navigate(base+"/skills/secret/payroll-export"))
	signInAt("bob@example.com", "pw-bob")
	if u := here("after sign-in"); u.String() != base+"/skills/secret/payroll-export" {
		t.Fatalf("after signing in the browser is at %s", u)
	}
	type state struct {
		Title   string   `json:"title"`
		Who     string   `json:"who"`
		Cookies string   `json:"cookies"`
		CSP     []string `json:"csp"`
	}
	st := run(t, ctx, "signed-in page", chromedp.Evaluate[state](`({
		title: document.title,
		who: (document.querySelector('form.who span') || {}).textContent || '',
		cookies: document.cookie,
		csp: window.__csp,
	})`))
	if st.Title != "payroll-export · skillreg" || st.Who != "bob@example.com" {
		t.Errorf("signed-in page: %+v", st)
	}
	if st.Cookies != "" {
		t.Errorf("the page can read cookies: %q", st.Cookies)
	}
	if len(st.CSP) != 0 {
		t.Errorf("CSP violations: %q", st.CSP)
	}

	// Sign out: the form's POST, the provider's end_session, back to the
	// signed-out page. The CSP's form-action lets the redirect through.
	follow("sign out", "form.who button")
	if u := here("after sign-out"); u.String() != base+"/logout" {
		t.Fatalf("after signing out the browser is at %s", u)
	}
	if h := run(t, ctx, "signed-out heading", chromedp.Text(chromedp.CSS("main h1"))); h != "Signed out" {
		t.Errorf("signed-out page says %q", h)
	}

	// The session is gone: the catalog sends the browser to the provider
	// again, and the next person sees only the team source.
	do(t, ctx, "open the catalog", chromedp.Navigate(base+"/"))
	signInAt("alice@example.com", "pw-alice")
	if u := here("after alice signs in"); u.String() != base+"/" {
		t.Fatalf("after alice signs in the browser is at %s", u)
	}
	type catalogState struct {
		Who    string   `json:"who"`
		Skills []string `json:"skills"`
	}
	cs := run(t, ctx, "alice's catalog", chromedp.Evaluate[catalogState](`({
		who: document.querySelector('form.who span').textContent,
		skills: [...document.querySelectorAll('li.skill a.name')].map(a => a.textContent),
	})`))
	if cs.Who != "alice@example.com" || len(cs.Skills) != 4 || slices.Contains(cs.Skills, "payroll-export") {
		t.Errorf("alice's catalog: %+v", cs)
	}
	do(t, ctx, "open the secret skill", chromedp.Navigate(base+"/skills/secret/payroll-export"))
	if h := run(t, ctx, "hidden skill", chromedp.Text(chromedp.CSS("main h1"))); h != "Not found" {
		t.Errorf("alice opened the secret skill: %q", h)
	}
}
