package pull

import (
	"context"
	"fmt"
	"testing"

	"github.com/skillreg/skillreg/internal/hostile"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/sigverify"
)

// BenchmarkPullVerifyKeys pulls 20 signed skills (three files each) from a
// loopback server, with and without keys: the price of reading and
// checking each skill's proof beside its files.
func BenchmarkPullVerifyKeys(b *testing.B) {
	alice := sigtest.NewSSHKey(b, "alice")
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("skill-%02d", i)
	}
	_, sk := hostile.SignedSkills(b, alice, names...)
	var skills []hostile.Skill
	for _, n := range names {
		skills = append(skills, sk[n].Serve(b))
	}
	srv := hostile.New(b, hostile.Options{Skills: skills, PageSize: 50})
	keys, err := sigverify.Parse(nil, []byte(alice.AllowedSigner("alice@example.com")))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		keys *sigverify.Keys
	}{{"plain", nil}, {"keys", keys}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				rep, err := Pull(context.Background(), Options{Dir: b.TempDir(), Server: srv.URL, Keys: c.keys}, nil)
				if err != nil || len(rep.Installed) != len(names) {
					b.Fatalf("%+v, %v", rep, err)
				}
			}
		})
	}
}
