package sigverify_test

import (
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/sigverify"
)

// BenchmarkVerify is the cost of one check of a signed commit, what a
// verified source adds to a sync (and pull to an install).
func BenchmarkVerify(b *testing.B) {
	srv := gittest.NewServer(b)
	r := srv.CreateRepo("bench")
	gpg := sigtest.NewGPGKey(b, "Bench <bench@example.com>", sigtest.GPGOptions{})
	ssh := sigtest.NewSSHKey(b, "bench")
	keys, err := sigverify.Parse([][]byte{gpg.Public}, []byte(ssh.AllowedSigner("bench@example.com")))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		signer sigtest.Signer
	}{{"openpgp-ed25519", gpg}, {"ssh-ed25519", ssh}} {
		_, raw := sigtest.Object(b, r, sigtest.Commit(r, c.signer, "bench "+c.name))
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := keys.Verify(sigverify.Commit, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
