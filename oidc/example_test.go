package oidc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/skillreg/skillreg/oidc"
)

// A resource server checks the bearer tokens of its callers. The provider
// here is a loopback server publishing one key; a real one is the
// organisation's (Okta, Entra ID, Keycloak, ...).
func ExampleVerifier_VerifyAccessToken() {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mux := http.NewServeMux()
	provider := httptest.NewServer(mux)
	defer provider.Close()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": provider.URL, "jwks_uri": provider.URL + "/keys"})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})

	v, err := oidc.New(oidc.Config{Issuer: provider.URL, Audience: "https://skills.example.com/mcp"})
	if err != nil {
		panic(err)
	}
	v.Start(context.Background()) // discovery and keys in the background
	<-v.Ready()

	sign := func(aud string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
			"iss": provider.URL, "sub": "ada", "aud": aud, "exp": time.Now().Add(time.Hour).Unix(),
			"groups": []string{"platform"}, "scope": "skills:read",
		})
		tok.Header["kid"] = "k1"
		raw, _ := tok.SignedString(key)
		return raw
	}
	c, err := v.VerifyAccessToken(context.Background(), sign("https://skills.example.com/mcp"))
	fmt.Println(c.Subject, c.Groups, c.Scopes, err)
	_, err = v.VerifyAccessToken(context.Background(), sign("https://other.example.com/mcp"))
	fmt.Println(errors.Is(err, oidc.ErrInvalidToken), err)
	// Output:
	// ada [platform] [skills:read] <nil>
	// true oidc: invalid token: wrong audience
}
