package web

import (
	"context"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// TestSignatureAndProofShown: a skill served from a verified commit shows
// who signed it with which key, and its proof resource, on its page, and
// a "signed" badge in the catalog; an unverified source's shows neither.
func TestSignatureAndProofShown(t *testing.T) {
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
		`<dt>Signature</dt><dd><span class="badge ok">verified</span> ssh key <code>SHA256:Zm9vYmFy</code> by release@acme.example</dd>`,
		`<dt>Proof</dt><dd><code>skillreg://proof/acme/skills/deploy-checklist</code>`)
	_, body = f.get(t, "/skills/plain/skills/deploy-checklist")
	mustNotContain(t, "unsigned skill page", body, "<dt>Signature</dt>", "<dt>Proof</dt>")
	_, body = f.get(t, "/")
	mustContain(t, "catalog", body, `<span class="badge ok" title="signed: ssh key SHA256:Zm9vYmFy by release@acme.example">signed</span>`)
}
