package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyKeys: a verify section parses with its mode defaulted, and
// every mistake is an error naming the key and the source's line.
func TestVerifyKeys(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "team.asc")
	signers := filepath.Join(dir, "allowed_signers")
	for _, f := range []string{keys, signers} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := func(ref, verify string) string {
		return "sources:\n  - name: a\n    url: https://example.com/x.git\n" + ref + "    verify:\n" + verify
	}
	c, err := Parse([]byte(src("    ref: {tag: v1}\n", "      openpgp_keys: ["+keys+"]\n      ssh_allowed_signers: "+signers+"\n")), dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Sources[0].Verify; v == nil || v.Mode != VerifyHead || len(v.OpenPGPKeys) != 1 || v.SSHAllowedSigners != signers {
		t.Fatalf("verify %+v", v)
	}
	for _, mode := range []string{"tag", "tag-and-head"} {
		for _, ref := range []string{"{tag: v1}", "{semver: \"^1\"}", "{release: latest}"} {
			if _, err := Parse([]byte(src("    ref: "+ref+"\n", "      mode: "+mode+"\n      openpgp_keys: ["+keys+"]\n")), dir); err != nil {
				t.Errorf("mode %s with ref %s: %v", mode, ref, err)
			}
		}
	}

	cases := []struct{ yaml, want string }{
		{src("", "      mode: tag\n      openpgp_keys: ["+keys+"]\n"), "line 2: sources[0].verify.mode: tag needs a tag, semver or release ref"},
		{src("    ref: {branch: main}\n", "      mode: tag-and-head\n      openpgp_keys: ["+keys+"]\n"), "sources[0].verify.mode: tag-and-head needs a tag, semver or release ref"},
		{src("", "      mode: sometimes\n      openpgp_keys: ["+keys+"]\n"), `sources[0].verify.mode: "sometimes" is not one of head, tag, tag-and-head`},
		{src("", "      mode: head\n"), "sources[0].verify: list the trusted keys in openpgp_keys, ssh_allowed_signers, or both"},
		{src("", "      openpgp_keys: ["+keys+", "+filepath.Join(dir, "missing.asc")+"]\n"), "sources[0].verify.openpgp_keys[1]: open "},
		{src("", "      ssh_allowed_signers: "+dir+"\n"), "sources[0].verify.ssh_allowed_signers: " + dir + " is not a regular file"},
		{src("", "      ssh_allowed_signers: "+signers+"\n      colour: red\n"), `unknown key "colour"`},
		{"sources:\n  - name: a\n    dir: " + dir + "\n    verify:\n      openpgp_keys: [" + keys + "]\n", "sources[0].verify: applies to git sources (url) only"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}
