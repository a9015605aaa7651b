package access

import (
	"context"
	"testing"

	"github.com/skillreg/skillreg/internal/oidctest"
	"github.com/skillreg/skillreg/oidc"
)

// BenchmarkGateAuthenticate measures what the verified-token cache saves:
// a provider token (RS256, from the loopback provider) checked by the real
// verifier with its keys cached, against the same token found in the
// gate's cache (the second ask of one request: the /mcp middleware, then
// the MCP caller).
func BenchmarkGateAuthenticate(b *testing.B) {
	p := oidctest.Start(b, oidctest.Options{Clients: []oidctest.Client{{ID: "agent", Secret: "s", Groups: []string{"g"}}}})
	const aud = "https://skills.example.com/mcp"
	tok := p.ClientCredentials(b, "agent", "s", aud)
	v, err := oidc.New(oidc.Config{Issuer: p.Issuer(), Audience: aud})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.VerifyAccessToken(ctx, tok); err != nil { // discovery and keys
		b.Fatal(err)
	}
	rules := Rules{{Groups: []string{"g"}, Sources: []string{"a"}}}
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if _, err := NewGate(GateOptions{Verifier: v, Rules: rules}).Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		g := NewGate(GateOptions{Verifier: v, Rules: rules})
		g.Authenticate(ctx, tok)
		for b.Loop() {
			if _, err := g.Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
