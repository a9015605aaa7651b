package oidctest

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// KeyChoice is how Sign signs, for the negative cases of a verifier's
// tests.
type KeyChoice int

const (
	// KeyCurrent signs with the current published key under its kid: the
	// token verifies (unless its claims are wrong).
	KeyCurrent KeyChoice = iota
	// KeyForeign signs with a key the provider never published, under a
	// kid of its own.
	KeyForeign
	// KeyForeignSameKID signs with a key the provider never published,
	// under the current key's kid: only the signature check refuses it.
	KeyForeignSameKID
	// KeyNone makes an unsigned token: header alg "none", empty signature.
	KeyNone
	// KeyHS256 signs with HMAC-SHA256 keyed by the current public key's DER
	// (PKIX) bytes under its kid: the algorithm-confusion attack on a
	// verifier that lets the token's header pick the algorithm.
	KeyHS256
)

// Claims are the claims of an access token the provider would issue now to
// subject (a user's Subject or a client ID) for audience, expiring after
// Options.AccessTokenTTL: iss, sub, aud, iat, nbf, exp, jti, client_id
// (the client itself, or for a user the first of Options.Clients), scope
// "", groups, and the user's email. Change them (exp, aud, ...) and Sign
// the result for a negative case.
func (p *Provider) Claims(subject, audience string) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":   p.issuer,
		"sub":   subject,
		"aud":   audience,
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(p.opts.AccessTokenTTL).Unix(),
		"jti":   newID(),
		"scope": "",
	}
	if cl, ok := p.storage.clients[subject]; ok {
		c["client_id"] = subject
		c["groups"] = groupsClaim(cl.Groups)
		return c
	}
	if len(p.opts.Clients) > 0 {
		c["client_id"] = p.opts.Clients[0].ID
	}
	if u, ok := p.storage.user(subject); ok {
		c["groups"] = groupsClaim(u.Groups)
		if u.Email != "" {
			c["email"] = u.Email
			c["email_verified"] = true
		}
	}
	return c
}

// Sign makes a compact JWS (typ JWT) of claims, signed as key says.
func (p *Provider) Sign(t testing.TB, claims map[string]any, key KeyChoice) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("oidctest: claims: %v", err)
	}
	cur := p.storage.keys.current()
	var (
		alg jose.SignatureAlgorithm
		sk  any
		kid = cur.id
	)
	switch key {
	case KeyCurrent:
		alg, sk = cur.alg, cur.priv
	case KeyForeign, KeyForeignSameKID:
		f := p.foreignKey(t)
		alg, sk = f.alg, f.priv
		if key == KeyForeign {
			kid = f.id
		}
	case KeyNone:
		header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
		enc := base64.RawURLEncoding
		return enc.EncodeToString(header) + "." + enc.EncodeToString(payload) + "."
	case KeyHS256:
		der, err := x509.MarshalPKIXPublicKey(cur.priv.Public())
		if err != nil {
			t.Fatalf("oidctest: public key DER: %v", err)
		}
		alg, sk = jose.HS256, der
	default:
		t.Fatalf("oidctest: unknown KeyChoice %d", key)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: sk},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatalf("oidctest: signer: %v", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatalf("oidctest: sign: %v", err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("oidctest: serialize: %v", err)
	}
	return raw
}

// foreignKey is made once per provider, of the provider's algorithm.
func (p *Provider) foreignKey(t testing.TB) *signingKey {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.foreign == nil {
		k, err := newSigningKey(p.opts.Algorithm)
		if err != nil {
			t.Fatalf("oidctest: foreign key: %v", err)
		}
		p.foreign = k
	}
	return p.foreign
}
