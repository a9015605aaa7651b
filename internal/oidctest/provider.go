// Package oidctest runs a real OpenID Connect provider on loopback for tests.
//
// It is github.com/zitadel/oidc/v3/pkg/op (an OpenID-certified provider
// library) over an in-memory op.Storage holding the static users and clients
// of Options: discovery, JWKS, authorization code with PKCE through a plain
// HTML login form, client credentials, introspection and end_session are the
// library's endpoints, answered over real HTTP on 127.0.0.1.
//
// What this package adds to the library:
//   - RFC 8707: the `resource` parameter of the authorization and token
//     requests becomes the access token's `aud` (Options.Audience when none
//     is sent, else the client ID); the ID token's `aud` stays the client ID.
//   - access tokens carry `scope` (space separated), `groups`, `email` and
//     `email_verified` (users) or the client's Groups (client credentials);
//     ID tokens carry `groups`, `email`, `email_verified` and `nonce`.
//   - signing keys rotate (Rotate, RetireOld), the provider goes down and
//     comes back at the same address (Stop, Restart) with its keys, clients
//     and issued tokens kept, and Sign mints the tokens of negative cases.
//
// The provider keeps no single-sign-on session: every authorization request
// shows the login form.
package oidctest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person who signs in through the login form. Username is Subject
// or Email; both are accepted.
type User struct {
	Subject, Email, Password string
	Groups                   []string
}

// Client is a registered OAuth client.
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	// Public clients have no secret and must use PKCE (S256); their
	// loopback redirect URIs match on any port (RFC 8252 section 7.3).
	Public bool
	// Groups are put in the `groups` claim of client-credentials tokens.
	Groups []string
	// PostLogoutRedirectURIs the end_session endpoint may redirect to.
	PostLogoutRedirectURIs []string
}

// Options configure Start.
type Options struct {
	Users   []User
	Clients []Client
	// AccessTokenTTL is the access tokens' lifetime; default (and for a
	// value <= 0) 10 minutes. For expired tokens, see Sign and ExpireTokens.
	AccessTokenTTL time.Duration
	// Opaque makes access tokens opaque (validated through introspection
	// with IntrospectionClient) instead of JWTs.
	Opaque bool
	// Addr is the listen address; default 127.0.0.1:0. Restart reuses the
	// address first bound either way.
	Addr string
	// Audience is the access tokens' `aud` when a request names no
	// `resource`; default the client ID.
	Audience string
	// Algorithm signs tokens: RS256 (default), ES256, PS256 or EdDSA.
	Algorithm jose.SignatureAlgorithm
	// Logger receives the provider's own lines (never a token); default
	// the test's log at warning level.
	Logger *slog.Logger
}

// Provider is a running (or stopped) test provider.
type Provider struct {
	opts     Options
	issuer   string
	addr     string
	storage  *storage
	handler  http.Handler
	logger   *slog.Logger
	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	stopped  bool
	introID  string
	introSec string
	foreign  *signingKey // Sign's KeyForeign, made on first use
	// transport carries the helpers' own requests (Login, ClientCredentials,
	// AuthCode); Stop drops its idle connections so that no POST after a
	// Restart lands on a connection the stopped server closed.
	transport *http.Transport
}

// Start runs a provider on loopback; t.Cleanup stops it.
func Start(t testing.TB, o Options) *Provider {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.AccessTokenTTL <= 0 {
		o.AccessTokenTTL = 10 * time.Minute
	}
	if o.Algorithm == "" {
		o.Algorithm = jose.RS256
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		t.Fatalf("oidctest: listen %s: %v", o.Addr, err)
	}
	p := &Provider{
		opts:      o,
		addr:      ln.Addr().String(),
		logger:    logger,
		introID:   "oidctest-introspector",
		introSec:  randomString(t, 24),
		transport: http.DefaultTransport.(*http.Transport).Clone(),
	}
	p.issuer = "http://" + p.addr
	st, err := newStorage(o, p.issuer, p.introID, p.introSec)
	if err != nil {
		ln.Close()
		t.Fatalf("oidctest: %v", err)
	}
	p.storage = st
	p.handler, err = p.build(t)
	if err != nil {
		ln.Close()
		t.Fatalf("oidctest: %v", err)
	}
	p.serve(ln)
	t.Cleanup(func() { p.shutdown() })
	return p
}

func (p *Provider) build(t testing.TB) (http.Handler, error) {
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		return nil, err
	}
	config := &op.Config{
		CryptoKey:                cryptoKey,
		CryptoKeyId:              "oidctest",
		DefaultLogoutRedirectURI: "/logged-out",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
	}
	provider, err := op.NewProvider(config, p.storage, op.StaticIssuer(p.issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("new provider: %w", err)
	}
	srv := &server{
		LegacyServer: op.NewLegacyServer(provider, *op.DefaultEndpoints),
		provider:     provider,
		storage:      p.storage,
	}
	mux := http.NewServeMux()
	mux.Handle("/login", &loginPage{storage: p.storage, issuer: p.issuer, logger: p.logger})
	mux.HandleFunc("/logged-out", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("signed out\n"))
	})
	opHandler := op.RegisterLegacyServer(srv, op.AuthorizeCallbackHandler(provider))
	// RFC 8414's metadata path, which the MCP SDK asks first, answers the
	// discovery document as Okta, Keycloak and others do.
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/.well-known/openid-configuration"
		r2.URL.RawPath = ""
		opHandler.ServeHTTP(w, r2)
	})
	mux.Handle("/", opHandler)
	return mux, nil
}

func (p *Provider) serve(ln net.Listener) {
	srv := &http.Server{Handler: p.handler, ReadHeaderTimeout: 10 * time.Second}
	p.mu.Lock()
	p.srv, p.ln = srv, ln
	p.stopped = false
	p.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.logger.Warn("oidctest: serve", "err", err)
		}
	}()
}

func (p *Provider) shutdown() {
	p.mu.Lock()
	srv, ln := p.srv, p.ln
	p.srv, p.ln = nil, nil
	p.stopped = true
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		// Serve may not have taken the listener yet, so Close may not
		// have closed it: close it here, so the port is free when Stop
		// returns.
		_ = ln.Close()
	}
	p.transport.CloseIdleConnections()
}

// Issuer is the provider's issuer URL (http://127.0.0.1:PORT); discovery is
// at Issuer() + "/.well-known/openid-configuration".
func (p *Provider) Issuer() string { return p.issuer }

// Addr is the host:port the provider listens on.
func (p *Provider) Addr() string { return p.addr }

// Stop takes the provider down: the listener and every connection close,
// so requests fail until Restart.
func (p *Provider) Stop(t testing.TB) {
	t.Helper()
	p.shutdown()
}

// Restart brings a stopped provider back at the same address, with the same
// keys, clients, users and issued tokens.
func (p *Provider) Restart(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	running := !p.stopped
	p.mu.Unlock()
	if running {
		t.Fatalf("oidctest: Restart of a running provider")
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("oidctest: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// Rotate makes a new signing key current. The previous keys stay published
// in the JWKS (and tokens they signed stay valid) until RetireOld.
func (p *Provider) Rotate(t testing.TB) {
	t.Helper()
	if err := p.storage.keys.rotate(); err != nil {
		t.Fatalf("oidctest: rotate: %v", err)
	}
}

// RetireOld unpublishes every key but the current one.
func (p *Provider) RetireOld(t testing.TB) {
	t.Helper()
	p.storage.keys.retireOld()
}

// ExpireTokens ends every access token issued so far: introspection and
// userinfo then refuse them (an opaque token's expiry without waiting; a
// JWT's own exp claim is what it is: Sign an expired one instead).
func (p *Provider) ExpireTokens(t testing.TB) {
	t.Helper()
	p.storage.expireAll()
}

// KeyIDs are the key ids the JWKS publishes, the current one last.
func (p *Provider) KeyIDs() []string { return p.storage.keys.publishedIDs() }

// IntrospectionClient is a confidential client registered for the
// introspection endpoint (Basic or form authentication).
func (p *Provider) IntrospectionClient() (id, secret string) { return p.introID, p.introSec }

// IntrospectionURL is the introspection endpoint.
func (p *Provider) IntrospectionURL() string {
	return op.DefaultEndpoints.Introspection.Absolute(p.issuer)
}

// TokenURL is the token endpoint.
func (p *Provider) TokenURL() string { return op.DefaultEndpoints.Token.Absolute(p.issuer) }

// AuthURL is the authorization endpoint.
func (p *Provider) AuthURL() string { return op.DefaultEndpoints.Authorization.Absolute(p.issuer) }

// testLog hands the provider's log lines to the test while it runs.
type testLog struct{ tb testing.TB }

func (w testLog) Write(b []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(string(b))
	return len(b), nil
}

// ctxKey types the context values the server passes to the storage.
type ctxKey int

const resourceKey ctxKey = iota

func resourcesFrom(ctx context.Context) []string {
	r, _ := ctx.Value(resourceKey).([]string)
	return r
}
