package oidctest

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func jwks(t *testing.T, p *Provider) []string {
	t.Helper()
	var set jose.JSONWebKeySet
	getJSON(t, p.Issuer()+"/keys", &set)
	var ids []string
	for _, k := range set.Keys {
		ids = append(ids, k.KeyID)
	}
	return ids
}

func kidOf(t *testing.T, raw string) string {
	t.Helper()
	sig, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.HS256})
	if err != nil {
		t.Fatal(err)
	}
	return sig.Signatures[0].Header.KeyID
}

func TestRotateAndRetire(t *testing.T) {
	p := Start(t, testOptions())
	old := p.ClientCredentials(t, "robot", "robot-secret", resource)
	k1 := p.KeyIDs()
	if kidOf(t, old) != k1[0] {
		t.Fatalf("token kid %s, want the one key %v", kidOf(t, old), k1)
	}

	p.Rotate(t)
	k2 := p.KeyIDs()
	if len(k2) != 2 || k2[0] != k1[0] || !slices.Equal(jwks(t, p), k2) {
		t.Fatalf("after Rotate: keys %v, JWKS %v; want the old key and a new one published", k2, jwks(t, p))
	}
	fresh := p.ClientCredentials(t, "robot", "robot-secret", resource)
	if kidOf(t, fresh) != k2[1] {
		t.Errorf("a token after Rotate is signed by %s, want the new key %s", kidOf(t, fresh), k2[1])
	}
	verify(t, p, old) // the old key still validates what it signed
	verify(t, p, fresh)

	p.RetireOld(t)
	if got := jwks(t, p); !slices.Equal(got, k2[1:]) {
		t.Fatalf("after RetireOld the JWKS is %v, want only %s", got, k2[1])
	}
	if _, err := tryVerify(t, p, old); err == nil {
		t.Error("a token of the retired key still finds its key in the JWKS")
	}
	verify(t, p, fresh)
}

func TestStopRestart(t *testing.T) {
	p := Start(t, testOptions())
	issuer, keys := p.Issuer(), jwks(t, p)
	tok := p.ClientCredentials(t, "robot", "robot-secret", resource)

	p.Stop(t)
	if resp, err := http.Get(issuer + "/.well-known/openid-configuration"); err == nil {
		resp.Body.Close()
		t.Fatalf("discovery answered %s while stopped", resp.Status)
	}

	p.Restart(t)
	if d := discover(t, p); d.Issuer != issuer {
		t.Fatalf("issuer after restart %q, want %q", d.Issuer, issuer)
	}
	if got := jwks(t, p); !slices.Equal(got, keys) {
		t.Errorf("JWKS after restart %v, want the same keys %v", got, keys)
	}
	verify(t, p, tok)
	p.AuthCode(t, "web", "web-secret", webCB, resource, "u-alice", "openid")
}

func TestFixedAddr(t *testing.T) {
	o := testOptions()
	o.Addr = "127.0.0.1:18150"
	p := Start(t, o)
	if p.Issuer() != "http://127.0.0.1:18150" || p.Addr() != "127.0.0.1:18150" {
		t.Fatalf("issuer %s", p.Issuer())
	}
	p.Stop(t)
	p.Restart(t)
	discover(t, p)
}

// introspect posts token to the introspection endpoint as id:secret.
func introspect(t *testing.T, p *Provider, id, secret, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, discover(t, p).IntrospectionEndpoint, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func TestOpaqueIntrospection(t *testing.T) {
	o := testOptions()
	o.Opaque = true
	p := Start(t, o)
	id, secret := p.IntrospectionClient()

	tok := p.AuthCode(t, "web", "web-secret", webCB, resource, "u-alice", "openid", "skills:read")
	if strings.Count(tok, ".") == 2 {
		t.Fatalf("Opaque issued a JWT-shaped token")
	}
	status, got := introspect(t, p, id, secret, tok)
	if status != http.StatusOK || got["active"] != true || got["sub"] != "u-alice" || got["client_id"] != "web" ||
		got["scope"] != "openid skills:read" || got["email"] != "alice@example.test" || got["iss"] != p.Issuer() {
		t.Fatalf("introspection %d %v", status, got)
	}
	if a := strs(got["aud"]); !slices.Equal(a, []string{resource}) {
		t.Errorf("introspected aud %v", a)
	}
	if g := strs(got["groups"]); !slices.Equal(g, []string{"eng", "ops"}) {
		t.Errorf("introspected groups %v", g)
	}
	if exp, _ := got["exp"].(float64); time.Unix(int64(exp), 0).Before(time.Now()) {
		t.Errorf("exp %v in the past", got["exp"])
	}

	cc := p.ClientCredentials(t, "robot", "robot-secret", resource, "skills:read")
	if _, got := introspect(t, p, id, secret, cc); got["active"] != true || got["sub"] != "robot" || !slices.Equal(strs(got["groups"]), []string{"bots"}) {
		t.Errorf("client-credentials introspection %v", got)
	}

	if _, got := introspect(t, p, id, secret, tok+"x"); got["active"] != false {
		t.Errorf("a damaged token introspects as %v", got)
	}
	if status, got := introspect(t, p, id, "wrong", tok); status == http.StatusOK && got["active"] == true {
		t.Errorf("a wrong introspection secret got %d %v", status, got)
	}
	if status, got := introspect(t, p, "cli", "", tok); status == http.StatusOK && got["active"] == true {
		t.Errorf("a public client introspected: %d %v", status, got)
	}

	// Tokens outlive a restart, as with a provider that stores them.
	p.Stop(t)
	p.Restart(t)
	if _, got := introspect(t, p, id, secret, tok); got["active"] != true {
		t.Errorf("after restart the token introspects as %v", got)
	}
}

func TestOpaqueExpiry(t *testing.T) {
	o := testOptions()
	o.Opaque = true
	p := Start(t, o)
	id, secret := p.IntrospectionClient()
	tok := p.ClientCredentials(t, "robot", "robot-secret", resource)
	if _, got := introspect(t, p, id, secret, tok); got["active"] != true {
		t.Fatalf("a fresh token introspects as %v", got)
	}
	p.ExpireTokens(t)
	if _, got := introspect(t, p, id, secret, tok); got["active"] != false {
		t.Errorf("an expired token introspects as %v", got)
	}
}

func TestJWTIntrospection(t *testing.T) {
	p := Start(t, testOptions())
	id, secret := p.IntrospectionClient()
	tok := p.ClientCredentials(t, "robot", "robot-secret", resource)
	if _, got := introspect(t, p, id, secret, tok); got["active"] != true || got["sub"] != "robot" {
		t.Errorf("JWT introspection %v", got)
	}
}

func TestSign(t *testing.T) {
	p := Start(t, testOptions())
	if c := p.Claims("robot", resource); c["client_id"] != "robot" || c["sub"] != "robot" || !slices.Equal(c["groups"].([]string), []string{"bots"}) || c["email"] != nil {
		t.Errorf("Claims of a client %v", c)
	}
	claims := p.Claims("u-alice", resource)
	if claims["client_id"] != "web" || claims["email"] != "alice@example.test" || !slices.Equal(claims["groups"].([]string), []string{"eng", "ops"}) || claims["iss"] != p.Issuer() {
		t.Fatalf("Claims %v", claims)
	}
	claims["exp"] = time.Now().Add(-time.Hour).Unix()

	good := verify(t, p, p.Sign(t, claims, KeyCurrent))
	if good["sub"] != "u-alice" || good["aud"] != resource || int64(good["exp"].(float64)) != claims["exp"] {
		t.Errorf("KeyCurrent token claims %v", good)
	}

	foreign := p.Sign(t, claims, KeyForeign)
	if slices.Contains(p.KeyIDs(), kidOf(t, foreign)) {
		t.Error("KeyForeign used a published kid")
	}
	if _, err := tryVerify(t, p, foreign); err == nil {
		t.Error("KeyForeign verified against the JWKS")
	}
	same := p.Sign(t, claims, KeyForeignSameKID)
	if kidOf(t, same) != p.KeyIDs()[0] {
		t.Error("KeyForeignSameKID did not use the current kid")
	}
	if _, err := tryVerify(t, p, same); err == nil || strings.Contains(err.Error(), "kid not published") {
		t.Errorf("KeyForeignSameKID: %v, want a signature error", err)
	}

	parts := strings.Split(p.Sign(t, claims, KeyNone), ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if len(parts) != 3 || parts[2] != "" || !strings.Contains(string(header), `"alg":"none"`) {
		t.Errorf("KeyNone token %v (header %s)", parts, header)
	}

	hs := p.Sign(t, claims, KeyHS256)
	parts = strings.Split(hs, ".")
	header, _ = base64.RawURLEncoding.DecodeString(parts[0])
	der, err := x509.MarshalPKIXPublicKey(p.storage.keys.current().priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, der)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !strings.Contains(string(header), `"alg":"HS256"`) || base64.RawURLEncoding.EncodeToString(mac.Sum(nil)) != parts[2] {
		t.Errorf("KeyHS256 token is not HMAC-SHA256 under the public key's DER: header %s", header)
	}
	if _, err := tryVerify(t, p, hs); err == nil {
		t.Error("an HS256 token verified")
	}
}

func TestAlgorithms(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA} {
		o := testOptions()
		o.Algorithm = alg
		p := Start(t, o)
		raw := p.ClientCredentials(t, "robot", "robot-secret", resource)
		sig, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{alg})
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if sig.Signatures[0].Header.Algorithm != string(alg) {
			t.Errorf("signed with %s, want %s", sig.Signatures[0].Header.Algorithm, alg)
		}
		verify(t, p, raw)
	}
}

func TestAuthorizationServerMetadata(t *testing.T) {
	p := Start(t, testOptions())
	var d discovery
	if resp := getJSON(t, p.Issuer()+"/.well-known/oauth-authorization-server", &d); resp.StatusCode != http.StatusOK {
		t.Fatalf("RFC 8414 metadata: %s", resp.Status)
	}
	if want := discover(t, p); d.Issuer != want.Issuer || d.TokenEndpoint != want.TokenEndpoint || d.JWKSURI != want.JWKSURI || !slices.Equal(d.CodeChallengeMethods, want.CodeChallengeMethods) {
		t.Errorf("RFC 8414 metadata %+v differs from discovery", d)
	}
}

func TestEndSession(t *testing.T) {
	o := testOptions()
	after := "http://127.0.0.1:18100/signed-out"
	o.Clients[0].PostLogoutRedirectURIs = []string{after}
	p := Start(t, o)
	tok := p.AuthCodeTokens(t, "web", "web-secret", webCB, resource, "u-alice", "openid")
	q := url.Values{"id_token_hint": {tok.IDToken}, "client_id": {"web"}, "post_logout_redirect_uri": {after}, "state": {"st"}}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(discover(t, p).EndSessionEndpoint + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc == nil || !strings.HasPrefix(loc.String(), after) || loc.Query().Get("state") != "st" {
		t.Fatalf("end_session answered %s to %q, want a redirect to %s with the state", resp.Status, resp.Header.Get("Location"), after)
	}
}
