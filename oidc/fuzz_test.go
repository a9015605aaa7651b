package oidc

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/jsonbound"
)

// shapeSeeds are the dangerous JSON shapes inside doc, and the small ones
// bare too (the large ones only once, to keep the fuzzer's baseline short).
func shapeSeeds(doc []byte, key string) [][]byte {
	var out [][]byte
	for _, s := range deepjson.Shapes() {
		out = append(out, deepjson.Embed(doc, key, s.JSON))
		if len(s.JSON) <= 64<<10 {
			out = append(out, s.JSON)
		}
	}
	return out
}

func FuzzDecodeJWKS(f *testing.F) {
	rs := rsaSigner(0, "rsa", "RS256").jwk()
	ec := ecSigner(f, "ec", elliptic.P256(), jwt.SigningMethodES256).jwk()
	ed := edSigner(f, "ed").jwk()
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{rs, ec, ed}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(set)
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"x"},{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""},{"kty":"OKP","crv":"X25519","x":"AAAA"}]}`))
	for _, s := range shapeSeeds(set, "keys") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, _, err := decodeJWKS(body)
		if jsonbound.Check(body, jsonLimits) != nil && err == nil {
			t.Fatal("a JWKS past the JSON bounds was decoded")
		}
		if err != nil {
			return
		}
		if len(keys) == 0 || len(keys) > maxKeys {
			t.Fatalf("%d keys", len(keys))
		}
		for _, k := range keys {
			switch p := k.pub.(type) {
			case *rsa.PublicKey:
				if b := p.N.BitLen(); b < minRSABits || b > maxRSABits {
					t.Fatalf("RSA key of %d bits kept", b)
				}
			case *ecdsa.PublicKey:
				if curveAlg(p.Curve) == "" {
					t.Fatal("EC key of an unsupported curve kept")
				}
			case ed25519.PublicKey:
			default:
				t.Fatalf("key of type %T kept", p)
			}
			if k.alg != "" && (!slices.Contains(allowedAlgorithms, k.alg) || !fits(k.pub, k.alg)) {
				t.Fatalf("key with alg %q kept", k.alg)
			}
		}
	})
}

const fuzzIssuer = "https://idp.example.com/realms/org"

func FuzzDecodeMetadata(f *testing.F) {
	doc, _ := json.Marshal(map[string]any{
		"issuer": fuzzIssuer, "jwks_uri": fuzzIssuer + "/keys",
		"authorization_endpoint": fuzzIssuer + "/auth", "token_endpoint": fuzzIssuer + "/token",
		"introspection_endpoint": fuzzIssuer + "/introspect", "scopes_supported": []string{"openid"},
	})
	f.Add(doc)
	f.Add([]byte(`{"issuer":"` + fuzzIssuer + `","jwks_uri":"http://evil.example.com/k"}`))
	for _, s := range shapeSeeds(doc, "scopes_supported") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decodeMetadata(body, fuzzIssuer)
		if jsonbound.Check(body, jsonLimits) != nil && err == nil {
			t.Fatal("a document past the JSON bounds was decoded")
		}
		if err != nil {
			return
		}
		if m.Issuer != fuzzIssuer {
			t.Fatalf("issuer %q accepted", m.Issuer)
		}
		if checkURL("jwks_uri", m.JWKSURI) != nil {
			t.Fatalf("jwks_uri %q accepted", m.JWKSURI)
		}
	})
}

func FuzzIntrospectionAnswer(f *testing.F) {
	doc, _ := json.Marshal(map[string]any{
		"active": true, "iss": fuzzIssuer, "sub": "svc", "aud": []string{testAudience},
		"scope": "a b", "groups": []string{"g"}, "exp": 1796148000, "nbf": 1796140000,
	})
	f.Add(doc)
	f.Add([]byte(`{"active":true,"sub":"s","aud":"` + testAudience + `","scp":["x"],"exp":1e308}`))
	f.Add([]byte(`{"active":"true","sub":"s"}`))
	for _, s := range shapeSeeds(doc, "groups") {
		f.Add(s)
	}
	v, err := New(Config{Issuer: fuzzIssuer, Audience: testAudience})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1796144400, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decodeIntrospection(body)
		if err != nil {
			return
		}
		c, err := v.checkIntrospection(m, now)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("refusal not an ErrInvalidToken: %v", err)
			}
			return
		}
		if m["active"] != true || c.Subject == "" || c.Issuer != fuzzIssuer {
			t.Fatalf("accepted %s as %+v", body, c)
		}
		if aud, _ := strs(m["aud"], false); !slices.Contains(aud, testAudience) {
			t.Fatalf("accepted an answer for another audience: %s", body)
		}
	})
}

// FuzzVerifyToken feeds tokens to a Verifier holding real keys and no
// network: nothing panics, every error is one of the two sentinels and
// never holds the token, and what is accepted was signed by a test key.
func FuzzVerifyToken(f *testing.F) {
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	signers := []signer{
		rsaSigner(0, "rsa", "RS256"),
		ecSigner(f, "ec", elliptic.P256(), jwt.SigningMethodES256),
		edSigner(f, "ed"),
	}
	v, err := New(Config{Issuer: fuzzIssuer, Audience: testAudience, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range signers {
		v.keys = append(v.keys, key{id: s.kid, alg: s.alg, pub: s.priv.Public()})
	}
	v.meta = &ProviderMetadata{Issuer: fuzzIssuer, JWKSURI: fuzzIssuer + "/keys"}
	v.kidTried = now // no refresh: the fuzzer never reaches the network
	claims := jwt.MapClaims{
		"iss": fuzzIssuer, "sub": "fuzz-user", "aud": testAudience, "exp": now.Add(time.Hour).Unix(),
		"groups": []string{"g"}, "scope": "a b",
	}
	for _, s := range signers {
		f.Add(s.sign(f, claims))
	}
	b64 := base64.RawURLEncoding.EncodeToString
	f.Add(b64([]byte(`{"alg":"none","kid":"rsa"}`)) + "." + b64([]byte(`{"sub":"fuzz-user"}`)) + ".")
	f.Add(b64([]byte(`{"alg":"HS256","kid":"rsa"}`)) + "." + b64([]byte(`{"sub":"fuzz-user"}`)) + ".c2ln")
	f.Add(b64([]byte(`{"alg":"RS256","kid":7}`)) + "." + b64([]byte(`{}`)) + ".c2ln")
	f.Add(b64(deepjson.Arrays(1000)) + "." + b64(deepjson.Objects(1000)) + ".c2ln")
	f.Add("opaque")
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := v.VerifyAccessToken(context.Background(), raw)
		if err != nil {
			if errors.Is(err, ErrInvalidToken) == errors.Is(err, ErrUnavailable) {
				t.Fatalf("error wraps neither or both sentinels: %v", err)
			}
			for _, part := range strings.Split(raw, ".") {
				if len(part) >= 16 && strings.Contains(err.Error(), part) {
					t.Fatalf("the token is in the error %q", err)
				}
			}
			return
		}
		if c.Subject != "fuzz-user" || c.Issuer != fuzzIssuer {
			t.Fatalf("accepted a token no test key signed: %+v", c)
		}
	})
}
