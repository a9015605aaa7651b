package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"github.com/skillreg/skillreg/oidc"
)

// SignIn is how the web catalog signs people in with the organisation's
// OpenID Connect provider: the authorization code flow with PKCE, a state
// and a nonce per attempt, the ID token checked by the verifier.
type SignIn struct {
	// Provider gives the provider's endpoints and checks ID tokens
	// (*oidc.Verifier).
	Provider Provider
	// ClientID and ClientSecret are the web catalog's client at the
	// provider. An empty secret is a public client: PKCE alone.
	ClientID, ClientSecret string
	// RedirectURL is /login/callback's absolute URL, as registered at the
	// provider (the daemon: public_url + "/login/callback").
	RedirectURL string
	// PostLogoutRedirectURL is where the provider sends the browser back
	// after ending its session (the daemon: public_url + "/logout"; it
	// must be registered as a post-logout redirect URI). "" sends none.
	PostLogoutRedirectURL string
	// Scopes are asked for (default: openid, email, profile, and groups
	// when the provider lists it in scopes_supported; "openid" is always
	// added).
	Scopes []string
	// Resolve maps the ID token's claims to a viewer; false refuses the
	// sign-in (the person may not use this catalog).
	Resolve func(oidc.Claims) (Viewer, bool)
	// HTTPClient makes the token request (default: one with a 10 s
	// timeout).
	HTTPClient *http.Client
}

// Provider is what the sign-in needs of the organisation's provider.
// *oidc.Verifier implements it.
type Provider interface {
	Metadata(ctx context.Context) (oidc.ProviderMetadata, error)
	VerifyIDToken(ctx context.Context, raw, clientID, nonce string) (oidc.Claims, error)
}

func (s *SignIn) check() error {
	switch {
	case s.Provider == nil:
		return errors.New("web: SignIn.Provider is required")
	case s.Resolve == nil:
		return errors.New("web: SignIn.Resolve is required")
	case s.ClientID == "":
		return errors.New("web: SignIn.ClientID is required")
	case !strings.HasPrefix(s.RedirectURL, "https://") && !strings.HasPrefix(s.RedirectURL, "http://"):
		return errors.New("web: SignIn.RedirectURL must be an absolute http(s) URL")
	}
	return nil
}

func (s *SignIn) scopes(md oidc.ProviderMetadata) []string {
	out := []string{oidcScopeOpenID}
	in := s.Scopes
	if len(in) == 0 {
		in = []string{"email", "profile"}
		if slices.Contains(md.ScopesSupported, "groups") {
			// Okta, for one, puts groups in the ID token only when asked.
			in = append(in, "groups")
		}
	}
	for _, sc := range in {
		if sc != oidcScopeOpenID {
			out = append(out, sc)
		}
	}
	return out
}

// oauthConfig is the x/oauth2 client for the provider's endpoints.
func (s *SignIn) oauthConfig(md oidc.ProviderMetadata) *oauth2.Config {
	style := oauth2.AuthStyleInHeader // client_secret_basic, the OIDC default
	if s.ClientSecret == "" {
		style = oauth2.AuthStyleInParams // a public client sends its client_id only
	}
	return &oauth2.Config{
		ClientID:     s.ClientID,
		ClientSecret: s.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: md.AuthorizationEndpoint, TokenURL: md.TokenEndpoint, AuthStyle: style},
		RedirectURL:  s.RedirectURL,
		Scopes:       s.scopes(md),
	}
}

// Sign-in bounds.
const (
	oidcScopeOpenID = "openid"
	flowCookieName  = "skillreg_signin"
	// flowTTL is how long a person has at the provider's login page.
	flowTTL = 10 * time.Minute
	// maxFlowCookie bounds the flow cookie read back (a 2 KiB next path,
	// base64url, and three 43-byte values).
	maxFlowCookie = 3 << 10
	// signInTimeout bounds the provider calls one callback makes.
	signInTimeout = 15 * time.Second
	// metadataTimeout bounds waiting for the provider's metadata on /login
	// and /logout.
	metadataTimeout = 5 * time.Second
)

// flow is one sign-in attempt, kept in the browser between /login and
// /login/callback (a cookie, so any replica can finish it): the state
// that binds the callback to this browser, the nonce the ID token must
// carry, the PKCE verifier, and where to go afterwards. A person who
// edits their own flow cookie gains nothing: the code must still come
// from the provider for this verifier and the ID token carry this nonce.
type flow struct {
	State, Nonce, Verifier string
	Expires                int64 // Unix seconds
	Next                   string
}

// encodeFlow is the cookie value: "1." and five dot-separated fields, each
// base64url or decimal.
func encodeFlow(f flow) string {
	return "1." + f.State + "." + f.Nonce + "." + f.Verifier + "." + strconv.FormatInt(f.Expires, 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(f.Next))
}

// randomRE is what newRandom and oauth2.GenerateVerifier make: 32 bytes,
// base64url without padding.
var randomRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// decodeFlow reads a flow cookie back; anything malformed is no flow.
// Next is always a local path (safeNext).
func decodeFlow(s string) (flow, bool) {
	if len(s) > maxFlowCookie {
		return flow{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) != 6 || parts[0] != "1" {
		return flow{}, false
	}
	for _, p := range parts[1:4] {
		if !randomRE.MatchString(p) {
			return flow{}, false
		}
	}
	exp, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil || exp <= 0 || parts[4] != strconv.FormatInt(exp, 10) {
		return flow{}, false
	}
	next, err := base64.RawURLEncoding.Strict().DecodeString(parts[5])
	if err != nil || safeNext(string(next)) != string(next) {
		return flow{}, false
	}
	return flow{State: parts[1], Nonce: parts[2], Verifier: parts[3], Expires: exp, Next: string(next)}, true
}

func newRandom() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// signIn is the running sign-in configuration, or nil when viewers sign
// in with a token (or not at all).
func (h *Handler) signIn() *SignIn {
	if h.o.SignIn == nil {
		return nil
	}
	return h.o.SignIn()
}

// secureRequest reports whether cookies set for r are marked Secure: over
// TLS, or when the operator says a proxy terminates it.
func (h *Handler) secureRequest(r *http.Request) bool { return r.TLS != nil || h.o.SecureCookie }

// flowCookie is the flow cookie's name for r: with the __Host- prefix on
// https, so that no sibling host can plant one (login CSRF by cookie
// tossing) and it is never sent over plain HTTP.
func (h *Handler) flowCookie(r *http.Request) string {
	if h.secureRequest(r) {
		return "__Host-" + flowCookieName
	}
	return flowCookieName
}

// setFlowCookie stores f (or, with f nil, removes the cookie). SameSite=Lax:
// the provider sends the browser back with a cross-site redirect, on which
// a Strict cookie is not sent.
func (h *Handler) setFlowCookie(c echo.Context, f *flow) {
	r := c.Request()
	ck := &http.Cookie{Name: h.flowCookie(r), Path: "/", HttpOnly: true, Secure: h.secureRequest(r), SameSite: http.SameSiteLaxMode}
	if f == nil {
		ck.MaxAge = -1
	} else {
		ck.Value, ck.MaxAge = encodeFlow(*f), int(flowTTL/time.Second)
	}
	http.SetCookie(c.Response(), ck)
}

// setSessionCookie starts the browser's session cookie. Sessions from the
// provider are SameSite=Lax: the first request after the callback arrives
// at the end of a redirect chain that began at the provider, which a
// Strict cookie would miss (and the person would be sent back to sign in,
// forever). Every request that changes something (POST /logout) is
// checked for a cross-origin sender besides.
func (h *Handler) setSessionCookie(c echo.Context, id string, same http.SameSite) {
	r := c.Request()
	http.SetCookie(c.Response(), &http.Cookie{
		Name:     cookieName,
		Value:    id,
		Path:     "/",
		MaxAge:   int(h.o.SessionTTL / time.Second),
		HttpOnly: true,
		Secure:   h.secureRequest(r),
		SameSite: same,
	})
}

// startSignIn sends the browser to the provider's authorization endpoint
// with a fresh state, nonce and PKCE challenge.
func (h *Handler) startSignIn(c echo.Context, si *SignIn, next string) error {
	if err := si.check(); err != nil {
		h.log.Error("sign-in misconfigured", "err", err)
		return h.signInError(c, http.StatusInternalServerError, next, "Sign-in is not set up correctly. The operator's log says why.")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), metadataTimeout)
	defer cancel()
	md, err := si.Provider.Metadata(ctx)
	if err != nil {
		h.log.Warn("sign-in: provider metadata unavailable", "err", err)
		c.Response().Header().Set("Retry-After", "10")
		return h.signInError(c, http.StatusServiceUnavailable, next, "The sign-in provider cannot be reached right now. Try again in a moment.")
	}
	h.noteEndSession(md)
	if err := checkEndpoints(md); err != nil {
		h.log.Error("sign-in: the provider's discovery document will not do", "err", err)
		return h.signInError(c, http.StatusInternalServerError, next, "Sign-in is not set up correctly. The operator's log says why.")
	}
	f := flow{Verifier: oauth2.GenerateVerifier(), Expires: h.o.Now().Add(flowTTL).Unix(), Next: next}
	if f.State, err = newRandom(); err == nil {
		f.Nonce, err = newRandom()
	}
	if err != nil {
		h.log.Error("sign-in: random state", "err", err)
		return h.signInError(c, http.StatusInternalServerError, next, "The sign-in could not be started.")
	}
	h.setFlowCookie(c, &f)
	u := si.oauthConfig(md).AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oauth2.SetAuthURLParam("nonce", f.Nonce))
	return c.Redirect(http.StatusFound, u)
}

// checkEndpoints says whether the provider publishes the two endpoints a
// sign-in needs (discovery makes them optional).
func checkEndpoints(md oidc.ProviderMetadata) error {
	if formOrigin(md.AuthorizationEndpoint) == "" {
		return errors.New("no http(s) authorization_endpoint")
	}
	if formOrigin(md.TokenEndpoint) == "" {
		return errors.New("no http(s) token_endpoint")
	}
	return nil
}

// errorCodeRE is what an OAuth error code may look like to be shown or
// logged (RFC 6749 allows %x20-21 / %x23-5B / %x5D-7E; a sane provider
// sends snake_case).
var errorCodeRE = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// callback finishes a sign-in: the state against the flow cookie, the
// code exchanged with the PKCE verifier, the ID token verified with the
// nonce, then the viewer resolved and the session started.
func (h *Handler) callback(c echo.Context) error {
	r := c.Request()
	c.Response().Header().Set("Cache-Control", "no-store")
	// Read before the sign-in configuration: a reload after this point
	// (which ends every session) refuses the session this callback would
	// start with the replaced configuration's rules.
	gen := h.sessions.generation()
	si := h.signIn()
	if si == nil {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	if err := si.check(); err != nil {
		h.log.Error("sign-in misconfigured", "err", err)
		return h.signInError(c, http.StatusInternalServerError, "/", "Sign-in is not set up correctly. The operator's log says why.")
	}
	addr := h.remoteAddr(c)
	ck, err := r.Cookie(h.flowCookie(r))
	f, ok := flow{}, false
	if err == nil {
		f, ok = decodeFlow(ck.Value)
	}
	h.setFlowCookie(c, nil) // one callback per attempt, whatever it brings
	q := r.URL.Query()
	if !ok || f.Expires <= h.o.Now().Unix() {
		h.log.Warn("sign-in callback without a current attempt", "remote", addr, "cookie", err == nil)
		return h.signInError(c, http.StatusBadRequest, "/", "This sign-in has expired or was started in another browser. Sign in again.")
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		h.log.Warn("sign-in callback with a foreign state", "remote", addr)
		return h.signInError(c, http.StatusBadRequest, f.Next, "This sign-in was not started here, or another one replaced it. Sign in again.")
	}
	if e := q.Get("error"); e != "" {
		if !errorCodeRE.MatchString(e) {
			e = "unknown"
		}
		h.log.Info("sign-in refused by the provider", "remote", addr, "error", e)
		return h.signInError(c, http.StatusUnauthorized, f.Next, "The provider did not sign you in ("+e+").")
	}
	code := q.Get("code")
	if code == "" || len(code) > maxTokenLen {
		return h.signInError(c, http.StatusBadRequest, f.Next, "The provider's answer carries no usable code. Sign in again.")
	}
	if !h.o.Limiter.Allow(addr) {
		h.log.Warn("sign-in refused: too many failed attempts", "remote", addr)
		c.Response().Header().Set("Retry-After", "60")
		return h.signInError(c, http.StatusTooManyRequests, f.Next, "Too many failed attempts from your address. Wait a minute and try again.")
	}

	ctx, cancel := context.WithTimeout(r.Context(), signInTimeout)
	defer cancel()
	md, err := si.Provider.Metadata(ctx)
	if err != nil {
		h.log.Warn("sign-in: provider metadata unavailable", "err", err)
		return h.signInError(c, http.StatusServiceUnavailable, f.Next, "The sign-in provider cannot be reached right now. Try again in a moment.")
	}
	h.noteEndSession(md)
	if err := checkEndpoints(md); err != nil {
		h.log.Error("sign-in: the provider's discovery document will not do", "err", err)
		return h.signInError(c, http.StatusInternalServerError, f.Next, "Sign-in is not set up correctly. The operator's log says why.")
	}
	if q.Has("iss") && q.Get("iss") != md.Issuer {
		// RFC 9207: the answer names another authorization server (a
		// mix-up); its code is not sent to this one's token endpoint.
		h.log.Warn("sign-in callback from another issuer", "remote", addr)
		return h.signInError(c, http.StatusBadRequest, f.Next, "This sign-in was not started here, or another one replaced it. Sign in again.")
	}
	hc := si.HTTPClient
	if hc == nil {
		hc = defaultTokenClient
	}
	tok, err := si.oauthConfig(md).Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			// The provider refused the code: reused, expired, or not for
			// this verifier. Counted like a wrong token.
			h.o.Limiter.Failed(addr)
			h.log.Warn("sign-in: the provider refused the code", "remote", addr, "status", re.Response.StatusCode, "error", safeCode(re.ErrorCode))
			return h.signInError(c, http.StatusUnauthorized, f.Next, "The sign-in was not accepted. Sign in again.")
		}
		// Neither the error's text nor the response body is logged: the
		// body of a token response is no place to look for a reason.
		h.log.Warn("sign-in: token request failed", "remote", addr, "err", tokenRequestError(err))
		return h.signInError(c, http.StatusBadGateway, f.Next, "The sign-in provider did not answer. Try again in a moment.")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		h.log.Warn("sign-in: the token response carries no id_token (is the openid scope allowed for this client?)", "remote", addr)
		return h.signInError(c, http.StatusBadGateway, f.Next, "The sign-in provider's answer was incomplete.")
	}
	claims, err := si.Provider.VerifyIDToken(ctx, raw, si.ClientID, f.Nonce)
	if errors.Is(err, oidc.ErrUnavailable) {
		h.log.Warn("sign-in: cannot check the ID token now", "err", err)
		return h.signInError(c, http.StatusServiceUnavailable, f.Next, "The sign-in provider cannot be reached right now. Try again in a moment.")
	}
	if err != nil {
		h.o.Limiter.Failed(addr)
		h.log.Warn("sign-in: ID token refused", "remote", addr, "err", err)
		return h.signInError(c, http.StatusUnauthorized, f.Next, "The sign-in was not accepted. Sign in again.")
	}
	v, ok := si.Resolve(claims)
	if !ok {
		h.log.Warn("sign-in: no access for this person", "remote", addr, "subject", claims.Subject, "email", claims.Email)
		return h.errorPage(c, http.StatusForbidden, "No access", "You signed in, but this catalog has nothing for you. Ask its operator for access.")
	}
	id, err := h.sessions.create(v, h.o.Now(), gen)
	if errors.Is(err, errReset) {
		h.log.Info("sign-in: the configuration changed meanwhile; signing in again", "remote", addr)
		return h.signInError(c, http.StatusConflict, f.Next, "The catalog's configuration changed while you signed in. Sign in again.")
	}
	if err != nil {
		h.log.Error("start session", "err", err)
		return h.signInError(c, http.StatusInternalServerError, f.Next, "The session could not be started.")
	}
	h.setSessionCookie(c, id, http.SameSiteLaxMode)
	h.log.Info("login", "viewer", v.Name, "remote", addr, "via", "oidc")
	return c.Redirect(http.StatusSeeOther, f.Next)
}

var defaultTokenClient = &http.Client{Timeout: 10 * time.Second}

// safeCode is an OAuth error code fit for a log line.
func safeCode(s string) string {
	if errorCodeRE.MatchString(s) {
		return s
	}
	return "unknown"
}

// tokenRequestError is what the log says about a token request that got
// no answer: the transport error alone (a *url.Error names the endpoint,
// which carries no secret; the request body, which does, is never in it).
func tokenRequestError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "unexpected answer"
}

// signInError answers a sign-in that did not complete with the sign-in
// page, its reason and a way to try again.
func (h *Handler) signInError(c echo.Context, code int, next, msg string) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.render(c, code, "login", loginData{layout: h.layoutFor(c, "Sign in", ""), Next: safeNext(next), Error: msg, SSO: true})
}

// endSessionURL is where the browser goes to end the provider's session
// too, or "" when the provider has no end_session_endpoint.
func (h *Handler) endSessionURL(ctx context.Context, si *SignIn) string {
	if si.check() != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	md, err := si.Provider.Metadata(ctx)
	if err != nil {
		h.log.Warn("sign-out: provider metadata unavailable; the provider's session stays", "err", err)
		return ""
	}
	h.noteEndSession(md)
	if formOrigin(md.EndSessionEndpoint) == "" {
		return ""
	}
	u, err := url.Parse(md.EndSessionEndpoint)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", si.ClientID) // no id_token_hint: no token is kept
	if si.PostLogoutRedirectURL != "" {
		q.Set("post_logout_redirect_uri", si.PostLogoutRedirectURL)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// originRE is an origin fit for a CSP source expression.
var originRE = regexp.MustCompile(`^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)

// formOrigin is the origin of an http(s) endpoint, or "".
func formOrigin(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return ""
	}
	o := u.Scheme + "://" + u.Host
	if !originRE.MatchString(o) {
		return ""
	}
	return o
}

// noteEndSession remembers the provider's end_session origin: the pages'
// CSP must let the sign-out form's redirect go there (form-action applies
// to where a form's redirects lead, too).
func (h *Handler) noteEndSession(md oidc.ProviderMetadata) {
	o := formOrigin(md.EndSessionEndpoint)
	if cur := h.endSession.Load(); cur == nil || *cur != o {
		h.endSession.Store(&o)
	}
}

// csp is the Content-Security-Policy for this request's pages.
func (h *Handler) csp() string {
	if h.signIn() == nil {
		return ContentSecurityPolicy
	}
	o := h.endSession.Load()
	if o == nil || *o == "" {
		return ContentSecurityPolicy
	}
	return strings.Replace(ContentSecurityPolicy, "form-action 'self'", "form-action 'self' "+*o, 1)
}
