package sigverify_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sigtest"
)

// TestAgreesWithGit asks git itself (git verify-commit, verify-tag, with
// gpg.ssh.allowedSignersFile) about SSH-signed commits and tags under
// allowed_signers files that accept or refuse them, and checks that
// Verify says the same.
func TestAgreesWithGit(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	other := sigtest.NewSSHKey(t, "other")
	dir := t.TempDir()
	for _, c := range []struct {
		name, signers string
	}{
		{"listed", h.ssh.AllowedSigner("bob@example.com")},
		{"not listed", other.AllowedSigner("other@example.com")},
		{"namespace git", h.ssh.AllowedSigner("bob@example.com", `namespaces="git"`)},
		{"namespace file", h.ssh.AllowedSigner("bob@example.com", `namespaces="file"`)},
		{"namespace pattern", h.ssh.AllowedSigner("bob@example.com", `namespaces="g?t,file"`)},
		{"negated namespace", h.ssh.AllowedSigner("bob@example.com", `namespaces="*,!git"`)},
		{"expired", h.ssh.AllowedSigner("bob@example.com", `valid-before="20231101Z"`)},
		{"not yet valid", h.ssh.AllowedSigner("bob@example.com", `valid-after="20231201Z"`)},
		{"window", h.ssh.AllowedSigner("bob@example.com", `valid-after="20231101Z"`, `valid-before="20231201Z"`)},
		{"valid after, to the second", h.ssh.AllowedSigner("bob@example.com", `valid-after="`+committed.Format("20060102150405")+`Z"`)},
		{"valid before, to the second", h.ssh.AllowedSigner("bob@example.com", `valid-before="`+committed.Format("20060102150405")+`Z"`)},
		{"expired a second before", h.ssh.AllowedSigner("bob@example.com", `valid-before="`+committed.Add(-1e9).Format("20060102150405")+`Z"`)},
		{"an expired line and a valid one", h.ssh.AllowedSigner("old@example.com", `valid-before="20231101Z"`) + h.ssh.AllowedSigner("bob@example.com")},
	} {
		file := sigtest.WriteAllowedSigners(t, t.TempDir(), c.signers)
		keys := mustParse(t, nil, c.signers)
		for _, obj := range []struct{ verb, id string }{{"verify-commit", h.bySSH}, {"verify-tag", h.tagSSH}} {
			cmd := exec.Command("git", "-C", h.r.WorkDir(), "-c", "gpg.ssh.allowedSignersFile="+file, obj.verb, obj.id)
			cmd.Env = append(cmd.Environ(), gittest.Env()...)
			cmd.Dir = dir
			out, gitErr := cmd.CombinedOutput()
			kind, raw := h.object(t, obj.id)
			s, err := keys.Verify(kind, raw)
			if (gitErr == nil) != s.Verified {
				t.Errorf("%s, %s: git says %v (%s), Verify says %v, %v", c.name, obj.verb, gitErr, strings.TrimSpace(string(out)), s, err)
			}
		}
	}
}
