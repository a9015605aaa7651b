package web

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Sessions and login limits.
const (
	cookieName   = "skillreg_session"
	maxSessions  = 10000            // sessions kept at once; the oldest goes first
	maxLoginForm = 4 << 10          // bytes of a login form
	maxTokenLen  = 1 << 10          // bytes of a token
	loginBurst   = 5                // failed logins allowed at once per address (default Limiter)
	loginRefill  = 12 * time.Second // one more failed login allowed per interval (default Limiter)
)

// session is what a session id maps to, server side. The cookie carries
// only the random id, never the token.
type session struct {
	viewer  Viewer
	expires time.Time
}

// sessionStore is a bounded map of session ids with expiry.
type sessionStore struct {
	mu  sync.Mutex
	m   map[string]session
	max int
	ttl time.Duration
	// gen counts resets: a session resolved before one (by the replaced
	// configuration) is not started after it.
	gen uint64
}

func newSessionStore(max int, ttl time.Duration) *sessionStore {
	return &sessionStore{m: map[string]session{}, max: max, ttl: ttl}
}

// errReset is a session refused because the store was reset after its
// viewer was resolved (gen is older than the store's).
var errReset = errors.New("the configuration changed during the sign-in")

// generation is the store's reset count, read before a viewer is resolved
// and given back to create.
func (s *sessionStore) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// create starts a session and returns its id, unless the store was reset
// since gen (errReset).
func (s *sessionStore) create(v Viewer, now time.Time, gen uint64) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		return "", errReset
	}
	if len(s.m) >= s.max {
		s.evictLocked(now)
	}
	s.m[id] = session{viewer: v, expires: now.Add(s.ttl)}
	return id, nil
}

// evictLocked drops expired sessions and, if none had expired, the one
// closest to expiry.
func (s *sessionStore) evictLocked(now time.Time) {
	oldest, first := "", time.Time{}
	for id, ss := range s.m {
		if !now.Before(ss.expires) {
			delete(s.m, id)
			continue
		}
		if oldest == "" || ss.expires.Before(first) {
			oldest, first = id, ss.expires
		}
	}
	if len(s.m) >= s.max && oldest != "" {
		delete(s.m, oldest)
	}
}

func (s *sessionStore) lookup(id string, now time.Time) (Viewer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[id]
	if !ok {
		return Viewer{}, false
	}
	if !now.Before(ss.expires) {
		delete(s.m, id)
		return Viewer{}, false
	}
	return ss.viewer, true
}

func (s *sessionStore) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

func (s *sessionStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = map[string]session{}
	s.gen++
}

func (s *sessionStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// remoteAddr is the address failed logins are counted against: the
// connection's peer, or what the router's IPExtractor says when the
// operator configured one (behind a trusted proxy). Forwarding headers are
// never trusted on their own.
func (h *Handler) remoteAddr(c echo.Context) string {
	if h.echo != nil && h.echo.IPExtractor != nil {
		return c.RealIP()
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		return c.Request().RemoteAddr
	}
	return host
}

func (h *Handler) viewerFromCookie(r *http.Request) (Viewer, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" || len(ck.Value) > 64 {
		return Viewer{}, false
	}
	return h.sessions.lookup(ck.Value, h.o.Now())
}

// safeNext returns where to go after signing in: a local path only, never
// another site.
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	if strings.ContainsAny(next, "\r\n\t\\") || strings.HasPrefix(u.Path, "/login") || strings.HasPrefix(u.Path, "/logout") {
		return "/"
	}
	return next
}

type loginData struct {
	layout
	Next  string
	Error string
	// SSO: people sign in with the provider (the page offers to try
	// again instead of a token field).
	SSO bool
	// SignedOut: the page after signing out of the provider too.
	SignedOut bool
}

// loginForm asks for a token, or, when the provider signs people in,
// sends the browser there at once.
func (h *Handler) loginForm(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if !h.authRequired() {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	if _, ok := h.viewerFromCookie(c.Request()); ok {
		return c.Redirect(http.StatusSeeOther, next)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	if si := h.signIn(); si != nil {
		return h.startSignIn(c, si, next)
	}
	return h.render(c, http.StatusOK, "login", loginData{layout: h.layoutFor(c, "Sign in", ""), Next: next})
}

func (h *Handler) login(c echo.Context) error {
	r := c.Request()
	c.Response().Header().Set("Cache-Control", "no-store")
	if err := h.cop.Check(r); err != nil {
		h.log.Warn("cross-origin login refused", "remote", h.remoteAddr(c), "origin", r.Header.Get("Origin"))
		return h.errorPage(c, http.StatusForbidden, "Forbidden", "Cross-origin requests are refused.")
	}
	if !h.authRequired() {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	if h.signIn() != nil {
		// The provider signs people in; no token is taken here.
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	now, addr := h.o.Now(), h.remoteAddr(c)
	gen := h.sessions.generation() // before the token is resolved
	r.Body = http.MaxBytesReader(c.Response(), r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		return h.errorPage(c, http.StatusBadRequest, "Bad request", "The sign-in form could not be read.")
	}
	next := safeNext(r.PostForm.Get("next"))
	data := loginData{layout: h.layoutFor(c, "Sign in", ""), Next: next}
	if !h.o.Limiter.Allow(addr) {
		h.log.Warn("login refused: too many failed attempts", "remote", addr)
		c.Response().Header().Set("Retry-After", "60")
		data.Error = "Too many failed attempts from your address. Wait a minute and try again."
		return h.render(c, http.StatusTooManyRequests, "login", data)
	}
	token := r.PostForm.Get("token")
	v, ok := Viewer{}, false
	if token != "" && len(token) <= maxTokenLen {
		v, ok = h.o.Authenticate(r.Context(), token)
	}
	if !ok {
		h.o.Limiter.Failed(addr)
		h.log.Warn("login failed", "remote", addr)
		data.Error = "That token was not accepted."
		return h.render(c, http.StatusUnauthorized, "login", data)
	}
	id, err := h.sessions.create(v, now, gen)
	if errors.Is(err, errReset) {
		h.log.Info("login: the configuration changed meanwhile; signing in again", "remote", addr)
		data.Error = "The catalog's configuration changed while you signed in. Sign in again."
		return h.render(c, http.StatusConflict, "login", data)
	}
	if err != nil {
		h.log.Error("start session", "err", err)
		return h.errorPage(c, http.StatusInternalServerError, "Something went wrong", "The session could not be started.")
	}
	h.setSessionCookie(c, id, http.SameSiteStrictMode)
	h.log.Info("login", "viewer", v.Name, "remote", addr)
	return c.Redirect(http.StatusSeeOther, next)
}

type logoutData struct{ layout }

func (h *Handler) logoutForm(c echo.Context) error {
	if !h.authRequired() {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	v, ok := h.viewerFromCookie(c.Request())
	if !ok && h.signIn() != nil {
		// Back from the provider's sign-out (or never signed in): /login
		// would send the browser straight back to the provider.
		c.Response().Header().Set("Cache-Control", "no-store")
		return h.render(c, http.StatusOK, "login", loginData{layout: h.layoutFor(c, "Signed out", ""), Next: "/", SSO: true, SignedOut: true})
	}
	if !ok {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	c.Set(viewerKey, v)
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.render(c, http.StatusOK, "logout", logoutData{h.layoutFor(c, "Sign out", "")})
}

func (h *Handler) logout(c echo.Context) error {
	r := c.Request()
	c.Response().Header().Set("Cache-Control", "no-store")
	if err := h.cop.Check(r); err != nil {
		return h.errorPage(c, http.StatusForbidden, "Forbidden", "Cross-origin requests are refused.")
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		h.sessions.remove(ck.Value)
	}
	http.SetCookie(c.Response(), &http.Cookie{
		Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: h.secureRequest(r), SameSite: http.SameSiteStrictMode,
	})
	if si := h.signIn(); si != nil {
		// End the provider's session too, or the next /login would sign
		// the same person straight back in.
		if u := h.endSessionURL(r.Context(), si); u != "" {
			return c.Redirect(http.StatusSeeOther, u)
		}
		return c.Redirect(http.StatusSeeOther, "/logout")
	}
	if !h.authRequired() {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}
