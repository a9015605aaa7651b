package oidc

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// This file is the unit tests' provider: an httptest server publishing a
// discovery document, a JWKS built with go-jose from real keys, and an
// introspection endpoint. The tests against the full provider
// (internal/oidctest) are in provider_test.go.

// signer is one signing key: its private half signs test tokens, its
// public half is what the JWKS publishes.
type signer struct {
	kid    string
	alg    string // the JWK's "alg"; empty publishes none
	method jwt.SigningMethod
	priv   crypto.Signer
}

var (
	rsaKeys = sync.OnceValue(func() []*rsa.PrivateKey {
		out := make([]*rsa.PrivateKey, 3)
		for i := range out {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			out[i] = k
		}
		return out
	})
)

func rsaSigner(i int, kid, alg string) signer {
	m := jwt.SigningMethod(jwt.SigningMethodRS256)
	if alg != "" {
		m = jwt.GetSigningMethod(alg)
	}
	return signer{kid: kid, alg: alg, method: m, priv: rsaKeys()[i]}
}

func ecSigner(t testing.TB, kid string, c elliptic.Curve, method jwt.SigningMethod) signer {
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: method.Alg(), method: method, priv: k}
}

func edSigner(t testing.TB, kid string) signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: "EdDSA", method: jwt.SigningMethodEdDSA, priv: k}
}

func (s signer) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: s.priv.Public(), KeyID: s.kid, Algorithm: s.alg, Use: "sig"}
}

// sign makes a token with claims, signed by s and naming its kid.
func (s signer) sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.method, claims)
	if s.kid != "" {
		tok.Header["kid"] = s.kid
	}
	raw, err := tok.SignedString(s.priv)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// clock is the tests' time: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	testAudience = "https://skills.example.com/mcp"
	introID      = "skillreg-introspect"
	introSecret  = "intro secret/with:odd=chars"
)

// idp is the unit tests' provider.
type idp struct {
	srv *httptest.Server

	mu      sync.Mutex
	signers []signer
	down    bool               // answers 503 to everything
	doc     func(m jsonMap)    // edits the discovery document
	jwks    []byte             // overrides the JWKS answer
	opaque  map[string]jsonMap // introspection answers by token
	release chan struct{}      // non-nil: the JWKS handler waits for it

	discoveryHits, jwksHits, introHits atomic.Int32
}

type jsonMap = map[string]any

func newIDP(t testing.TB, signers ...signer) *idp {
	p := &idp{signers: signers, opaque: map[string]jsonMap{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		p.discoveryHits.Add(1)
		if p.isDown() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		iss := p.srv.URL
		m := jsonMap{
			"issuer":                           iss,
			"authorization_endpoint":           iss + "/authorize",
			"token_endpoint":                   iss + "/token",
			"jwks_uri":                         iss + "/keys",
			"end_session_endpoint":             iss + "/logout",
			"introspection_endpoint":           iss + "/introspect",
			"scopes_supported":                 []string{"openid", "skills:read"},
			"code_challenge_methods_supported": []string{"S256"},
		}
		p.mu.Lock()
		if p.doc != nil {
			p.doc(m)
		}
		p.mu.Unlock()
		writeJSON(w, m)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		p.jwksHits.Add(1)
		p.mu.Lock()
		release := p.release
		p.mu.Unlock()
		if release != nil {
			<-release
		}
		if p.isDown() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.jwks != nil {
			_, _ = w.Write(p.jwks)
			return
		}
		var set jose.JSONWebKeySet
		for _, s := range p.signers {
			set.Keys = append(set.Keys, s.jwk())
		}
		writeJSON(w, set)
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		p.introHits.Add(1)
		if p.isDown() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		id, secret, ok := r.BasicAuth()
		secret, err := url.QueryUnescape(secret) // RFC 6749 section 2.3.1
		if !ok || err != nil || id != introID || secret != introSecret {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if r.PostFormValue("token_type_hint") != "access_token" {
			http.Error(w, "hint", http.StatusBadRequest)
			return
		}
		if r.PostFormValue("token") == "hang-token-0123" {
			<-r.Context().Done() // never answers: the verifier's timeout must end it
			return
		}
		p.mu.Lock()
		ans, ok := p.opaque[r.PostFormValue("token")]
		p.mu.Unlock()
		if !ok {
			ans = jsonMap{"active": false}
		}
		writeJSON(w, ans)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (p *idp) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

func (p *idp) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *idp) publish(s ...signer) {
	p.mu.Lock()
	p.signers = s
	p.mu.Unlock()
}

// claims are a valid access token's claims at now.
func (p *idp) claims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":            p.srv.URL,
		"sub":            "user-1",
		"aud":            testAudience,
		"exp":            now.Add(5 * time.Minute).Unix(),
		"iat":            now.Unix(),
		"email":          "ada@example.com",
		"email_verified": true,
		"groups":         []string{"platform", "security"},
		"scope":          "skills:read openid",
		"client_id":      "claude-code",
	}
}

// verifier returns a Verifier for p on clock c, logging into logs.
func (p *idp) verifier(t testing.TB, c *clock, logs *bytes.Buffer, edit ...func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{Issuer: p.srv.URL, Audience: testAudience, Now: c.Now, HTTPClient: p.srv.Client()}
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, e := range edit {
		e(&cfg)
	}
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
