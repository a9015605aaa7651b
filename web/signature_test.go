package web

import (
	"context"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/regtest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// TestSignatureShown: a skill served from a verified commit shows who
// signed it with which key on its page, and a "signed" badge in the
// catalog; an unverified source's shows neither. (This commit is in no
// object store: its proof is not served, and not named.)
func TestSignatureShown(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{"skills/deploy-checklist/SKILL.md": teamSkills["deploy-checklist/SKILL.md"]})
	tree := skill.DirTree{Root: dir}
	res, err := skill.Index(context.Background(), tree, skill.Options{RootName: "acme"})
	if err != nil || len(res.Skills) != 1 {
		t.Fatalf("index: %v %+v", err, res)
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	sig := &sigverify.Signature{Verified: true, Type: "ssh", Key: "SHA256:Zm9vYmFy", Signer: "release@acme.example"}
	signed := catalog.NewSnapshot(&catalog.Snapshot{Source: "acme", Kind: catalog.KindGit, Repository: "https://example.com/acme/skills.git",
		Ref: "tag:v1", Commit: sha, Signature: sig, Skills: res.Skills, IndexedAt: time.Now()}, tree)
	plain := catalog.NewSnapshot(&catalog.Snapshot{Source: "plain", Kind: catalog.KindDir, Skills: res.Skills, IndexedAt: time.Now()}, tree)
	h, err := New(Options{Catalog: staticCatalog{catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{signed, plain})}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: h, e: newEcho(h)}
	_, body := f.get(t, "/skills/acme/skills/deploy-checklist")
	mustContain(t, "signed skill page", body,
		`<dt>Signature</dt><dd><span class="badge ok">verified</span> ssh key <code>SHA256:Zm9vYmFy</code> by release@acme.example</dd>`)
	_, body = f.get(t, "/skills/plain/skills/deploy-checklist")
	mustNotContain(t, "unsigned skill page", body, "<dt>Signature</dt>", "<dt>Proof</dt>")
	_, body = f.get(t, "/")
	mustContain(t, "catalog", body, `<span class="badge ok" title="signed: ssh key SHA256:Zm9vYmFy by release@acme.example">signed</span>`)
}

// TestSkillPageNamesOnlyServedProofs: a skill page names the skill's proof
// only when MCP serves it (Options.Proofs: the registry MCP asks too), so
// that a reader who asks for it is never refused. A git source's skill
// whose proof would pass proof.MaxBytes (its directory sits in a root
// tree of 900 entries with 4,000-byte names) names none; a skill of a
// narrow tree names its own; without Proofs no page names one.
func TestSkillPageNamesOnlyServedProofs(t *testing.T) {
	reg := regtest.WideAndNarrow(t)
	for _, served := range []bool{true, false} {
		o := Options{Catalog: reg}
		if served {
			o.Proofs = reg
		}
		h, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{h: h, e: newEcho(h)}
		_, body := f.get(t, "/skills/wide/x")
		mustContain(t, "the wide tree's skill page", body, "<h1>x</h1>")
		mustNotContain(t, "the wide tree's skill page", body, "<dt>Proof</dt>")
		_, body = f.get(t, "/skills/narrow/near")
		if served {
			mustContain(t, "the narrow tree's skill page", body, "<dt>Proof</dt><dd><code>skillreg://proof/narrow/near</code>")
		} else {
			mustNotContain(t, "the narrow tree's skill page, proofs not served", body, "<dt>Proof</dt>")
		}
	}
}
