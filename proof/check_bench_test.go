package proof_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/hostile"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/proof"
)

// BenchmarkCheck checks the proof of a skill at the extension's file limit
// (512 files of 2 KiB in 16 folders, one level below the skill, three
// levels below the root) signed with an ssh key: what pull --verify-keys
// adds per skill once the bytes are in.
func BenchmarkCheck(b *testing.B) {
	key := sigtest.NewSSHKey(b, "alice")
	r := hostile.NewRepo(b, "sha1", key)
	repo := map[string]string{"skills/big/one/SKILL.md": testkit.SkillMD("one")}
	files := map[string][]byte{"SKILL.md": []byte(testkit.SkillMD("one"))}
	for i := range 511 {
		rel := fmt.Sprintf("d%02d/f%03d.md", i%16, i)
		body := strings.Repeat(fmt.Sprintf("line %d\n", i), 2048/8)
		repo["skills/big/one/"+rel] = body
		files[rel] = []byte(body)
	}
	commit := r.Commit(b, repo, true)
	p := hostile.EncodeProof(b, hostile.GitProof(b, r.Dir, "", "team", "big/one", "skills/big/one", commit, ""))
	keys := trust(b, key)
	b.ResetTimer()
	for range b.N {
		if _, err := proof.Check(p, files, keys); err != nil {
			b.Fatal(err)
		}
	}
	// After the loop: ResetTimer drops reported metrics.
	b.ReportMetric(float64(len(p)), "proof-bytes")
}
