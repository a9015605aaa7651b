package oidc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/redact"
)

// Bounds of what the provider may send.
const (
	maxDiscoveryBytes     = 256 << 10
	maxJWKSBytes          = 1 << 20
	maxIntrospectionBytes = 256 << 10
	// maxKeys bounds a JWKS: providers publish a handful.
	maxKeys = 100
	// RSA keys outside these sizes are skipped: too weak, or slow enough to
	// verify that a provider's mistake would cost every request.
	minRSABits, maxRSABits = 2048, 8192
)

// jsonLimits bound the provider's documents before they are decoded: none
// is deeper than a few levels.
var jsonLimits = jsonbound.Limits{MaxDepth: 32, MaxTokens: 1 << 16}

// get fetches url with a bounded body and the fetch timeout.
func (v *Verifier) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, v.fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return v.do(req, limit)
}

// do sends req and reads a 200 answer of at most limit bytes.
func (v *Verifier) do(req *http.Request, limit int64) ([]byte, error) {
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s %s: %s", req.Method, req.URL.Redacted(), redact.Status(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read: %w", req.Method, req.URL.Redacted(), err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%s %s: answer larger than %d bytes", req.Method, req.URL.Redacted(), limit)
	}
	return body, nil
}

// decodeMetadata decodes a discovery document and checks it is the
// configured issuer's (OpenID Connect Discovery 1.0, section 4.3) and that
// its endpoints are usable.
func decodeMetadata(body []byte, issuer string) (ProviderMetadata, error) {
	var m ProviderMetadata
	if err := jsonbound.Check(body, jsonLimits); err != nil {
		return m, err
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("decode: %w", err)
	}
	if m.Issuer != issuer {
		return m, fmt.Errorf("the document's issuer %q is not the configured %q", redact.Remote(m.Issuer, 200), issuer)
	}
	if m.JWKSURI == "" {
		return m, errors.New("the document has no jwks_uri")
	}
	for _, e := range []struct{ name, url string }{
		{"jwks_uri", m.JWKSURI},
		{"authorization_endpoint", m.AuthorizationEndpoint},
		{"token_endpoint", m.TokenEndpoint},
		{"userinfo_endpoint", m.UserinfoEndpoint},
		{"end_session_endpoint", m.EndSessionEndpoint},
		{"introspection_endpoint", m.IntrospectionEndpoint},
		{"revocation_endpoint", m.RevocationEndpoint},
	} {
		if e.url == "" {
			continue
		}
		if err := checkURL(e.name, e.url); err != nil {
			return m, errors.New(redact.Remote(err.Error(), 300))
		}
	}
	return m, nil
}

// key is one usable signing key of the provider.
type key struct {
	id  string
	alg string // empty: any algorithm its type fits
	pub any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// decodeJWKS decodes a JWK set (RFC 7517), keeping the public signature
// keys of supported types and skipping the others (RFC 7517 section 5:
// keys not understood are ignored). Keys with private or symmetric material
// are skipped before go-jose parses them. A set with no usable key is an
// error, so a provider's empty answer never empties the cache.
func decodeJWKS(body []byte) (keys []key, skipped int, err error) {
	if err := jsonbound.Check(body, jsonLimits); err != nil {
		return nil, 0, err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("decode: %w", err)
	}
	if len(set.Keys) > maxKeys {
		return nil, 0, fmt.Errorf("%d keys, more than %d", len(set.Keys), maxKeys)
	}
	for _, raw := range set.Keys {
		k, ok := decodeKey(raw)
		if !ok {
			skipped++
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("no usable signing key among %d", len(set.Keys))
	}
	return keys, skipped, nil
}

func decodeKey(raw json.RawMessage) (key, bool) {
	var peek struct {
		Kty string          `json:"kty"`
		Use string          `json:"use"`
		Alg string          `json:"alg"`
		D   json.RawMessage `json:"d"`
		K   json.RawMessage `json:"k"`
	}
	if json.Unmarshal(raw, &peek) != nil || peek.D != nil || peek.K != nil || peek.Kty == "oct" {
		return key{}, false
	}
	if peek.Use != "" && peek.Use != "sig" {
		return key{}, false
	}
	if peek.Alg != "" && !slices.Contains(allowedAlgorithms, peek.Alg) {
		return key{}, false
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(bytes.Clone(raw)); err != nil || !jwk.Valid() || !jwk.IsPublic() {
		return key{}, false
	}
	switch pub := jwk.Key.(type) {
	case *rsa.PublicKey:
		if bits := pub.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return key{}, false
		}
	case *ecdsa.PublicKey:
		if curveAlg(pub.Curve) == "" {
			return key{}, false
		}
	case ed25519.PublicKey:
	default:
		return key{}, false
	}
	k := key{id: jwk.KeyID, alg: jwk.Algorithm, pub: jwk.Key}
	if k.alg != "" && !fits(k.pub, k.alg) {
		return key{}, false
	}
	return k, true
}

func curveAlg(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	case elliptic.P521():
		return "ES512"
	}
	return ""
}

// fits reports whether a public key may verify alg: the key's type is the
// algorithm's, and an EC key's curve is the one the algorithm names.
func fits(pub any, alg string) bool {
	switch p := pub.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return curveAlg(p.Curve) == alg
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// match returns the keys that may verify a token with kid and alg (every
// key fitting alg when the token names no kid), and whether kid is known at
// all.
func match(keys []key, kid, alg string) (found bool, fit []jwt.VerificationKey) {
	for _, k := range keys {
		if kid != "" && k.id != kid {
			continue
		}
		found = true
		if (k.alg == "" || k.alg == alg) && fits(k.pub, alg) {
			fit = append(fit, k.pub)
		}
	}
	return found, fit
}
