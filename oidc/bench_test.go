package oidc

import (
	"context"
	"crypto/elliptic"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerifyAccessToken is the cost of one access token check with
// the key cached: what every request with a bearer token pays.
func BenchmarkVerifyAccessToken(b *testing.B) {
	for _, s := range []signer{
		rsaSigner(0, "rsa", "RS256"),
		ecSigner(b, "ec", elliptic.P256(), jwt.SigningMethodES256),
		edSigner(b, "ed"),
	} {
		b.Run(s.method.Alg(), func(b *testing.B) {
			c := newClock()
			p := newIDP(b, s)
			v := p.verifier(b, c, nil)
			raw := s.sign(b, p.claims(c.Now()))
			ctx := context.Background()
			if _, err := v.VerifyAccessToken(ctx, raw); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyAccessToken(ctx, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
