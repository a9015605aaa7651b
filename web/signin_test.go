package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/oidctest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/oidc"
)

// The people of the test provider: bob is an admin (every source), alice
// is on the team (the team source), carol is in no group this catalog
// knows.
var ssoUsers = []oidctest.User{
	{Subject: "u-alice", Email: "alice@example.com", Password: "pw-alice", Groups: []string{"team"}},
	{Subject: "u-bob", Email: "bob@example.com", Password: "pw-bob", Groups: []string{"admins", "team"}},
	{Subject: "u-carol", Email: "carol@example.com", Password: "pw-carol", Groups: []string{"visitors"}},
}

const (
	webClientID     = "skillreg-web"
	webClientSecret = "web-secret-9f2c"
	publicClientID  = "skillreg-web-public"
)

// resolveGroups is the access rule of these tests: admins see every
// source, team sees team, anyone else has no access.
func resolveGroups(c oidc.Claims) (Viewer, bool) {
	switch {
	case slices.Contains(c.Groups, "admins"):
		return Viewer{Name: c.Email, Filter: catalog.Filter{}}, true
	case slices.Contains(c.Groups, "team"):
		return Viewer{Name: c.Email, Filter: catalog.Filter{Only: map[string]bool{"team": true}}}, true
	}
	return Viewer{}, false
}

// ssoFixture is the web catalog signing people in with a real provider
// on loopback, through a real verifier.
type ssoFixture struct {
	*fixture
	p    *oidctest.Provider
	v    *oidc.Verifier
	si   atomic.Pointer[SignIn]
	logs *testkit.Buffer
}

// newSSO serves the catalog at base (its callback is base +
// "/login/callback") with the provider registered for it.
func newSSO(t *testing.T, base string, mod func(*Options)) *ssoFixture {
	t.Helper()
	s := &ssoFixture{logs: &testkit.Buffer{}}
	s.fixture = newFixture(t, defaultSources(), func(o *Options) {
		o.SignIn = func() *SignIn { return s.si.Load() }
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(s.logs, testLogWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
		if mod != nil {
			mod(o)
		}
	})
	s.p = oidctest.Start(t, oidctest.Options{
		Users: ssoUsers,
		Clients: []oidctest.Client{
			{ID: webClientID, Secret: webClientSecret, RedirectURIs: []string{base + "/login/callback"}, PostLogoutRedirectURIs: []string{base + "/logout"}},
			{ID: publicClientID, Public: true, RedirectURIs: []string{base + "/login/callback"}, PostLogoutRedirectURIs: []string{base + "/logout"}},
		},
	})
	v, err := oidc.New(oidc.Config{Issuer: s.p.Issuer(), Audience: base + "/mcp", Logger: slog.New(slog.NewTextHandler(testLogWriter{t}, nil)), Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v.Start(ctx)
	s.v = v
	s.si.Store(&SignIn{
		Provider:              v,
		ClientID:              webClientID,
		ClientSecret:          webClientSecret,
		RedirectURL:           base + "/login/callback",
		PostLogoutRedirectURL: base + "/logout",
		Resolve:               resolveGroups,
	})
	return s
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// attempt is one sign-in started at /login: the provider's authorization
// URL and the flow cookie the browser got.
type attempt struct {
	auth *url.URL
	flow *http.Cookie
}

func cookieNamed(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// start asks /login for a sign-in, as a browser without a session.
func (s *ssoFixture) start(t *testing.T, next string, tls bool) attempt {
	t.Helper()
	res := s.do(t, request{path: "/login?next=" + url.QueryEscape(next), tls: tls})
	if res.StatusCode != http.StatusFound {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("/login: %d %s", res.StatusCode, b)
	}
	u, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	name := flowCookieName
	if tls {
		name = "__Host-" + flowCookieName
	}
	ck := cookieNamed(res, name)
	if ck == nil {
		t.Fatalf("/login set no %s cookie: %v", name, res.Cookies())
	}
	return attempt{auth: u, flow: ck}
}

// login signs user in at the provider and returns the callback URL the
// provider sends the browser to.
func (s *ssoFixture) login(t *testing.T, a attempt, user, password string) *url.URL {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := s.p.Login(ctx, a.auth.String(), user, password)
	if err != nil {
		t.Fatalf("sign in at the provider as %s: %v", user, err)
	}
	return u
}

// callback sends the browser back to the catalog with the flow cookie.
func (s *ssoFixture) callback(t *testing.T, cb *url.URL, flow *http.Cookie, tls bool) (*http.Response, string) {
	t.Helper()
	var cks []*http.Cookie
	if flow != nil {
		cks = []*http.Cookie{flow}
	}
	res := s.do(t, request{path: cb.RequestURI(), cookies: cks, tls: tls})
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// signIn goes through the whole flow and returns the session cookie.
func (s *ssoFixture) signIn(t *testing.T, user, password, next string) *http.Cookie {
	t.Helper()
	a := s.start(t, next, false)
	res, body := s.callback(t, s.login(t, a, user, password), a.flow, false)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != next {
		t.Fatalf("callback for %s: %d %q %s", user, res.StatusCode, res.Header.Get("Location"), body)
	}
	ck := cookieNamed(res, cookieName)
	if ck == nil {
		t.Fatalf("callback set no session cookie")
	}
	return ck
}

func TestSignInWithProvider(t *testing.T) {
	for _, client := range []struct{ name, id, secret string }{
		{"confidential", webClientID, webClientSecret},
		{"public", publicClientID, ""},
	} {
		t.Run(client.name, func(t *testing.T) {
			s := newSSO(t, "http://example.com", nil)
			si := *s.si.Load()
			si.ClientID, si.ClientSecret = client.id, client.secret
			s.si.Store(&si)

			// A page asks for a session; /login sends the browser on to
			// the provider at once, no token field in between.
			const next = "/skills/secret/payroll-export"
			res := s.do(t, request{path: next})
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next="+url.QueryEscape(next) {
				t.Fatalf("page without a session: %d %q", res.StatusCode, res.Header.Get("Location"))
			}
			a := s.start(t, next, false)
			if got := a.auth.Scheme + "://" + a.auth.Host; got != s.p.Issuer() {
				t.Errorf("/login sent the browser to %s, not the provider %s", got, s.p.Issuer())
			}
			q := a.auth.Query()
			f, ok := decodeFlow(a.flow.Value)
			if !ok {
				t.Fatalf("flow cookie %q does not decode", a.flow.Value)
			}
			for k, want := range map[string]string{
				"response_type":         "code",
				"client_id":             client.id,
				"redirect_uri":          "http://example.com/login/callback",
				"state":                 f.State,
				"nonce":                 f.Nonce,
				"code_challenge_method": "S256",
				"code_challenge":        oauth2.S256ChallengeFromVerifier(f.Verifier),
			} {
				if got := q.Get(k); got != want {
					t.Errorf("authorization request %s=%q, want %q", k, got, want)
				}
			}
			if sc := strings.Fields(q.Get("scope")); !slices.Contains(sc, "openid") || !slices.Contains(sc, "email") {
				t.Errorf("scope %q", q.Get("scope"))
			}
			if f.Next != next || f.State == f.Nonce {
				t.Errorf("flow %+v", f)
			}
			if !a.flow.HttpOnly || a.flow.SameSite != http.SameSiteLaxMode || a.flow.Path != "/" || a.flow.Secure || a.flow.MaxAge != int(flowTTL/time.Second) {
				t.Errorf("flow cookie flags: %+v", a.flow)
			}
			if strings.Contains(a.auth.RawQuery, f.Verifier) {
				t.Error("the PKCE verifier left in the authorization request")
			}

			// Back from the provider: a session, the flow cookie gone,
			// and on to where the person was going.
			cb := s.login(t, a, "bob@example.com", "pw-bob")
			if cb.Host != "example.com" || cb.Path != "/login/callback" || cb.Query().Get("state") != f.State || cb.Query().Get("code") == "" {
				t.Fatalf("provider redirected to %s", cb)
			}
			res, body := s.callback(t, cb, a.flow, false)
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != next {
				t.Fatalf("callback: %d %q %s", res.StatusCode, res.Header.Get("Location"), body)
			}
			ck := cookieNamed(res, cookieName)
			if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Secure || ck.Path != "/" || ck.MaxAge != int((12*time.Hour)/time.Second) || len(ck.Value) < 43 {
				t.Fatalf("session cookie: %+v", ck)
			}
			if gone := cookieNamed(res, flowCookieName); gone == nil || gone.MaxAge >= 0 {
				t.Errorf("the flow cookie was not removed: %+v", gone)
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("callback Cache-Control %q", cc)
			}

			res, body = s.get(t, next, ck)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s with the session: %d", next, res.StatusCode)
			}
			mustContain(t, "signed-in page", body, "payroll-export", `<span title="Signed in as bob@example.com">bob@example.com</span>`, `<form class="who" method="post" action="/logout">`)

			// The same callback again: the flow cookie was spent, and the
			// code too (a browser that kept the cookie is refused by the
			// provider).
			if res, _ := s.callback(t, cb, nil, false); res.StatusCode != http.StatusBadRequest || cookieNamed(res, cookieName) != nil {
				t.Errorf("callback replayed without the flow cookie: %d", res.StatusCode)
			}
			if res, _ := s.callback(t, cb, a.flow, false); res.StatusCode != http.StatusUnauthorized || cookieNamed(res, cookieName) != nil {
				t.Errorf("callback replayed with the spent code: %d", res.StatusCode)
			}

			// Neither the code, the session id nor any token reaches the log.
			logs := s.logs.String()
			for what, secret := range map[string]string{"code": cb.Query().Get("code"), "session": ck.Value, "verifier": f.Verifier, "client secret": webClientSecret} {
				if strings.Contains(logs, secret) {
					t.Errorf("the log holds the %s", what)
				}
			}
			if strings.Contains(logs, "eyJ") {
				t.Error("the log holds something that looks like a JWT")
			}
		})
	}
}

// Each person sees their rule's sources: the session carries the viewer
// Resolve made from the ID token's groups.
func TestSignInGroupsDecideWhatIsSeen(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	alice := s.signIn(t, "alice@example.com", "pw-alice", "/")
	bob := s.signIn(t, "u-bob", "pw-bob", "/")
	_, body := s.get(t, "/", alice)
	mustContain(t, "alice's catalog", body, "deploy-checklist", `<span class="count">4</span>`, "alice@example.com")
	mustNotContain(t, "alice's catalog", body, "payroll")
	if res, _ := s.get(t, "/skills/secret/payroll-export", alice); res.StatusCode != http.StatusNotFound {
		t.Errorf("alice opened the secret skill: %d", res.StatusCode)
	}
	_, body = s.get(t, "/", bob)
	mustContain(t, "bob's catalog", body, "payroll-export", `<span class="count">5</span>`)

	// carol signs in at the provider, but no rule gives her anything.
	a := s.start(t, "/", false)
	res, body := s.callback(t, s.login(t, a, "carol@example.com", "pw-carol"), a.flow, false)
	if res.StatusCode != http.StatusForbidden || cookieNamed(res, cookieName) != nil {
		t.Errorf("carol: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	mustContain(t, "no access page", body, "No access")
}

// Everything that could make a callback start someone else's session, or
// a session from a token the catalog did not ask for, is refused.
func TestSignInCallbackRefusals(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	edit := func(c *http.Cookie, fn func(*flow)) *http.Cookie {
		f, ok := decodeFlow(c.Value)
		if !ok {
			t.Fatalf("flow cookie %q", c.Value)
		}
		fn(&f)
		cc := *c
		cc.Value = encodeFlow(f)
		return &cc
	}
	other := strings.Repeat("Z", 43)
	for _, tc := range []struct {
		name string
		// cookie makes the cookie the callback carries from the
		// attempt's (nil: none).
		cookie func(attempt) *http.Cookie
		query  func(url.Values)
		code   int
		page   string
	}{
		{name: "no flow cookie", cookie: func(attempt) *http.Cookie { return nil }, code: http.StatusBadRequest, page: "expired or was started in another browser"},
		{name: "another attempt's cookie", cookie: func(a attempt) *http.Cookie { return edit(a.flow, func(f *flow) { f.State = other }) }, code: http.StatusBadRequest, page: "not started here"},
		{name: "state missing", query: func(q url.Values) { q.Del("state") }, code: http.StatusBadRequest, page: "not started here"},
		{name: "nonce not the ID token's", cookie: func(a attempt) *http.Cookie { return edit(a.flow, func(f *flow) { f.Nonce = other }) }, code: http.StatusUnauthorized, page: "was not accepted"},
		{name: "verifier not the challenge's", cookie: func(a attempt) *http.Cookie { return edit(a.flow, func(f *flow) { f.Verifier = other }) }, code: http.StatusUnauthorized, page: "was not accepted"},
		{name: "forged code", query: func(q url.Values) { q.Set("code", "forged") }, code: http.StatusUnauthorized, page: "was not accepted"},
		{name: "no code", query: func(q url.Values) { q.Del("code") }, code: http.StatusBadRequest, page: "no usable code"},
		{name: "another issuer (RFC 9207)", query: func(q url.Values) { q.Set("iss", "https://idp.evil.example") }, code: http.StatusBadRequest, page: "not started here"},
		{name: "provider error", query: func(q url.Values) { q.Del("code"); q.Set("error", "access_denied") }, code: http.StatusUnauthorized, page: "did not sign you in (access_denied)"},
		{name: "hostile error text", query: func(q url.Values) { q.Del("code"); q.Set("error", "<script>x</script>") }, code: http.StatusUnauthorized, page: "did not sign you in (unknown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := s.start(t, "/sources", false)
			cb := s.login(t, a, "bob@example.com", "pw-bob")
			ck := a.flow
			if tc.cookie != nil {
				ck = tc.cookie(a)
			}
			if tc.query != nil {
				q := cb.Query()
				tc.query(q)
				cb.RawQuery = q.Encode()
			}
			req := request{path: cb.RequestURI()}
			if ck != nil {
				req.cookies = []*http.Cookie{ck}
			}
			res := s.do(t, req)
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.code || cookieNamed(res, cookieName) != nil {
				t.Fatalf("%d (want %d), cookies %v: %s", res.StatusCode, tc.code, res.Cookies(), b)
			}
			mustContain(t, tc.name, string(b), tc.page, `href="/login?next=`)
			assertInert(t, tc.name, string(b))
			if gone := cookieNamed(res, flowCookieName); gone == nil || gone.MaxAge >= 0 {
				t.Errorf("the flow cookie stays after a refused callback: %+v", gone)
			}
		})
	}
}

// A wrong code or ID token spends the address's failed-attempt budget,
// like a wrong token on the token form; then even a good sign-in waits.
func TestSignInFailuresAreRateLimited(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	const addr = "203.0.113.4:1"
	try := func(code string) int {
		a := s.start(t, "/", false)
		cb := s.login(t, a, "alice@example.com", "pw-alice")
		if code != "" {
			q := cb.Query()
			q.Set("code", code)
			cb.RawQuery = q.Encode()
		}
		return s.do(t, request{path: cb.RequestURI(), cookies: []*http.Cookie{a.flow}, remote: addr}).StatusCode
	}
	for i := range loginBurst {
		if got := try("forged"); got != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, got)
		}
	}
	if got := try(""); got != http.StatusTooManyRequests {
		t.Errorf("good sign-in after %d failures: %d, want 429", loginBurst, got)
	}
	s.clock.Add(loginRefill)
	if got := try(""); got != http.StatusSeeOther {
		t.Errorf("after a refill: %d", got)
	}
}

func TestSignInFlowExpires(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	a := s.start(t, "/", false)
	cb := s.login(t, a, "alice@example.com", "pw-alice")
	s.clock.Add(flowTTL)
	if res, body := s.callback(t, cb, a.flow, false); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "expired") {
		t.Errorf("callback after %s: %d", flowTTL, res.StatusCode)
	}
}

// Over https the flow cookie has the __Host- prefix (no sibling host can
// plant one) and every cookie is Secure.
func TestSignInOverTLS(t *testing.T) {
	s := newSSO(t, "https://example.com", nil)
	a := s.start(t, "/", true)
	if !a.flow.Secure || a.flow.Name != "__Host-"+flowCookieName || a.flow.Path != "/" || a.flow.Domain != "" {
		t.Errorf("flow cookie over TLS: %+v", a.flow)
	}
	if q := a.auth.Query(); q.Get("redirect_uri") != "https://example.com/login/callback" {
		t.Errorf("redirect_uri %q", q.Get("redirect_uri"))
	}
	cb := s.login(t, a, "alice@example.com", "pw-alice")
	// The same cookie without its prefix (as a sibling host could set
	// it) is not read.
	plain := *a.flow
	plain.Name = flowCookieName
	if res, _ := s.callback(t, cb, &plain, true); res.StatusCode != http.StatusBadRequest {
		t.Errorf("unprefixed flow cookie over TLS: %d", res.StatusCode)
	}
	a = s.start(t, "/", true)
	res, body := s.callback(t, s.login(t, a, "alice@example.com", "pw-alice"), a.flow, true)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback over TLS: %d %s", res.StatusCode, body)
	}
	if ck := cookieNamed(res, cookieName); ck == nil || !ck.Secure || ck.SameSite != http.SameSiteLaxMode {
		t.Errorf("session cookie over TLS: %+v", ck)
	}
}

// Signing out ends the session here, then at the provider, which sends
// the browser back to the signed-out page.
func TestSignOutAtProvider(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	ck := s.signIn(t, "alice@example.com", "pw-alice", "/")

	// The pages let the sign-out form's redirect reach the provider.
	res, _ := s.get(t, "/", ck)
	want := strings.Replace(ContentSecurityPolicy, "form-action 'self'", "form-action 'self' "+s.p.Issuer(), 1)
	if got := res.Header.Get("Content-Security-Policy"); got != want {
		t.Errorf("CSP %q, want %q", got, want)
	}

	res = s.do(t, request{method: http.MethodPost, path: "/logout", cookies: []*http.Cookie{ck}, header: map[string]string{"Origin": "http://example.com"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	end, err := url.Parse(res.Header.Get("Location"))
	if err != nil || end.Scheme+"://"+end.Host != s.p.Issuer() {
		t.Fatalf("logout went to %q", res.Header.Get("Location"))
	}
	if q := end.Query(); q.Get("client_id") != webClientID || q.Get("post_logout_redirect_uri") != "http://example.com/logout" || q.Has("id_token_hint") {
		t.Errorf("end_session request %s", end)
	}
	if c := cookieNamed(res, cookieName); c == nil || c.MaxAge >= 0 {
		t.Errorf("logout left the session cookie: %+v", c)
	}
	if res := s.do(t, request{path: "/", cookies: []*http.Cookie{ck}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("session survived logout: %d", res.StatusCode)
	}

	// The provider accepts the request and sends the browser back.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	back, err := hc.Get(end.String())
	if err != nil {
		t.Fatal(err)
	}
	back.Body.Close()
	if back.StatusCode/100 != 3 || back.Header.Get("Location") != "http://example.com/logout" {
		t.Fatalf("provider's end_session answered %d %q", back.StatusCode, back.Header.Get("Location"))
	}
	res, body := s.get(t, "/logout")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("signed-out page: %d", res.StatusCode)
	}
	mustContain(t, "signed-out page", body, "Signed out", `href="/login"`)
	mustNotContain(t, "signed-out page", body, `action="/logout"`)

	// A provider without end_session_endpoint: the session ends here and
	// the browser lands on the signed-out page directly.
	ck = s.signIn(t, "alice@example.com", "pw-alice", "/")
	si := *s.si.Load()
	si.Provider = noEndSession{si.Provider}
	s.si.Store(&si)
	res = s.do(t, request{method: http.MethodPost, path: "/logout", cookies: []*http.Cookie{ck}, header: map[string]string{"Origin": "http://example.com"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/logout" {
		t.Errorf("logout without end_session: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := s.get(t, "/"); res.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Errorf("CSP still names the old end_session origin: %q", res.Header.Get("Content-Security-Policy"))
	}
}

// noEndSession is the real provider's metadata without an
// end_session_endpoint, as some providers publish it.
type noEndSession struct{ Provider }

func (p noEndSession) Metadata(ctx context.Context) (oidc.ProviderMetadata, error) {
	md, err := p.Provider.Metadata(ctx)
	md.EndSessionEndpoint = ""
	return md, err
}

// With the provider down and nothing cached, /login says so (503) and
// offers to try again; once it is back, sign-in works.
func TestSignInWhileProviderIsDown(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	s.p.Stop(t)
	// A verifier that has never reached the provider.
	v, err := oidc.New(oidc.Config{Issuer: s.p.Issuer(), Audience: "http://example.com/mcp", Logger: slog.New(slog.NewTextHandler(testLogWriter{t}, nil)), Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	si := *s.si.Load()
	si.Provider = v
	s.si.Store(&si)
	res := s.do(t, request{path: "/login?next=/sources"})
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusServiceUnavailable || cookieNamed(res, flowCookieName) != nil {
		t.Fatalf("/login with the provider down: %d", res.StatusCode)
	}
	mustContain(t, "provider down", string(b), "cannot be reached", `href="/login?next=%2fsources"`)
	s.p.Restart(t)
	// The verifier asks a provider that failed again after a minute
	// (its clock is the fixture's).
	s.clock.Add(time.Minute)
	s.signIn(t, "alice@example.com", "pw-alice", "/sources")
}

// With the provider signing people in, the token form is gone: a posted
// token is not looked at.
func TestSignInReplacesTokenForm(t *testing.T) {
	var asked atomic.Int32
	s := newSSO(t, "http://example.com", func(o *Options) {
		o.Authenticate = func(context.Context, string) (Viewer, bool) {
			asked.Add(1)
			return Viewer{Name: "token"}, true
		}
	})
	res := s.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {"tok-all"}}, header: map[string]string{"Origin": "http://example.com"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" || cookieNamed(res, cookieName) != nil || asked.Load() != 0 {
		t.Errorf("token posted under SSO: %d %q, asked %d", res.StatusCode, res.Header.Get("Location"), asked.Load())
	}
	// A reload that turns the provider off brings the token form back.
	s.si.Store(nil)
	s.h.o.AuthRequired = true
	_, body := s.get(t, "/login")
	mustContain(t, "token form", body, `type="password" name="token"`)
}

func TestSignInMisconfigured(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	si := *s.si.Load()
	si.RedirectURL = "/login/callback"
	s.si.Store(&si)
	res := s.do(t, request{path: "/login"})
	if res.StatusCode != http.StatusInternalServerError || !strings.Contains(s.logs.String(), "RedirectURL") {
		t.Errorf("relative redirect URL: %d", res.StatusCode)
	}
}

// A provider whose discovery document lacks an endpoint the flow needs is
// a setup error, said in the log, not a redirect to nowhere.
func TestSignInProviderWithoutEndpoints(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	si := *s.si.Load()
	si.Provider = withoutAuthEndpoint{si.Provider}
	s.si.Store(&si)
	res := s.do(t, request{path: "/login"})
	if res.StatusCode != http.StatusInternalServerError || res.Header.Get("Location") != "" || !strings.Contains(s.logs.String(), "authorization_endpoint") {
		t.Errorf("/login without an authorization_endpoint: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

type withoutAuthEndpoint struct{ Provider }

func (p withoutAuthEndpoint) Metadata(ctx context.Context) (oidc.ProviderMetadata, error) {
	md, err := p.Provider.Metadata(ctx)
	md.AuthorizationEndpoint = ""
	return md, err
}

// The provider going down between its login form and the code exchange
// is the provider's failure (502), not the person's: nothing is counted
// against their address.
func TestSignInProviderDownAtCallback(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	const addr = "192.0.2.77:1"
	for range loginBurst + 1 {
		a := s.start(t, "/", false)
		cb := s.login(t, a, "alice@example.com", "pw-alice")
		s.p.Stop(t)
		res := s.do(t, request{path: cb.RequestURI(), cookies: []*http.Cookie{a.flow}, remote: addr})
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusBadGateway || cookieNamed(res, cookieName) != nil {
			t.Fatalf("callback with the provider down: %d", res.StatusCode)
		}
		mustContain(t, "provider down at the callback", string(b), "did not answer", `href="/login?next=%2f"`)
		s.p.Restart(t)
	}
	if !s.h.o.Limiter.Allow("192.0.2.77") {
		t.Error("the provider's outage was counted against the person's address")
	}
}

// Signing in never hides what a visitor without a session sees: the
// public sources join the viewer's own.
func TestSignedInViewersSeePublicSources(t *testing.T) {
	s := newSSO(t, "http://example.com", func(o *Options) {
		o.Public = func() map[string]bool { return map[string]bool{"secret": true} }
	})
	_, body := s.get(t, "/")
	mustContain(t, "visitor", body, "payroll-export", `<a class="who" href="/login">Sign in</a>`)
	mustNotContain(t, "visitor", body, "deploy-checklist")
	alice := s.signIn(t, "alice@example.com", "pw-alice", "/")
	_, body = s.get(t, "/", alice)
	mustContain(t, "alice with a public source", body, "payroll-export", "deploy-checklist", `<span class="count">5</span>`)
}

// An answer that names its issuer (RFC 9207) is taken when it names this
// provider.
func TestSignInCallbackWithIssuer(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	a := s.start(t, "/", false)
	cb := s.login(t, a, "alice@example.com", "pw-alice")
	q := cb.Query()
	q.Set("iss", s.p.Issuer())
	cb.RawQuery = q.Encode()
	if res, body := s.callback(t, cb, a.flow, false); res.StatusCode != http.StatusSeeOther || cookieNamed(res, cookieName) == nil {
		t.Errorf("callback naming this issuer: %d %s", res.StatusCode, body)
	}
}

// A reload that lands while someone is signing in (between /login and the
// session the callback starts: the token request takes a while) ends every
// session, and must end that one too: its viewer was resolved by the
// replaced configuration's rules, which may no longer give that person
// anything.
func TestSignInDuringReloadStartsNoStaleSession(t *testing.T) {
	s := newSSO(t, "http://example.com", nil)
	si := *s.si.Load()
	si.Resolve = func(c oidc.Claims) (Viewer, bool) {
		// The reload happens here: the daemon swaps the configuration and
		// ends every session (ResetSessions) while this callback, holding
		// the old rules, is on its way to starting one.
		s.h.ResetSessions()
		return resolveGroups(c)
	}
	s.si.Store(&si)
	a := s.start(t, "/", false)
	res, _ := s.callback(t, s.login(t, a, "bob@example.com", "pw-bob"), a.flow, false)
	if ck := cookieNamed(res, cookieName); ck != nil && ck.MaxAge > 0 {
		if res, _ := s.get(t, "/", ck); res.StatusCode == http.StatusOK {
			t.Fatal("a session resolved by the replaced configuration outlived the reload's reset")
		}
	}
	if n := s.h.sessions.len(); n != 0 {
		t.Errorf("%d sessions after the reset", n)
	}
}
