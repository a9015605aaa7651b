package oidctest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	resource = "https://skills.example.test/mcp"
	webCB    = "http://127.0.0.1:18100/callback"
	cliCB    = "http://localhost:18101/callback"
)

func testOptions() Options {
	return Options{
		Users: []User{
			{Subject: "u-alice", Email: "alice@example.test", Password: "alice-pw", Groups: []string{"eng", "ops"}},
			{Subject: "u-bob", Email: "bob@example.test", Password: "bob-pw"},
		},
		Clients: []Client{
			{ID: "web", Secret: "web-secret", RedirectURIs: []string{webCB}},
			{ID: "cli", Public: true, RedirectURIs: []string{cliCB}},
			{ID: "robot", Secret: "robot-secret", Groups: []string{"bots"}},
		},
	}
}

// getJSON fetches url and decodes its JSON body into v.
func getJSON(t *testing.T, target string, v any) *http.Response {
	t.Helper()
	resp, err := http.Get(target)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %s: %v: %s", target, resp.Status, err, b)
		}
	}
	return resp
}

type discovery struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	IntrospectionEndpoint string   `json:"introspection_endpoint"`
	EndSessionEndpoint    string   `json:"end_session_endpoint"`
	JWKSURI               string   `json:"jwks_uri"`
	GrantTypes            []string `json:"grant_types_supported"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
}

func discover(t *testing.T, p *Provider) discovery {
	t.Helper()
	var d discovery
	getJSON(t, p.Issuer()+"/.well-known/openid-configuration", &d)
	return d
}

// verify checks raw's signature against the provider's published JWKS (as
// fetched over HTTP now) and returns its claims.
func verify(t *testing.T, p *Provider, raw string) map[string]any {
	t.Helper()
	claims, err := tryVerify(t, p, raw)
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

func tryVerify(t *testing.T, p *Provider, raw string) (map[string]any, error) {
	t.Helper()
	var set jose.JSONWebKeySet
	getJSON(t, discover(t, p).JWKSURI, &set)
	sig, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.PS256, jose.EdDSA})
	if err != nil {
		return nil, err
	}
	keys := set.Key(sig.Signatures[0].Header.KeyID)
	if len(keys) != 1 {
		return nil, errors.New("kid not published")
	}
	payload, err := sig.Verify(keys[0])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, err
	}
	return claims, nil
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

func TestDiscovery(t *testing.T) {
	p := Start(t, testOptions())
	d := discover(t, p)
	if d.Issuer != p.Issuer() || !strings.HasPrefix(p.Issuer(), "http://127.0.0.1:") {
		t.Fatalf("issuer %q, provider says %q", d.Issuer, p.Issuer())
	}
	for name, got := range map[string]string{
		"authorization": d.AuthorizationEndpoint, "token": d.TokenEndpoint,
		"introspection": d.IntrospectionEndpoint, "end_session": d.EndSessionEndpoint, "jwks": d.JWKSURI,
	} {
		if !strings.HasPrefix(got, p.Issuer()+"/") {
			t.Errorf("%s endpoint %q not under the issuer", name, got)
		}
	}
	if d.TokenEndpoint != p.TokenURL() || d.AuthorizationEndpoint != p.AuthURL() || d.IntrospectionEndpoint != p.IntrospectionURL() {
		t.Errorf("endpoints %+v disagree with the accessors", d)
	}
	for _, g := range []string{"authorization_code", "client_credentials"} {
		if !slices.Contains(d.GrantTypes, g) {
			t.Errorf("grant types %v lack %s", d.GrantTypes, g)
		}
	}
	if !slices.Contains(d.CodeChallengeMethods, "S256") {
		t.Errorf("code challenge methods %v lack S256", d.CodeChallengeMethods)
	}
	var set jose.JSONWebKeySet
	getJSON(t, d.JWKSURI, &set)
	if len(set.Keys) != 1 || set.Keys[0].KeyID != p.KeyIDs()[0] || set.Keys[0].IsPublic() != true {
		t.Fatalf("JWKS %+v, want the one public key %v", set.Keys, p.KeyIDs())
	}
}

func TestClientCredentials(t *testing.T) {
	p := Start(t, testOptions())
	raw := p.ClientCredentials(t, "robot", "robot-secret", resource, "skills:read")
	c := verify(t, p, raw)
	if c["iss"] != p.Issuer() || c["sub"] != "robot" || c["client_id"] != "robot" || c["scope"] != "skills:read" {
		t.Errorf("claims %v", c)
	}
	if got := strs(c["aud"]); !slices.Equal(got, []string{resource}) {
		t.Errorf("aud %v, want the resource %s", got, resource)
	}
	if got := strs(c["groups"]); !slices.Equal(got, []string{"bots"}) {
		t.Errorf("groups %v, want the client's", got)
	}
	exp, _ := c["exp"].(float64)
	if d := time.Until(time.Unix(int64(exp), 0)); d <= 0 || d > 10*time.Minute+time.Second {
		t.Errorf("exp in %v, want the default 10 minutes", d)
	}

	if _, err := p.TryClientCredentials(context.Background(), "robot", "wrong", resource); err == nil {
		t.Error("a wrong secret got a token")
	}
	if _, err := p.TryClientCredentials(context.Background(), "cli", "", resource); err == nil {
		t.Error("a public client got a client-credentials token")
	}
	if _, err := p.TryClientCredentials(context.Background(), "robot", "robot-secret", "not a uri#x"); err == nil {
		t.Error("a relative resource was accepted")
	}
}

func TestClientCredentialsDefaultAudience(t *testing.T) {
	o := testOptions()
	p := Start(t, o)
	if got := strs(verify(t, p, p.ClientCredentials(t, "robot", "robot-secret", ""))["aud"]); !slices.Equal(got, []string{"robot"}) {
		t.Errorf("aud %v without a resource or Options.Audience, want the client ID", got)
	}
	o.Audience = "https://default.example.test/mcp"
	p = Start(t, o)
	if got := strs(verify(t, p, p.ClientCredentials(t, "robot", "robot-secret", ""))["aud"]); !slices.Equal(got, []string{o.Audience}) {
		t.Errorf("aud %v, want Options.Audience", got)
	}
}

func TestAuthCodeConfidential(t *testing.T) {
	p := Start(t, testOptions())
	tok := p.AuthCodeTokens(t, "web", "web-secret", webCB, resource, "alice@example.test", "openid", "email", "skills:read")
	at := verify(t, p, tok.AccessToken)
	if at["sub"] != "u-alice" || at["email"] != "alice@example.test" || at["client_id"] != "web" {
		t.Errorf("access token claims %v", at)
	}
	if got := strs(at["aud"]); !slices.Equal(got, []string{resource}) {
		t.Errorf("access token aud %v, want the resource", got)
	}
	if got := strs(at["groups"]); !slices.Equal(got, []string{"eng", "ops"}) {
		t.Errorf("access token groups %v", got)
	}
	if got := strings.Fields(at["scope"].(string)); !slices.Equal(got, []string{"openid", "email", "skills:read"}) {
		t.Errorf("access token scope %v", got)
	}
	id := verify(t, p, tok.IDToken)
	if id["nonce"] != tok.Nonce || tok.Nonce == "" || id["email"] != "alice@example.test" || id["sub"] != "u-alice" {
		t.Errorf("ID token claims %v (nonce sent %q)", id, tok.Nonce)
	}
	if got := strs(id["aud"]); !slices.Equal(got, []string{"web"}) {
		t.Errorf("ID token aud %v, want the client", got)
	}
	if got := strs(id["groups"]); !slices.Equal(got, []string{"eng", "ops"}) {
		t.Errorf("ID token groups %v", got)
	}
}

func TestAuthCodePublicPKCE(t *testing.T) {
	p := Start(t, testOptions())
	// A public client's loopback redirect matches on any port (RFC 8252).
	cb := "http://localhost:18155/callback"
	raw := p.AuthCode(t, "cli", "", cb, resource, "u-bob", "skills:read")
	c := verify(t, p, raw)
	if c["sub"] != "u-bob" || c["email"] != "bob@example.test" || c["client_id"] != "cli" {
		t.Errorf("claims %v", c)
	}
	if got := strs(c["groups"]); got == nil || len(got) != 0 {
		t.Errorf("groups %v, want an empty list for a user without groups", c["groups"])
	}
	if got := strs(c["aud"]); !slices.Equal(got, []string{resource}) {
		t.Errorf("aud %v", got)
	}
}

func TestAuthCodeRefusals(t *testing.T) {
	p := Start(t, testOptions())
	ctx := context.Background()
	if _, err := p.TryAuthCode(ctx, "web", "web-secret", webCB, resource, "u-alice", "wrong", "n", "openid"); !errors.Is(err, ErrLoginRefused) {
		t.Errorf("wrong password: %v, want ErrLoginRefused", err)
	}
	if _, err := p.TryAuthCode(ctx, "web", "web-secret", "http://127.0.0.1:18199/elsewhere", resource, "u-alice", "alice-pw", "n", "openid"); err == nil {
		t.Error("an unregistered redirect URI was accepted")
	}
	if _, err := p.TryAuthCode(ctx, "web", "wrong-secret", webCB, resource, "u-alice", "alice-pw", "n", "openid"); err == nil {
		t.Error("a wrong client secret exchanged the code")
	}
}

// TestPublicClientNeedsPKCE sends the authorization request by hand
// without a code challenge.
func TestPublicClientNeedsPKCE(t *testing.T) {
	p := Start(t, testOptions())
	q := url.Values{"client_id": {"cli"}, "redirect_uri": {cliCB}, "response_type": {"code"}, "scope": {"openid"}, "state": {"s"}}
	redirect, err := p.Login(context.Background(), p.AuthURL()+"?"+q.Encode(), "u-bob", "bob-pw")
	if err == nil || redirect == nil || redirect.Query().Get("error") != "invalid_request" {
		t.Fatalf("redirect %v, err %v: want an invalid_request error redirect", redirect, err)
	}
}

// TestLoginForm checks the page Chromium fills: the ids the web test uses.
func TestLoginForm(t *testing.T) {
	p := Start(t, testOptions())
	q := url.Values{"client_id": {"web"}, "redirect_uri": {webCB}, "response_type": {"code"}, "scope": {"openid"}, "state": {"s"}}
	resp, err := http.Get(p.AuthURL() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	for _, want := range []string{`<input id="username"`, `<input id="password" name="password" type="password"`, `<button id="submit"`} {
		if !strings.Contains(page, want) {
			t.Errorf("login page lacks %s:\n%s", want, page)
		}
	}
}
