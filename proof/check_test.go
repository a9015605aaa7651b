package proof_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/hostile"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/proof"
	"github.com/skillreg/skillreg/sigverify"
)

// skillFiles is the skill the tests prove, at skills/review/pr.
var skillFiles = map[string]string{
	"SKILL.md":       testkit.SkillMD("pr"),
	"scripts/run.sh": "#!/bin/sh\necho review\n",
	"refs/a.md":      "# a\n",
	"refs/deep/b.md": "# b\n",
	// Two folders with the same content are one tree, listed once and
	// walked twice.
	"twin/one/x.md": "same\n",
	"twin/two/x.md": "same\n",
}

const skillDir = "skills/review/pr"

// fixture is a real repository with a signed commit and a signed tag, the
// skill's proof from git's view of it, and the keys that trust the signer.
type fixture struct {
	repo   *hostile.Repo
	commit string
	tag    string
	keys   *sigverify.Keys
	files  map[string][]byte
	proof  *proof.Proof
}

func newFixture(t testing.TB, format string) *fixture {
	t.Helper()
	key := sigtest.NewSSHKey(t, "alice")
	r := hostile.NewRepo(t, format, key)
	files := map[string]string{"skills/other/SKILL.md": testkit.SkillMD("other"), "README.md": "top\n"}
	for p, c := range skillFiles {
		files[skillDir+"/"+p] = c
	}
	commit := r.Commit(t, files, true)
	tag := r.Tag(t, "v1", commit, true)
	fx := &fixture{repo: r, commit: commit, tag: tag, keys: trust(t, key), files: map[string][]byte{}}
	for p, c := range skillFiles {
		fx.files[p] = []byte(c)
	}
	fx.proof = hostile.GitProof(t, r.Dir, "https://example.com/acme/skills", "team", "review/pr", skillDir, commit, tag)
	return fx
}

func (fx *fixture) check(t testing.TB, p *proof.Proof, files map[string][]byte) (proof.Result, error) {
	t.Helper()
	return proof.Check(hostile.EncodeProof(t, p), files, fx.keys)
}

func TestCheckAcceptsHonestProofs(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, format)
			res, err := fx.check(t, fx.proof, fx.files)
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit != fx.commit || res.Tag != fx.tag || res.Path != skillDir || res.Source != "team" || res.Skill != "review/pr" || res.ObjectFormat != format {
				t.Errorf("result = %+v", res)
			}
			if res.Signed != sigverify.Commit || !res.Signature.Verified || res.Signature.Type != "ssh" || !strings.HasPrefix(res.Signature.Key, "SHA256:") || res.Signature.Signer != "alice@example.com" {
				t.Errorf("signature = %s %+v", res.Signed, res.Signature)
			}
			// Without the tag, the commit alone proves the same.
			p := hostile.CloneProof(fx.proof)
			p.Tag = ""
			p.Objects = append(p.Objects[:1], p.Objects[2:]...)
			if res, err := fx.check(t, p, fx.files); err != nil || res.Tag != "" {
				t.Errorf("without the tag: %+v, %v", res, err)
			}
		})
	}
}

func TestCheckAcceptsATagSignatureOverAnUnsignedCommit(t *testing.T) {
	t.Parallel()
	key := sigtest.NewSSHKey(t, "alice")
	r := hostile.NewRepo(t, "sha1", key)
	commit := r.Commit(t, map[string]string{"pr/SKILL.md": testkit.SkillMD("pr")}, false)
	tag := r.Tag(t, "v1", commit, true)
	keys := trust(t, key)
	files := map[string][]byte{"SKILL.md": []byte(testkit.SkillMD("pr"))}
	p := hostile.GitProof(t, r.Dir, "", "team", "pr", "pr", commit, tag)
	res, err := proof.Check(hostile.EncodeProof(t, p), files, keys)
	if err != nil || res.Signed != sigverify.Tag || res.Signature.Signer != "alice@example.com" {
		t.Fatalf("Check = %s %+v, %v", res.Signed, res.Signature, err)
	}
	// The same commit without its tag is unsigned.
	p.Tag, p.Objects = "", append(p.Objects[:1], p.Objects[2:]...)
	if _, err := proof.Check(hostile.EncodeProof(t, p), files, keys); !errors.Is(err, proof.ErrSignature) || !errors.Is(err, sigverify.ErrUnsigned) {
		t.Fatalf("without the tag: %v, want ErrSignature and ErrUnsigned", err)
	}
}

func TestCheckRefuses(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "sha1")
	// Another signed commit where the skill differs, and an unsigned one
	// where it does not.
	changed := map[string]string{skillDir + "/refs/a.md": "# a, changed\n"}
	for p, c := range skillFiles {
		if changed[skillDir+"/"+p] == "" {
			changed[skillDir+"/"+p] = c
		}
	}
	other := fx.repo.Commit(t, changed, true)
	otherProof := hostile.GitProof(t, fx.repo.Dir, "", "team", "review/pr", skillDir, other, "")
	unsignedFiles := map[string]string{}
	for p, c := range skillFiles {
		unsignedFiles[skillDir+"/"+p] = c
	}
	unsigned := fx.repo.Commit(t, unsignedFiles, false)
	unsignedProof := hostile.GitProof(t, fx.repo.Dir, "", "team", "review/pr", skillDir, unsigned, "")
	strangerKeys := trust(t, sigtest.NewSSHKey(t, "mallory"))

	skillTree := hostile.SkillTree(t, fx.proof)
	withFile := func(rel string, data []byte) map[string][]byte {
		m := map[string][]byte{}
		for k, v := range fx.files {
			m[k] = v
		}
		if data == nil {
			delete(m, rel)
		} else {
			m[rel] = data
		}
		return m
	}
	cases := []struct {
		name   string
		proof  func() *proof.Proof
		files  map[string][]byte
		keys   *sigverify.Keys
		want   error
		detail string
	}{
		{name: "a file changed by one byte", files: withFile("refs/a.md", []byte("# A\n")), want: proof.ErrMismatch, detail: "rule 4"},
		{name: "a file the tree lists not received", files: withFile("refs/deep/b.md", nil), want: proof.ErrMismatch, detail: "refs/deep/b.md, which was not received"},
		{name: "a file received that the tree omits", files: withFile("evil.sh", []byte("#!/bin/sh\n")), want: proof.ErrMismatch, detail: "received evil.sh"},
		{name: "a tree's data changed by one byte", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Objects[hostile.FindObject(p, skillTree)].Data[7] ^= 1
			return p
		}, want: proof.ErrMismatch, detail: "rule 1"},
		{name: "the commit's data changed by one byte", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			c := p.Objects[hostile.FindObject(p, p.Commit)].Data
			c[bytes.Index(c, []byte("\n\n"))+2] ^= 1
			return p
		}, want: proof.ErrMismatch, detail: "rule 1"},
		{name: "an object nothing reaches", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Objects = append(p.Objects, otherProof.Objects[hostile.FindObject(otherProof, hostile.SkillTree(t, otherProof))])
			return p
		}, want: proof.ErrMismatch, detail: "rule 1"},
		{name: "the commit missing", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Objects = p.Objects[1:]
			return p
		}, want: proof.ErrMismatch, detail: "rule 2"},
		{name: "the tag of another commit", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			other := fx.repo.Tag(t, "v2", other, true)
			i := hostile.FindObject(p, p.Tag)
			p.Objects[i] = proof.Object{ID: other, Type: proof.TypeTag, Data: []byte(fx.repo.Git(t, "cat-file", "tag", other) + "\n")}
			p.Tag = other
			return p
		}, want: proof.ErrMismatch, detail: "rule 2"},
		{name: "a tree on the path missing", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Objects = append(p.Objects[:3], p.Objects[4:]...) // root, skills, [review], pr
			return p
		}, want: proof.ErrMismatch, detail: "rule 3"},
		{name: "a path that is not in the tree", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Path = "skills/review/pr2"
			return p
		}, want: proof.ErrMismatch, detail: "rule 3"},
		{name: "a tree below the skill missing", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Objects = p.Objects[:len(p.Objects)-1]
			return p
		}, want: proof.ErrMismatch, detail: "rule 4"},
		{name: "a proof for another commit", proof: func() *proof.Proof { return hostile.CloneProof(otherProof) }, want: proof.ErrMismatch, detail: "refs/a.md: the bytes received are blob"},
		{name: "a tree that omits a file, rewritten up to the commit", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			i := hostile.FindObject(p, skillTree)
			hostile.RewriteObject(t, p, skillTree, hostile.WithoutEntry(t, p.ObjectFormat, p.Objects[i].Data, "SKILL.md"))
			return p
		}, files: withFile("SKILL.md", nil), want: sigverify.ErrBadSignature, detail: "rule 5"},
		{name: "an unsigned commit", proof: func() *proof.Proof { return hostile.CloneProof(unsignedProof) }, want: sigverify.ErrUnsigned, detail: "rule 5"},
		{name: "a signer the client does not trust", keys: strangerKeys, want: sigverify.ErrUnknownKey, detail: "rule 5"},
		{name: "an unsupported version", proof: func() *proof.Proof {
			p := hostile.CloneProof(fx.proof)
			p.Proof = 2
			return p
		}, want: proof.ErrUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fx.proof
			if c.proof != nil {
				p = c.proof()
			}
			files, keys := c.files, c.keys
			if files == nil {
				files = fx.files
			}
			if keys == nil {
				keys = fx.keys
			}
			_, err := proof.Check(hostile.EncodeProof(t, p), files, keys)
			if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.detail) {
				t.Fatalf("Check = %v, want %v with %q", err, c.want, c.detail)
			}
			if errors.Is(c.want, sigverify.ErrUnsigned) || errors.Is(c.want, sigverify.ErrUnknownKey) || errors.Is(c.want, sigverify.ErrBadSignature) {
				if !errors.Is(err, proof.ErrSignature) {
					t.Errorf("Check = %v, want ErrSignature too", err)
				}
			}
		})
	}
	if _, err := proof.Check(bytes.Repeat([]byte(" "), proof.MaxBytes+1), fx.files, fx.keys); !errors.Is(err, proof.ErrTooLarge) {
		t.Errorf("a proof over MaxBytes: %v", err)
	}
}

// TestCheckBoundsTheWalk: trees are named by content, so forty trees that
// each name the next twice stand for 2^40 directories; Check stops at its
// bound instead of walking them.
func TestCheckBoundsTheWalk(t *testing.T) {
	t.Parallel()
	p := &proof.Proof{Proof: proof.Version, Source: "team", ObjectFormat: proof.SHA1}
	next := proof.ObjectID(proof.SHA1, proof.TypeTree, nil)
	p.Objects = append(p.Objects, proof.Object{ID: next, Type: proof.TypeTree, Data: []byte{}})
	for range 40 {
		bin := hexBytes(t, next)
		var data []byte
		for _, name := range []string{"a", "b"} {
			data = append(data, "40000 "+name+"\x00"...)
			data = append(data, bin...)
		}
		next = proof.ObjectID(proof.SHA1, proof.TypeTree, data)
		p.Objects = append(p.Objects, proof.Object{ID: next, Type: proof.TypeTree, Data: data})
	}
	commit := []byte("tree " + next + "\nauthor a <a> 0 +0000\ncommitter a <a> 0 +0000\n\nm\n")
	p.Commit = proof.ObjectID(proof.SHA1, proof.TypeCommit, commit)
	p.Objects = append(p.Objects, proof.Object{ID: p.Commit, Type: proof.TypeCommit, Data: commit})
	keys := trust(t, sigtest.NewSSHKey(t, "alice"))
	done := make(chan error, 1)
	go func() {
		_, err := proof.Check(hostile.EncodeProof(t, p), map[string][]byte{}, keys)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, proof.ErrMismatch) || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("Check = %v, want the walk's bound", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Check is still walking after a minute")
	}
}

func FuzzCheck(f *testing.F) {
	fx := newFixture(f, "sha1")
	honest := hostile.EncodeProof(f, fx.proof)
	f.Add(honest)
	noTag := hostile.CloneProof(fx.proof)
	noTag.Tag, noTag.Objects = "", append(noTag.Objects[:1], noTag.Objects[2:]...)
	f.Add(hostile.EncodeProof(f, noTag))
	// A proof rewritten by a forger: consistent up to the signature.
	forged := hostile.CloneProof(fx.proof)
	top := hostile.SkillTree(f, forged)
	hostile.RewriteObject(f, forged, top, hostile.WithoutEntry(f, forged.ObjectFormat, forged.Objects[hostile.FindObject(forged, top)].Data, "SKILL.md"))
	f.Add(hostile.EncodeProof(f, forged))
	f.Add([]byte(`{"proof":1}`))
	f.Add([]byte(`{"proof":1,"source":"s","object_format":"sha1","commit":"` + fx.commit + `","path":"","objects":[]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		res, err := proof.Check(p, fx.files, fx.keys)
		if err != nil {
			// Every refusal is one of the documented kinds, so pull can
			// name the check that failed.
			if !errors.Is(err, proof.ErrMismatch) && !errors.Is(err, proof.ErrSignature) && !errors.Is(err, proof.ErrMalformed) &&
				!errors.Is(err, proof.ErrTooLarge) && !errors.Is(err, proof.ErrUnsupported) {
				t.Fatalf("Check = %v: not a documented refusal", err)
			}
			return
		}
		// Only the one signed commit holds these files: whatever the
		// bytes, an accepted proof proves that commit, signed by alice.
		if res.Commit != fx.commit || res.Signature.Signer != "alice@example.com" || !res.Signature.Verified {
			t.Fatalf("accepted %q as %+v", p, res)
		}
	})
}

// trust is the keys of a client that trusts key as alice@example.com.
func trust(t testing.TB, key *sigtest.SSHKey) *sigverify.Keys {
	t.Helper()
	k, err := sigverify.Parse(nil, []byte(key.AllowedSigner("alice@example.com")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
