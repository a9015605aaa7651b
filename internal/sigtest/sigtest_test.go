package sigtest_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sigtest"
)

// git runs git in dir with the isolated environment and returns its
// combined output and error.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(cmd.Environ(), gittest.Env()...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestGitVerifiesWhatSigtestSigns checks the keys and the git
// configuration against git itself: git verify-commit and verify-tag
// accept the commits and tags signed with each kind of key, and reject an
// unsigned commit.
func TestGitVerifiesWhatSigtestSigns(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	r := srv.CreateRepo("signed")
	dir := t.TempDir()
	gpg := sigtest.NewGPGKey(t, "Alice <alice@example.com>", sigtest.GPGOptions{SigningSubkey: true})
	ssh := sigtest.NewSSHKey(t, "bob")
	signers := sigtest.WriteAllowedSigners(t, dir, ssh.AllowedSigner("bob@example.com", `namespaces="git"`))
	verifyCfg := []string{"-c", "gpg.ssh.allowedSignersFile=" + signers, "-c", "gpg.program=" + filepath.Join(gpg.Home, "gpg.sh")}

	r.WriteFiles(map[string]string{"a/SKILL.md": "one"})
	unsigned := r.Commit("unsigned")
	r.WriteFiles(map[string]string{"a/SKILL.md": "two"})
	bySSH := sigtest.Commit(r, ssh, "by ssh")
	r.WriteFiles(map[string]string{"a/SKILL.md": "three"})
	byGPG := sigtest.Commit(r, gpg, "by gpg")
	tagSSH := sigtest.Tag(r, ssh, "v1")
	tagGPG := sigtest.Tag(r, gpg, "v2")
	r.Push("main")

	for _, c := range []struct{ what, verb, id, want string }{
		{"ssh commit", "verify-commit", bySSH, `Good "git" signature for bob@example.com`},
		{"gpg commit", "verify-commit", byGPG, `Good signature from "Alice <alice@example.com>"`},
		{"ssh tag", "verify-tag", tagSSH, `Good "git" signature for bob@example.com`},
		{"gpg tag", "verify-tag", tagGPG, `Good signature from "Alice <alice@example.com>"`},
	} {
		out, err := git(r.WorkDir(), append(verifyCfg, c.verb, c.id)...)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: git %s: %v: %s", c.what, c.verb, err, out)
		}
	}
	if out, err := git(r.WorkDir(), append(verifyCfg, "verify-commit", unsigned)...); err == nil {
		t.Errorf("git verify-commit accepted the unsigned commit: %s", out)
	}
	// The gpg signature was made by the signing subkey; the key's
	// Fingerprint is its primary's, and git names both.
	out, _ := git(r.WorkDir(), append(verifyCfg, "verify-commit", "--raw", byGPG)...)
	if !strings.Contains(out, "VALIDSIG") || !strings.Contains(out, gpg.Fingerprint) {
		t.Errorf("gpg's VALIDSIG does not name primary %s: %s", gpg.Fingerprint, out)
	}
	if !strings.HasPrefix(ssh.Fingerprint, "SHA256:") {
		t.Errorf("ssh fingerprint %q", ssh.Fingerprint)
	}
}

// TestObjectIsTheRawContent checks that Object returns the exact bytes git
// hashes: hashing them as the named type gives the object's id back.
func TestObjectIsTheRawContent(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	r := srv.CreateRepo("raw")
	ssh := sigtest.NewSSHKey(t, "carol")
	c := sigtest.Commit(r, ssh, "signed")
	tag := sigtest.Tag(r, ssh, "v1")
	for _, id := range []string{c, tag} {
		kind, raw := sigtest.Object(t, r, id)
		cmd := exec.Command("git", "hash-object", "-t", kind, "--stdin")
		cmd.Env = append(cmd.Environ(), gittest.Env()...)
		cmd.Stdin = bytes.NewReader(raw)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != id {
			t.Errorf("%s %s: hash of Object's bytes is %s", kind, id, got)
		}
	}
}

// TestWithSignatureIsWhatGitWrites checks that WithSignature, given a
// signed commit's content without its signature and that signature, gives
// back the very bytes git wrote.
func TestWithSignatureIsWhatGitWrites(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	r := srv.CreateRepo("with")
	gpg := sigtest.NewGPGKey(t, "Dan <dan@example.com>", sigtest.GPGOptions{})
	_, raw := sigtest.Object(t, r, sigtest.Commit(r, gpg, "signed"))
	i := bytes.Index(raw, []byte("gpgsig "))
	j := bytes.Index(raw, []byte("-----END PGP SIGNATURE-----\n"))
	if i < 0 || j < 0 {
		t.Fatalf("no gpgsig header in %q", raw)
	}
	end := j + len("-----END PGP SIGNATURE-----\n")
	sig := bytes.ReplaceAll(raw[i+len("gpgsig "):end], []byte("\n "), []byte("\n"))
	unsigned := append(append([]byte{}, raw[:i]...), raw[end:]...)
	if got := sigtest.WithSignature(unsigned, sig); !bytes.Equal(got, raw) {
		t.Errorf("WithSignature:\n%s\nwant\n%s", got, raw)
	}
	// Replacing a signature gives the same bytes too.
	if got := sigtest.WithSignature(raw, sig); !bytes.Equal(got, raw) {
		t.Errorf("WithSignature over a signed commit:\n%s\nwant\n%s", got, raw)
	}
}
