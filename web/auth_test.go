package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/testkit"
)

func TestLoginLogoutAndCookie(t *testing.T) {
	f := newFixture(t, defaultSources(), authOptions)

	// Every page asks for a session first, remembering where it was.
	for _, p := range []string{"/", "/skills/team/hostile", "/skills/team/hostile/-/files/SKILL.md", "/sources", "/skills/secret/payroll-export"} {
		res := f.do(t, request{path: p})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next="+url.QueryEscape(p) {
			t.Errorf("%s without a session: %d %q", p, res.StatusCode, res.Header.Get("Location"))
		}
	}
	res, body := f.get(t, "/login?next=%2Fsources")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login page: %d", res.StatusCode)
	}
	mustContain(t, "login page", body, `<form method="post" action="/login">`, `<input type="hidden" name="next" value="/sources">`, `type="password" name="token"`)
	mustNotContain(t, "login page", body, `action="/logout"`, "team-bot", `role="search"`)

	post := func(form url.Values, hdr map[string]string, tls bool) *http.Response {
		if hdr == nil {
			hdr = map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}
		}
		return f.do(t, request{method: http.MethodPost, path: "/login", form: form, header: hdr, tls: tls})
	}
	if res := post(url.Values{"token": {"wrong"}}, nil, false); res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Errorf("wrong token: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	if res := post(url.Values{"token": {""}}, nil, false); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("empty token: %d", res.StatusCode)
	}

	res = post(url.Values{"token": {"tok-team"}, "next": {"/sources"}}, nil, false)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/sources" {
		t.Fatalf("login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == cookieName {
			ck = c
		}
	}
	if ck == nil {
		t.Fatal("no session cookie")
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure || ck.MaxAge != int((12*time.Hour)/time.Second) {
		t.Errorf("cookie flags: %+v", ck)
	}
	if strings.Contains(ck.Value, "tok-team") || len(ck.Value) < 43 {
		t.Errorf("cookie value %q is not an opaque random id", ck.Value)
	}
	if raw := res.Header.Get("Set-Cookie"); !strings.Contains(raw, "HttpOnly") || !strings.Contains(raw, "SameSite=Strict") {
		t.Errorf("Set-Cookie %q", raw)
	}

	// Over TLS the cookie is Secure.
	res = post(url.Values{"token": {"tok-team"}}, nil, true)
	if c := res.Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("cookie over TLS: %+v", c)
	}

	// The session opens pages and names the viewer.
	res, body = f.get(t, "/", ck)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("with session: %d", res.StatusCode)
	}
	mustContain(t, "signed in", body, `<span title="Signed in as team-bot">team-bot</span>`, `<form class="who" method="post" action="/logout">`)
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q on a per-viewer page", cc)
	}
	// Already signed in: /login goes on.
	if res := f.do(t, request{path: "/login?next=/sources", cookies: []*http.Cookie{ck}}); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/sources" {
		t.Errorf("login page with a session: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// A forged cookie is no session.
	if res := f.do(t, request{path: "/", cookies: []*http.Cookie{{Name: cookieName, Value: "tok-team"}}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("forged cookie: %d", res.StatusCode)
	}

	// Logout asks first (GET), then ends the session (POST).
	if res, body := f.get(t, "/logout", ck); res.StatusCode != http.StatusOK || !strings.Contains(body, `<form method="post" action="/logout">`) {
		t.Errorf("logout page: %d", res.StatusCode)
	}
	res = f.do(t, request{method: http.MethodPost, path: "/logout", cookies: []*http.Cookie{ck}, header: map[string]string{"Origin": "http://example.com"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Errorf("logout: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if c := res.Cookies(); len(c) != 1 || c[0].MaxAge >= 0 || c[0].Value != "" {
		t.Errorf("logout cookie: %+v", c)
	}
	if res := f.do(t, request{path: "/", cookies: []*http.Cookie{ck}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("session survived logout: %d", res.StatusCode)
	}
}

func TestLoginRefusesCrossOriginAndForeignRedirects(t *testing.T) {
	f := newFixture(t, defaultSources(), authOptions)
	for name, hdr := range map[string]map[string]string{
		"foreign origin":    {"Origin": "http://evil.example"},
		"cross-site fetch":  {"Sec-Fetch-Site": "cross-site"},
		"same-site subhost": {"Sec-Fetch-Site": "same-site", "Origin": "http://evil.example.com"},
	} {
		res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {"tok-all"}}, header: hdr})
		if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
			t.Errorf("%s: %d", name, res.StatusCode)
		}
		res = f.do(t, request{method: http.MethodPost, path: "/logout", header: hdr})
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("logout, %s: %d", name, res.StatusCode)
		}
	}
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "/login", "x"} {
		res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {"tok-all"}, "next": {next}},
			header: map[string]string{"Origin": "http://example.com"}})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Errorf("next=%q: %d %q", next, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

func TestSessionExpiryAndReset(t *testing.T) {
	f := newFixture(t, defaultSources(), authOptions)
	ck := f.login(t, "tok-all")
	f.clock.Add(12*time.Hour - time.Second)
	if res := f.do(t, request{path: "/", cookies: []*http.Cookie{ck}}); res.StatusCode != http.StatusOK {
		t.Fatalf("session expired early: %d", res.StatusCode)
	}
	f.clock.Add(time.Second)
	if res := f.do(t, request{path: "/", cookies: []*http.Cookie{ck}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("session outlived its TTL: %d", res.StatusCode)
	}
	ck = f.login(t, "tok-all")
	f.h.ResetSessions()
	if res := f.do(t, request{path: "/", cookies: []*http.Cookie{ck}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("session survived ResetSessions: %d", res.StatusCode)
	}
}

func TestSessionStoreIsBounded(t *testing.T) {
	s := newSessionStore(3, time.Hour)
	now := time.Unix(0, 0)
	var ids []string
	for i := range 5 {
		id, err := s.create(Viewer{Name: string(rune('a' + i))}, now.Add(time.Duration(i)*time.Second), s.generation())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if s.len() != 3 {
		t.Fatalf("store holds %d sessions, bound 3", s.len())
	}
	// The oldest went first.
	for i, id := range ids {
		_, ok := s.lookup(id, now.Add(10*time.Second))
		if ok != (i >= 2) {
			t.Errorf("session %d present=%v", i, ok)
		}
	}
}

func TestFailedLoginsAreRateLimited(t *testing.T) {
	f := newFixture(t, defaultSources(), authOptions)
	try := func(token, remote string) int {
		return f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {token}},
			header: map[string]string{"Origin": "http://example.com"}, remote: remote}).StatusCode
	}
	const a, b = "192.0.2.1:5000", "192.0.2.2:5000"
	for i := range loginBurst {
		if code := try("wrong", a); code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, code)
		}
	}
	// The bucket is empty: even the right token waits, and nothing is checked.
	if code := try("tok-all", a); code != http.StatusTooManyRequests {
		t.Errorf("after %d failures: %d, want 429", loginBurst, code)
	}
	// Another address is not affected; success does not drain the bucket.
	if code := try("tok-all", b); code != http.StatusSeeOther {
		t.Errorf("other address: %d", code)
	}
	// One more attempt after one refill interval.
	f.clock.Add(loginRefill)
	if code := try("wrong", a); code != http.StatusUnauthorized {
		t.Errorf("after refill: %d", code)
	}
	if code := try("wrong", a); code != http.StatusTooManyRequests {
		t.Errorf("second attempt after one refill: %d", code)
	}
}

// A viewer limited to one source sees, searches and opens only it; what
// lies outside answers exactly like what does not exist.
func TestAccessFiltering(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) {
		authOptions(o)
		o.Deliveries = func(int) []Delivery {
			return []Delivery{
				{ID: "d-team", Event: "push", Outcome: "accepted", Sources: []string{"team", "secret"}},
				{ID: "d-secret", Event: "push", Outcome: "accepted", Sources: []string{"secret"}},
				{ID: "d-none", Event: "ping", Outcome: "ignored"},
			}
		}
	})
	team, all := f.login(t, "tok-team"), f.login(t, "tok-all")

	_, body := f.get(t, "/", team)
	mustContain(t, "team catalog", body, "deploy-checklist", `<span class="count">4</span>`)
	mustNotContain(t, "team catalog", body, "payroll", "secret")
	_, body = f.get(t, "/", all)
	mustContain(t, "full catalog", body, "payroll-export", `<span class="count">5</span>`)

	_, body = f.get(t, "/?q=payroll", team)
	mustNotContain(t, "team search", body, "payroll-export")
	_, body = f.get(t, "/?q=payroll", all)
	mustContain(t, "full search", body, "<mark>payroll</mark>-export")

	// Hidden and missing answer byte for byte the same.
	same := [][]string{
		{"/skills/secret/payroll-export", "/skills/nosuch/payroll-export", "/skills/team/payroll-export"},
		{"/skills/secret/payroll-export/-/files/notes.txt", "/skills/nosuch/payroll-export/-/files/notes.txt"},
		{"/sources/secret", "/sources/nosuch"},
	}
	for _, paths := range same {
		var first string
		for i, p := range paths {
			res, body := f.get(t, p, team)
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("%s as team: %d", p, res.StatusCode)
			}
			if i == 0 {
				first = body
			} else if body != first {
				t.Errorf("%s answers differently from %s", p, paths[0])
			}
		}
		if res, _ := f.get(t, paths[0], all); res.StatusCode != http.StatusOK {
			t.Errorf("%s as admin: %d", paths[0], res.StatusCode)
		}
	}

	_, body = f.get(t, "/sources", team)
	mustContain(t, "team sources", body, `id="src-team"`, "d-team")
	mustNotContain(t, "team sources", body, `id="src-secret"`, "/sources/secret", "d-secret", "d-none")
	_, body = f.get(t, "/sources", all)
	mustContain(t, "all sources", body, `id="src-team"`, `id="src-secret"`, "d-team", "d-secret", "d-none")

	// Links from a visible skill into a hidden source stay inert.
	testkit.WriteFiles(t, f.dirs["team"], map[string]string{"deploy-checklist/SKILL.md": teamSkills["deploy-checklist/SKILL.md"] + "\n[pay](../../secret/payroll-export/SKILL.md)\n"})
	if err := f.reg.SyncNow(context.Background(), "team"); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, "/skills/team/deploy-checklist", team)
	mustNotContain(t, "cross-source link", body, "/skills/secret")
}

func TestOpenCatalogNeedsNoLogin(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	for _, p := range []string{"/login", "/logout"} {
		if res := f.do(t, request{path: p}); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Errorf("%s without access control: %d %q", p, res.StatusCode, res.Header.Get("Location"))
		}
	}
	_, body := f.get(t, "/")
	mustNotContain(t, "open catalog", body, `action="/logout"`)
}

// Pages, sessions and the login limiter are used from many requests at
// once; run them together under the race detector.
func TestConcurrentRequests(t *testing.T) {
	f := newFixture(t, defaultSources(), authOptions)
	ck := f.login(t, "tok-team")
	paths := []string{"/", "/?q=deploy", "/skills/team/hostile", "/skills/team/hostile/-/files/references/notes.md", "/sources", "/skills/secret/payroll-export"}
	done := make(chan error)
	for g := range 8 {
		go func() {
			var err error
			for i := range 20 {
				if g%4 == 0 && i%5 == 0 {
					res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {"nope"}}, remote: "198.51.100.7:1"})
					if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusTooManyRequests {
						err = errors.New("failed login answered " + res.Status)
					}
					continue
				}
				p := paths[(g+i)%len(paths)]
				want := http.StatusOK
				if strings.Contains(p, "secret") {
					want = http.StatusNotFound
				}
				if res := f.do(t, request{path: p, cookies: []*http.Cookie{ck}}); res.StatusCode != want {
					err = errors.New(p + " answered " + res.Status)
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// The token form is no different from the provider's sign-in: a reload
// between resolving the token and starting the session (which ends every
// session) ends that one too.
func TestLoginDuringReloadStartsNoStaleSession(t *testing.T) {
	var f *fixture
	f = newFixture(t, defaultSources(), func(o *Options) {
		authOptions(o)
		resolve := o.Authenticate
		o.Authenticate = func(ctx context.Context, token string) (Viewer, bool) {
			v, ok := resolve(ctx, token) // the replaced configuration's answer
			f.h.ResetSessions()          // the reload lands here
			return v, ok
		}
	})
	res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {"tok-all"}},
		header: map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}})
	if ck := cookieNamed(res, cookieName); ck != nil && ck.MaxAge > 0 {
		if res, _ := f.get(t, "/", ck); res.StatusCode == http.StatusOK {
			t.Fatal("a session resolved by the replaced configuration outlived the reload's reset")
		}
	}
	if n := f.h.sessions.len(); n != 0 {
		t.Errorf("%d sessions after the reset", n)
	}
}
